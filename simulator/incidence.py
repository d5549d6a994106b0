"""Link x coflow incidence matrices in canonical CSR form, for :meth:`rankmap.simulator.network.Network.route`.

Canonical: indices sorted within each row, no duplicates (scipy's ``has_canonical_format``),
so two ways of building the same matrix give the same arrays.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = ["incidence_csr", "with_rows"]


def incidence_csr(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> sparse.csr_array:
    """The CSR matrix of entries ``(rows[E], cols[E], vals[E])``, duplicates summed, in canonical form."""
    matrix = sparse.coo_array((vals, (rows, cols)), shape=shape).tocsr()
    matrix.sum_duplicates()
    return matrix


def with_rows(matrix: sparse.csr_array, at: int, per_block: int, counts: np.ndarray, write) -> sparse.csr_array:
    """``matrix`` with rows of ones added where it has none: the canonical CSR of the sum.

    Parameters
    ----------
    matrix : scipy.sparse.csr_array
        ``matrix[R, C]``, canonical, without entries in rows ``at .. at + 2 * per_block - 1``.
    at, per_block : int
        The empty rows: two blocks of ``per_block`` rows (e.g. the ``nvlink-out`` then the
        ``nvlink-in`` links of every GPU).
    counts : ndarray
        ``counts[2, K]`` (K <= ``per_block``): entries to add in row ``at + k`` (``counts[0, k]``)
        and row ``at + per_block + k`` (``counts[1, k]``).
    write : callable
        ``write(out)`` puts the added entries' columns into the integer array ``out`` (length
        ``counts.sum()``), row by row, ascending within a row.

    Returns
    -------
    scipy.sparse.csr_array
        ``[R, C]``, canonical; int64 indices when int32 ones would overflow.

    Examples
    --------
    >>> m = sparse.csr_array(np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 3.0]]))
    >>> def write(out):
    ...     out[:] = [0, 1, 1]
    >>> with_rows(m, 1, 1, np.array([[2], [1]]), write).toarray().tolist()
    [[2.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 3.0]]
    """
    k = counts.shape[1]
    block = np.zeros(2 * per_block + 1, dtype=np.int64)            # (2P + 1,) row pointers of the block
    block[1:k + 1] = counts[0]
    block[per_block + 1:per_block + k + 1] = counts[1]
    np.cumsum(block, out=block)
    indptr, added = matrix.indptr, int(block[-1])
    cut = int(indptr[at])
    nnz = matrix.nnz + added
    index = indptr.dtype if max(nnz, *matrix.shape) < np.iinfo(indptr.dtype).max else np.int64
    out_ptr = np.empty(indptr.size, dtype=index)
    out_ptr[:at] = indptr[:at]
    out_ptr[at:at + block.size] = block + cut
    out_ptr[at + block.size:] = indptr[at + block.size:] + added
    indices = np.empty(nnz, dtype=index)
    data = np.empty(nnz)
    indices[:cut], data[:cut] = matrix.indices[:cut], matrix.data[:cut]
    write(indices[cut:cut + added])
    data[cut:cut + added] = 1.0
    indices[cut + added:], data[cut + added:] = matrix.indices[cut:], matrix.data[cut:]
    out = sparse.csr_array((data, indices, out_ptr), shape=matrix.shape)
    out.has_canonical_format = True
    return out

"""Max-min fair rates by progressive filling, on a sparse link x coflow incidence matrix.

Rates are max-min fair when no rate can grow without lowering one that is already equal
or smaller (Bertsekas and Gallager, *Data Networks*, 2nd ed., §6.5.2). Progressive
filling (water-filling) computes them: raise every unfrozen rate by the same amount until
some link is full, freeze the coflows through it, repeat.

Here a coflow ``c`` at rate ``r_c`` loads link ``l`` with ``A[l, c] * r_c``, where
``A[l, c]`` counts the coflow's flows on the link (fractions for queue pairs and packet
spraying). Each round makes a few passes over the links in play (those that left are
parked until half are out, then dropped) and touches the entries of the coflows it
freezes (vectorised gathers and a bincount, or one sparse product over the matrix when
they hold a large share of it); the loop runs once per distinct bottleneck level, never
once per flow, and stops as soon as a round has frozen the last coflow. None of this changes a float: every link's free capacity and load see
the same operations in the same order as in the textbook loop over live links. Coflows
that share no link (directly or through others) are independent, so :class:`FairShare` also
labels connected components, letting an event loop recompute only the part of the
network that changed; :meth:`FairShare.rates` also resumes filling from coflows whose
rates are known (``kept``), the ones progressive filling would freeze first.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

__all__ = ["FairShare", "max_min_rates", "progressive_filling"]

_RTOL = 1e-9        # links whose fair share is within this of the minimum saturate together
_WEIGHT_EPS = 1e-9  # the smallest incidence weight is 1/(uplinks * qps), far above this
_GATHER_SHARE = 8   # gather rows that hold at most 1/8 of the matrix; beyond that one product is cheaper


def _rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, rows: np.ndarray):
    """Column indices and values of the given rows of a CSR matrix, concatenated."""
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    return indices[offsets], data[offsets]


def _entries(indptr: np.ndarray, rows: np.ndarray) -> int:
    """Stored entries in the given rows of a compressed matrix."""
    return int((indptr[rows + 1] - indptr[rows]).sum())


class _ByCoflow:
    """``A.T[C, L]`` in CSR (the links of each coflow) for :func:`progressive_filling`.

    Every round reads its row pointers (entries per coflow), but its rows only when it
    gathers a few coflows' links or multiplies by a mask of full links; so the pointers
    come from a bincount of the column indices at once and the transpose (a pass over the
    matrix and a copy of it) is built on first use. Its arrays are those of
    ``A.T.tocsr()``: the same sums in the same order either way.

    Parameters
    ----------
    matrix : scipy.sparse.csr_array or None
        ``A[L, C]``, canonical; None when ``transpose`` is given.
    transpose : scipy.sparse.csr_array, optional
        ``A.T[C, L]`` in CSR, when the caller has it already.
    counts : ndarray, optional
        ``counts[C]``: entries per column of ``matrix``, when the caller knows them.
    """

    def __init__(self, matrix: sparse.csr_array | None, transpose: sparse.csr_array | None = None,
                 counts: np.ndarray | None = None):
        self._matrix, self._transpose = matrix, transpose
        if transpose is not None:
            self.indptr, self.nnz = transpose.indptr, transpose.nnz
        else:
            if counts is None:
                counts = np.bincount(matrix.indices, minlength=matrix.shape[1])
            self.indptr = np.zeros(matrix.shape[1] + 1, dtype=np.int64)
            np.cumsum(counts, out=self.indptr[1:])
            self.nnz = matrix.nnz

    def csr(self) -> sparse.csr_array:
        """The transpose itself."""
        if self._transpose is None:
            csc = sparse.csc_array(self._matrix)
            n_links, n_coflows = self._matrix.shape
            self._transpose = sparse.csr_array((csc.data, csc.indices, csc.indptr), shape=(n_coflows, n_links))
        return self._transpose


def _through(matrix: sparse.csr_array, by_coflow: _ByCoflow, links: np.ndarray, frozen: np.ndarray
             ) -> np.ndarray:
    """Sorted unfrozen coflows with an entry in any of ``links``.

    Gathers the rows of ``links`` when they are few; when they hold more than
    ``1/_GATHER_SHARE`` of the matrix one product over all of it is cheaper (same set:
    weights are positive). Gathered coflows are deduplicated by a mask over all coflows
    when there are fewer coflows than gathered entries, else by sorting them.
    """
    if _GATHER_SHARE * _entries(matrix.indptr, links) <= matrix.nnz:
        coflows, _ = _rows(matrix.indptr, matrix.indices, matrix.data, links)
        if frozen.size <= coflows.size:
            seen = np.zeros(frozen.size, dtype=bool)
            seen[coflows] = True
            return np.flatnonzero(seen & ~frozen)
        return np.unique(coflows[~frozen[coflows]])
    mask = np.zeros(matrix.shape[0])
    mask[links] = 1.0
    return np.flatnonzero((by_coflow.csr() @ mask > 0) & ~frozen)


def _load_of(matrix: sparse.csr_array, by_coflow: _ByCoflow, coflows: np.ndarray, slot: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Weight of ``coflows`` (sorted) on the live links they cross: ``(slots[U], weight[U])``
    (``slot[L]``: link -> live index or -1; slots sorted).

    Either way every link's weights are summed from 0 in ascending coflow order, so the two
    branches give the same floats (and the same as a sum over every live link, whose other
    entries are 0).
    """
    if _GATHER_SHARE * _entries(by_coflow.indptr, coflows) <= by_coflow.nnz:
        transpose = by_coflow.csr()
        links, weights = _rows(transpose.indptr, transpose.indices, transpose.data, coflows)
        at = slot[links]
        mine = at >= 0
        slots, index = np.unique(at[mine], return_inverse=True)
        return slots, np.bincount(index.ravel(), weights[mine], minlength=slots.size)
    mask = np.zeros(matrix.shape[1])
    mask[coflows] = 1.0
    weight = matrix @ mask                                     # (L,) > 0 exactly where a coflow crosses
    links = np.flatnonzero((slot >= 0) & (weight > 0))
    return slot[links], weight[links]                          # slots rise with link index (live is sorted)


def _union(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Sorted union of two sorted index arrays in ``0..n-1`` (a mask when they are many, else a merge)."""
    if 16 * (a.size + b.size) < n:
        return np.union1d(a, b)
    mask = np.zeros(n, dtype=bool)
    mask[a] = True
    mask[b] = True
    return np.flatnonzero(mask)


def progressive_filling(matrix: sparse.csr_array, capacity: np.ndarray, level: float = 0.0,
                        by_coflow: "sparse.csr_array | _ByCoflow | None" = None) -> tuple[np.ndarray, int]:
    """Max-min fair rates of every coflow (column) of ``matrix``.

    Parameters
    ----------
    matrix : scipy.sparse.csr_array
        ``A[L, C]``, non-negative; every column has at least one entry.
    capacity : ndarray
        ``capacity[L]`` > 0.
    level : float
        Rate every coflow already has: filling starts from ``capacity - level * load``
        (0 starts from empty links).
    by_coflow : scipy.sparse.csr_array, optional
        ``matrix.T`` in CSR form (``B[C, L]``), when the caller has it already (or a
        ``_ByCoflow`` that builds it when first read, as :class:`FairShare` passes).

    Returns
    -------
    rates : ndarray
        ``rates[C]``.
    rounds : int
        Bottleneck levels visited.
    """
    n_links, n_coflows = matrix.shape
    if by_coflow is None:
        by_coflow = matrix.T.tocsr()                           # (C, L): the links of each coflow
    if not isinstance(by_coflow, _ByCoflow):
        by_coflow = _ByCoflow(None, by_coflow)
    rate = np.zeros(n_coflows)
    frozen = np.zeros(n_coflows, dtype=bool)
    load = matrix @ np.ones(n_coflows)                         # (L,) weight of unfrozen coflows per link
    free = np.asarray(capacity, dtype=float) - level * load
    live = np.flatnonzero(load > _WEIGHT_EPS)                  # (K,) links still carrying unfrozen coflows
    free, load = free[live], load[live]                        # (K,) in the order of live
    slot = np.full(n_links, -1)                                # (L,) link -> its index in live, or -1
    slot[live] = np.arange(live.size)
    level, rounds, alive, unfrozen = float(level), 0, live.size, n_coflows
    share = np.empty(live.size)
    while alive:
        rounds += 1
        # A link that left play has free = inf and load = 0: share inf, never full, never the
        # minimum, and untouched by the arithmetic below; the slots are compacted only when
        # half of them are out, so a round costs a few passes over the links in play.
        with np.errstate(divide="ignore"):
            np.divide(free, load, out=share)
        step = max(float(share.min()), 0.0)
        level += step
        free -= step * load
        full = np.flatnonzero(share <= step * (1 + _RTOL))
        newly = _through(matrix, by_coflow, live[full], frozen)   # coflows through a full link
        rate[newly] = level
        frozen[newly] = True
        unfrozen -= newly.size
        if not unfrozen:     # every link's load drops to 0 and leaves play: this was the last round
            break
        slots, weight = _load_of(matrix, by_coflow, newly, slot)
        load[slots] -= weight
        out = _union(full, slots[load[slots] <= _WEIGHT_EPS], live.size)   # full, or no unfrozen coflow left
        slot[live[out]] = -1
        free[out], load[out] = np.inf, 0.0
        alive -= out.size
        if 2 * alive < live.size:
            keep = slot[live] >= 0
            live, free, load = live[keep], free[keep], load[keep]
            slot[live] = np.arange(live.size)
            share = np.empty(live.size)
    return rate, rounds


class FairShare:
    """Progressive filling for one incidence matrix, reused across sets of active coflows.

    Parameters
    ----------
    matrix : sparse array
        ``A[L, C]``, non-negative.
    capacity : ndarray
        ``capacity[L]``, bytes per second (> 0 where any coflow crosses).
    entries_per_coflow : ndarray, optional
        ``[C]`` stored entries in each column of ``matrix`` (a canonical CSR), when the
        caller knows them (:attr:`rankmap.simulator.network.Routing.column_entries`);
        otherwise counted here.

    Attributes
    ----------
    rounds : int
        Progressive-filling rounds run so far (all calls).

    Examples
    --------
    Two coflows share link 0 (10 B/s); coflow 0 also crosses link 1 (4 B/s):

    >>> A = sparse.csr_array(np.array([[1.0, 1.0], [1.0, 0.0]]))
    >>> FairShare(A, np.array([10.0, 4.0])).rates().tolist()
    [4.0, 6.0]
    """

    def __init__(self, matrix, capacity: np.ndarray, entries_per_coflow: np.ndarray | None = None):
        self._csc_cache: sparse.csc_array | None = None
        self._whole: tuple | None = None
        if isinstance(matrix, sparse.csr_array) and matrix.has_canonical_format:
            # The CSR the caller built is the one we would build; its transpose waits until
            # something reads it (a fill that freezes every coflow in a few rounds never does).
            self._whole = (matrix, _ByCoflow(matrix, counts=entries_per_coflow))
            self._shape = matrix.shape
            column_ptr = self._whole[1].indptr
        else:
            self._csc_cache = sparse.csc_array(matrix)
            self._csc_cache.sum_duplicates()
            self._shape = self._csc_cache.shape
            column_ptr = self._csc_cache.indptr
        self.capacity = np.asarray(capacity, dtype=float)
        if self.capacity.shape != (self._shape[0],):
            raise ValueError(f"capacity has shape {self.capacity.shape}, expected ({self._shape[0]},)")
        self.has_links = np.diff(column_ptr) > 0
        self.rounds = 0
        self._labels: np.ndarray | None = None

    @property
    def _csc(self) -> sparse.csc_array:
        """``A[L, C]`` in CSC (canonical), built on first use."""
        if self._csc_cache is None:
            by_coflow = self._whole[1].csr()
            self._csc_cache = sparse.csc_array((by_coflow.data, by_coflow.indices, by_coflow.indptr), shape=self._shape)
        return self._csc_cache

    def _whole_matrix(self) -> tuple[sparse.csr_array, "_ByCoflow"]:
        """``(A[L, C] as CSR, A.T[C, L] by coflow)``, built on first use."""
        if self._whole is None:
            n_links, n_coflows = self._csc.shape
            by_coflow = sparse.csr_array((self._csc.data, self._csc.indices, self._csc.indptr),
                                         shape=(n_coflows, n_links))   # the CSC arrays read transposed
            self._whole = (self._csc.tocsr(), _ByCoflow(None, by_coflow))
        return self._whole

    @property
    def n_coflows(self) -> int:
        return self._shape[1]

    def components(self) -> np.ndarray:
        """``component[C]``: coflows that share links, directly or through others, share a label.

        Computed once per instance (the matrix does not change).
        """
        if self._labels is None:
            n_links, n_coflows = self._csc.shape
            graph = sparse.bmat([[None, self._csc], [self._csc.T, None]], format="csr")
            _, labels = connected_components(graph, directed=False)
            self._labels = labels[n_links:]
        return self._labels

    def rates(self, active: np.ndarray | None = None, kept: np.ndarray | None = None,
              kept_rates: np.ndarray | None = None) -> np.ndarray:
        """Max-min fair rates of the active coflows.

        Parameters
        ----------
        active : ndarray of bool, optional
            ``active[C]``; inactive coflows get rate 0 and load nothing. Default: all.
        kept : ndarray of bool, optional
            ``kept[C]``: active coflows whose rates are already known to be ``kept_rates``
            (a warm start). They must be exactly the coflows that progressive filling
            freezes first -- every other active coflow's max-min rate is at least
            ``kept_rates[kept].max()`` -- as after a coflow leaves: the coflows slower than
            it keep their rates (see :func:`rankmap.simulator.events.complete_coflows`).
            Filling starts at that level with their load on the links.
        kept_rates : ndarray, optional
            ``kept_rates[C]``, read where ``kept``.

        Returns
        -------
        ndarray
            ``rates[C]`` in bytes per second; ``inf`` for an active coflow that crosses
            no link (e.g. a GPU sending to itself).
        """
        active = np.ones(self.n_coflows, dtype=bool) if active is None else np.asarray(active, dtype=bool)
        kept = np.zeros(self.n_coflows, dtype=bool) if kept is None else active & np.asarray(kept, dtype=bool)
        if kept.any() and kept_rates is None:
            raise ValueError("kept coflows need kept_rates")
        rate = np.zeros(self.n_coflows)
        rate[active & ~self.has_links] = np.inf
        rate[kept] = np.asarray(kept_rates)[kept] if kept.any() else 0.0
        in_play = active & self.has_links & ~kept
        cols = np.flatnonzero(in_play)
        if cols.size == 0:
            return rate
        if cols.size == self.has_links.sum() and not kept.any():
            # Every coflow with links is in play: fill the whole matrix, no column selection.
            # Same rows in the same order as the compacted matrix below, so the same rates.
            matrix, by_coflow = self._whole_matrix()
            got, rounds = progressive_filling(matrix, self.capacity, 0.0, by_coflow)
            self.rounds += rounds
            rate[cols] = got[cols]
            return rate
        sub = self._csc[:, cols]                                   # (L, k) columns in play
        links, rows = np.unique(sub.indices, return_inverse=True)  # keep only links they cross
        compact = sparse.csc_array((sub.data, rows.ravel(), sub.indptr), shape=(links.size, cols.size)).tocsr()
        capacity, level = self._residual(links, kept, rate)
        got, rounds = progressive_filling(compact, capacity, level)
        self.rounds += rounds
        rate[cols] = got
        return rate

    def _residual(self, links: np.ndarray, kept: np.ndarray, rate: np.ndarray) -> tuple[np.ndarray, float]:
        """``capacity[links]`` less the kept coflows' load, and the level filling resumes at."""
        cols = np.flatnonzero(kept & self.has_links)
        if cols.size == 0:
            return self.capacity[links], 0.0
        used = self._csc[:, cols] @ rate[cols]                     # (L,) bytes/s of kept coflows
        return self.capacity[links] - used[links], float(rate[cols].max())


def max_min_rates(matrix, capacity: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rates ``rates[C]`` of coflows on links; see :class:`FairShare`.

    Examples
    --------
    Three flows on one 9 B/s link, one of them also on a 2 B/s link:

    >>> A = sparse.csr_array(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0]]))
    >>> max_min_rates(A, np.array([9.0, 2.0])).tolist()
    [3.5, 3.5, 2.0]
    """
    return FairShare(matrix, capacity).rates(active)

"""Training text that every machine has offline: the Python standard library's own files.

The corpus is the bytes of the files under ``root`` (default: this Python's standard library,
``sysconfig.get_paths()["stdlib"]``, without ``site-packages``) whose names end in one of the
configured suffixes, read in sorted path order until ``max_bytes``, each followed by a NUL byte
(end of document). Tokens are bytes (vocabulary 256), so no tokenizer file is needed.

Batches are windows of ``seq_len + 1`` bytes at offsets drawn by ``numpy.random.default_rng(
[seed, step])``: step ``s`` of a run is the same whatever the parallel layout, and a resumed run
sees the batches it would have seen. No torch here: batches are numpy arrays.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rankmap.engine.config import DataConfig
from rankmap.errors import EngineError

__all__ = ["Corpus", "load_corpus", "global_batch", "dp_rows"]


@dataclass(frozen=True)
class Corpus:
    """``tokens[N]`` (uint8 bytes), the files they came from and their SHA-256 (for logs)."""

    tokens: np.ndarray
    files: int
    root: str
    sha256: str


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _files(root: Path, suffixes: tuple):
    """Files under ``root`` ending in ``suffixes``, sorted by path, skipping caches and site-packages."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in ("__pycache__", "site-packages", "dist-packages"):
                yield from _files(Path(entry.path), suffixes)
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(suffixes):
            yield Path(entry.path)


def load_corpus(cfg: DataConfig) -> Corpus:
    """Read the corpus (see the module docstring).

    Raises
    ------
    EngineError
        The root is not a folder or holds fewer than 4096 bytes of matching text.
    """
    root = Path(cfg.root) if cfg.root else _stdlib()
    if not root.is_dir():
        raise EngineError(f"data.root: {root} is not a folder")
    chunks, size, count = [], 0, 0
    for path in _files(root, tuple(cfg.suffixes)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        data = data.replace(b"\0", b"")[: cfg.max_bytes - size - 1]
        chunks.append(data + b"\0")
        size += len(data) + 1
        count += 1
        if size >= cfg.max_bytes - 1:
            break
    blob = b"".join(chunks)
    if len(blob) < 4096:
        raise EngineError(f"data.root: {root} holds only {len(blob)} bytes of {', '.join(cfg.suffixes)} text")
    return Corpus(tokens=np.frombuffer(blob, dtype=np.uint8), files=count, root=str(root),
                  sha256=hashlib.sha256(blob).hexdigest())


def global_batch(corpus: Corpus, step: int, seed: int, rows: int, seq_len: int) -> np.ndarray:
    """The whole iteration's windows, ``tokens[rows, seq_len + 1]`` (int64).

    Row ``i`` is ``corpus[o_i : o_i + seq_len + 1]`` with offsets from
    ``default_rng([seed, step])``; inputs are ``[:, :-1]``, targets ``[:, 1:]``.

    Examples
    --------
    >>> c = Corpus(tokens=np.arange(10_000, dtype=np.uint8), files=1, root="-", sha256="-")
    >>> b = global_batch(c, step=3, seed=0, rows=2, seq_len=4)
    >>> b.shape, bool((np.diff(b, axis=1) % 256 == 1).all())
    ((2, 5), True)
    """
    n = corpus.tokens.shape[0]
    if n <= seq_len + 1:
        raise EngineError(f"the corpus ({n} bytes) is shorter than one sequence ({seq_len + 1} bytes)")
    rng = np.random.default_rng([seed, step])
    starts = rng.integers(0, n - seq_len - 1, size=rows)  # (rows,)
    index = starts[:, None] + np.arange(seq_len + 1)[None, :]  # (rows, T+1)
    return corpus.tokens[index].astype(np.int64)


def dp_rows(batch: np.ndarray, dp_rank: int, dp: int) -> np.ndarray:
    """The rows of one data-parallel rank: the ``dp_rank``-th of ``dp`` equal blocks."""
    per = batch.shape[0] // dp
    return batch[dp_rank * per:(dp_rank + 1) * per]

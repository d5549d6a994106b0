"""Files in and out, for every layer: input text read with clear errors, output written atomically.

Input: :func:`read_text` returns a file's UTF-8 text or raises :class:`~rankmap.errors.SpecError`
naming the file (and the line where binary data starts). Output: a temp file in the target
folder, fsync, then rename. A reader never sees a half-written file, and a run that fails before the rename leaves
the previous outputs as they were. Several files are committed together: all are
written to temp files first, and renamed only once every one was written, under an
exclusive lock (flock) on the folder itself, so that two runs writing into one folder
cannot interleave their files. The renames of one commit follow each other at once;
only a kill between two of them (a window of microseconds) could leave files of two
runs side by side, never a truncated one.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import Mapping

from rankmap.errors import RankmapError, SpecError

__all__ = ["atomic_write_files", "atomic_write_text", "read_text", "decode_text"]


def atomic_write_files(folder: str | Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Write ``{name: text or bytes}`` into ``folder`` atomically per file, renaming only after all are written.

    Parameters
    ----------
    folder : str or Path
        Output folder; created if missing.
    files : mapping of str to str or bytes
        File name (no directories) to UTF-8 text, or to raw bytes (e.g. a PNG).

    Returns
    -------
    list of Path
        The final paths, in the order given.

    Raises
    ------
    RankmapError
        If the folder cannot be created or a file cannot be written; temp files are removed.
    """
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RankmapError(f"{out}: cannot create output folder: {exc.strerror}") from None
    staged: list[tuple[str, Path]] = []
    for name in files:
        if (out / name).is_dir() and name not in ("", ".", ".."):
            raise RankmapError(f"{out / name}: cannot write output: a folder is in the way")
    try:
        for name, text in files.items():
            if "/" in name or name in ("", ".", ".."):
                raise RankmapError(f"bad output file name {name!r}")
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            staged.append((tmp, out / name))
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual mode
            data = text if isinstance(text, bytes) else text.encode("utf-8")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        lock = os.open(out, os.O_RDONLY)  # flock on the folder itself: no lock file left behind
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for tmp, final in staged:
                os.replace(tmp, final)
        finally:
            os.close(lock)
    except OSError as exc:
        raise RankmapError(f"{out}: cannot write output: {exc.strerror}") from None
    finally:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return [final for _, final in staged]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write one text file atomically; see :func:`atomic_write_files`."""
    path = Path(path)
    return atomic_write_files(path.parent, {path.name: text})[0]


def read_text(path: str | Path) -> str:
    """A text input file's contents; unreadable or binary files raise SpecError naming the file
    (and the line where binary data starts)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror}", source=str(path)) from None
    return decode_text(data, str(path))


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text of an input file; binary data is an error naming the line it starts on.

    Examples
    --------
    >>> decode_text(b"SwitchName=s1\\n\\xff\\xfe", "t.conf")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: t.conf:2: not UTF-8 text (byte 14 is 0xff): a binary file?
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x}): a binary file?",
                        source=source, line=line) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise SpecError("NUL byte in text: a binary file?", source=source, line=text.count("\n", 0, nul) + 1)
    return text.removeprefix("\ufeff")

"""Files in and out, for every layer: input text read with clear errors, output written atomically.

Input: :func:`read_text` returns a file's UTF-8 text or raises :class:`~rankmap.errors.SpecError`
naming the file (and the line where binary data starts). Output: a temp file in the target
folder, fsync, then rename. A reader never sees a half-written file, and a run that fails before the rename leaves
the previous outputs as they were. Several files are committed together: all are
written to temp files first, and renamed only once every one was written, under an
exclusive lock (flock) on the folder itself, so that two runs writing into one folder
cannot interleave their files. The renames of one commit follow each other at once, in
the order given (the file naming the others last); SIGINT, SIGTERM and SIGHUP wait for the
last rename, so only SIGKILL between two renames (a window of microseconds) could leave
files of two runs side by side, never a truncated one. Input limits (size, special files,
JSON depth and integer length) are checked before parsing.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import stat
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Mapping

from rankmap.errors import RankmapError, SpecError

__all__ = ["atomic_write_files", "atomic_write_text", "iter_lines", "keep_signal_handlers", "read_text", "read_bytes", "decode_text",
           "check_numbers", "parse_json", "MAX_INPUT_BYTES", "MAX_JSON_DEPTH", "MAX_INT_DIGITS", "LOCK_TIMEOUT_S"]


#: Seconds a commit waits for another run's lock on the same output folder before giving up;
#: ``RANKMAP_LOCK_TIMEOUT_S`` overrides it.
LOCK_TIMEOUT_S = float(os.environ.get("RANKMAP_LOCK_TIMEOUT_S", "60"))
#: Temporaries of a dead process (or, without a process id in the name, older than this many
#: seconds) are removed by the next commit into the folder.
STALE_TMP_S = 600.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_TMP = re.compile(r"\.(?P<name>.+?)\.(?:(?P<pid>[0-9]+)\.)?[A-Za-z0-9_]{8}\.tmp")


def atomic_write_files(folder: str | Path, files: Mapping[str, str | bytes], *, remove: tuple[str, ...] = (),
                       before_commit: Callable[[list[Path]], None] | None = None) -> list[Path]:
    """Write ``{name: text or bytes}`` into ``folder`` atomically per file, renaming only after all are written.

    Files are renamed in the order given, so the file that vouches for the others goes last
    (``rankmap.json`` after ``hostfile``). While files are written, SIGINT, SIGTERM and
    SIGHUP remove the temporaries and then end the run as usual (KeyboardInterrupt, exit
    128 + signal); during the renames they are held back until the last rename is done, so
    a signal never leaves half a commit. Temporaries of runs killed outright (SIGKILL) are
    swept by the next commit into the folder. A commit waiting on another run's lock says so
    on stderr and gives up after :data:`LOCK_TIMEOUT_S`.

    Parameters
    ----------
    folder : str or Path
        Output folder; created if missing.
    files : mapping of str to str or bytes
        File name (no directories) to UTF-8 text, or to raw bytes (e.g. a PNG), in commit order.
    remove : tuple of str
        Names of stale files in ``folder`` to delete in the same commit, before the renames
        (an old ``plan.png`` that this run does not write); missing ones are fine.
    before_commit : callable or None
        Called with the final paths once every file is staged, before anything is renamed
        (the command line prints its report there): if it raises, nothing is committed.

    Returns
    -------
    list of Path
        The final paths, in the order given.

    Raises
    ------
    RankmapError
        If the folder cannot be created, a file cannot be written, or the lock wait times out;
        temp files are removed.
    """
    out = Path(folder)
    for name in (*files, *remove):
        if "/" in name or name in ("", ".", ".."):
            raise RankmapError(f"bad output file name {name!r}")
        if (out / name).is_dir():
            raise RankmapError(f"{out / name}: cannot write output: a folder is in the way")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RankmapError(f"{out}: cannot create output folder: {exc.strerror}") from None
    staged: list[tuple[str, Path]] = []
    committed = False
    with _CleanupOnSignal() as guard:
        try:
            _sweep_stale(out, set(files))
            for name, text in files.items():
                fd, tmp = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=out)
                staged.append((tmp, out / name))
                os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual mode
                data = text if isinstance(text, bytes) else text.encode("utf-8")
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            if before_commit is not None:
                before_commit([final for _, final in staged])
            lock = os.open(out, os.O_RDONLY)  # flock on the folder itself: no lock file left behind
            try:
                _lock(lock, out)
                with guard.held():
                    for name in remove:
                        if name not in files and (out / name).is_file():
                            os.unlink(out / name)
                    for tmp, final in staged:
                        os.replace(tmp, final)
                    committed = True
            finally:
                os.close(lock)
        except OSError as exc:
            raise RankmapError(f"{out}: cannot write output: {exc.strerror}") from None
        finally:
            for tmp, _ in staged:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            if created and not committed:  # a failed run leaves no empty folder behind
                try:
                    out.rmdir()
                except OSError:
                    pass
    return [final for _, final in staged]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class _CleanupOnSignal:
    """SIGINT/SIGTERM/SIGHUP raise (so ``finally`` removes temporaries), except inside
    :meth:`held`, where they wait for its end. Previous handlers come back on exit. Only the
    main thread can set handlers; elsewhere this does nothing."""

    def __init__(self):
        self.saved: dict = {}
        self.holding = False
        self.pending: int | None = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self.saved[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def _on_signal(self, signum: int, frame) -> None:
        if self.holding:
            self.pending = signum
            return
        _raise_for(signum)

    @contextmanager
    def held(self):
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            if self.pending is not None:
                _raise_for(self.pending)


def _raise_for(signum: int):
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def _lock(fd: int, folder: Path) -> None:
    """flock(LOCK_EX) on ``fd``, saying on stderr what it waits for, up to :data:`LOCK_TIMEOUT_S`."""
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        holder = _lock_holder(fd)
        if not told:
            print(f"rankmap: waiting for the lock on output folder {folder} (held by {holder}; "
                  f"up to {LOCK_TIMEOUT_S:g} s, RANKMAP_LOCK_TIMEOUT_S)", file=sys.stderr, flush=True)
            told = True
        if time.monotonic() >= deadline:
            raise RankmapError(f"{folder}: timed out after {LOCK_TIMEOUT_S:g} s waiting for the lock on the output "
                               f"folder (held by {holder})")
        time.sleep(0.05)


def _lock_holder(fd: int) -> str:
    """Who holds the flock on ``fd``'s file, from /proc/locks (Linux), in words."""
    info = os.fstat(fd)
    try:
        with open("/proc/locks") as locks:
            for line in locks:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(info.st_ino):
                    return f"process {parts[4]}"
    except OSError:
        pass
    return "another process"


def _sweep_stale(folder: Path, names: set) -> None:
    """Remove temporaries of ``names`` that a killed run left in ``folder`` (see :data:`STALE_TMP_S`)."""
    now = time.time()
    for entry in os.scandir(folder):
        match = _TMP.fullmatch(entry.name)
        if not match or match.group("name") not in names or not entry.is_file(follow_symlinks=False):
            continue
        pid = match.group("pid")
        try:
            if pid is not None and int(pid) != os.getpid() and not _alive(int(pid)) \
                    or pid is None and now - entry.stat(follow_symlinks=False).st_mtime > STALE_TMP_S:
                os.unlink(entry.path)
        except OSError:
            pass  # gone already, or another run's sweep got there first


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def keep_signal_handlers():
    """Put back this process's SIGINT/SIGTERM/SIGHUP handlers after the block: native code
    such as CP-SAT's ``Solve`` installs its own SIGINT handler and leaves it at the default
    afterwards, so a later Ctrl-C would kill the process without cleanup (OR-Tools
    ``SatParameters.catch_sigint_signal``). Re-installing the saved Python handlers restores them."""
    main = threading.current_thread() is threading.main_thread()
    saved = {sig: signal.getsignal(sig) for sig in _SIGNALS} if main else {}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write one text file atomically; see :func:`atomic_write_files`."""
    path = Path(path)
    return atomic_write_files(path.parent, {path.name: text})[0]


#: Largest input file read, in bytes; ``RANKMAP_MAX_INPUT_BYTES`` overrides it. Checked on the
#: open file's size before a byte is read, and again while reading (a file that grows).
MAX_INPUT_BYTES = int(os.environ.get("RANKMAP_MAX_INPUT_BYTES", str(64 * 2**20)))


def read_text(path: str | Path, *, limit: int | None = None) -> str:
    """A text input file's contents; unreadable, special, oversized or binary files raise SpecError
    naming the file (and the line where binary data starts).

    Only regular files are read: a device (``/dev/zero``, ``/dev/urandom``), FIFO or socket is
    refused before reading, as is a file over ``limit`` bytes (default :data:`MAX_INPUT_BYTES`).
    The file is opened non-blocking, so naming a FIFO with no writer does not hang.

    Raises
    ------
    SpecError
        ``FILE: cannot read file: ...``, ``FILE: not a regular file (a character device)``,
        ``FILE: file is N bytes, over the limit of M (RANKMAP_MAX_INPUT_BYTES)``, or a decoding error.
    """
    return decode_text(read_bytes(path, limit=limit), str(path))


def read_bytes(path: str | Path, *, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most ``limit`` (default :data:`MAX_INPUT_BYTES`); see :func:`read_text`."""
    limit = MAX_INPUT_BYTES if limit is None else limit
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror}", source=source) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"not a regular file ({_file_kind(info.st_mode)})", source=source)
        if info.st_size > limit:
            raise SpecError(f"file is {info.st_size} bytes, over the limit of {limit} (RANKMAP_MAX_INPUT_BYTES)",
                            source=source)
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise SpecError(f"file grew over the limit of {limit} bytes (RANKMAP_MAX_INPUT_BYTES)", source=source)
        return b"".join(chunks)
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror}", source=source) from None
    finally:
        os.close(fd)


def iter_lines(text: str):
    r"""The lines of ``text`` one at a time, without their ``\n``: for reading a huge input only as
    far as a limit lets it (``str.splitlines`` makes every line at once; ``io.StringIO`` copies
    the text at 4 bytes a character).

    Examples
    --------
    >>> list(iter_lines("a\nb\n\nc"))
    ['a', 'b', '', 'c']
    """
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        stop = end if stop < 0 else stop
        yield text[start:stop]
        start = stop + 1


def check_numbers(text: str, source: str) -> None:
    """Refuse a run of more decimal digits than Python converts (``sys.get_int_max_str_digits``,
    4,300 by default: ``int()`` raises ValueError past it), naming the line: no number in any
    input format needs as many, and every parser may then call ``int()`` safely."""
    limit = sys.get_int_max_str_digits() or 0
    if limit and len(text) > limit:
        run = re.search(r"[0-9]{%d,}" % (limit + 1), text)
        if run:
            raise SpecError(f"a number of {run.end() - run.start()} digits (at most {limit})", source=source,
                            line=text.count("\n", 0, run.start()) + 1)


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), "a special file")


#: Deepest nesting of JSON arrays and objects accepted (a rank map is 3 deep, kubectl output about 8).
MAX_JSON_DEPTH = 100
#: Longest integer literal accepted in JSON, in digits (int64 needs 19).
MAX_INT_DIGITS = 40


def parse_json(text: str, source: str) -> Any:
    """Parse JSON strictly: duplicate keys, NaN/Infinity, integers over :data:`MAX_INT_DIGITS`
    digits and nesting over :data:`MAX_JSON_DEPTH` are errors (SpecError naming the file, and the
    line where the format gives one), as is any syntax error (RFC 8259 §4 leaves duplicate
    names' meaning undefined; Python's ``json`` would keep the last one silently).

    Examples
    --------
    >>> parse_json('{"a": 1, "a": 2}', "m.json")
    Traceback (most recent call last):
    ...
    rankmap.errors.SpecError: m.json: duplicate key 'a'
    """
    depth = _json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise SpecError(f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels", source=source)
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _unique(pairs, source),
                          parse_int=lambda digits: _json_int(digits, source), parse_constant=_no_constant(source))
    except json.JSONDecodeError as exc:
        raise SpecError(f"invalid JSON: {exc.msg}", source=source, line=exc.lineno) from None
    except RecursionError:
        raise SpecError("invalid JSON: nested too deeply", source=source) from None


def _json_depth(text: str) -> int:
    """Deepest bracket nesting, ignoring brackets inside strings."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0
    return nesting_depth(_JSON_STRING.sub('""', text), MAX_JSON_DEPTH)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def nesting_depth(text: str, cap: int) -> int:
    """Deepest running count of ``[``/``{`` minus ``]``/``}`` in ``text``; 0 when there are
    no more than ``cap`` opening brackets at all (vectorised: linear time, ~10 ns a character).

    >>> nesting_depth("a: [[1], {b: [2]}]", 1), nesting_depth("[[[", 2)
    (3, 3)
    """
    if text.count("[") + text.count("{") <= cap:
        return 0
    import numpy as np  # only for files with many brackets

    depth = _running_depth(text, np)
    return int(depth.max()) if depth.size else 0


def depth_line(text: str, cap: int) -> int:
    """1-based line where the bracket nesting of ``text`` first exceeds ``cap``."""
    import numpy as np

    depth = _running_depth(text, np)
    first = int(np.argmax(depth > cap))
    return text.count("\n", 0, first) + 1 if depth.size and depth[first] > cap else 1


def _running_depth(text: str, np):
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    step = (np.isin(codes, (0x5B, 0x7B)).astype(np.int32) - np.isin(codes, (0x5D, 0x7D)).astype(np.int32))
    return np.cumsum(step, dtype=np.int64)


def _unique(pairs: list, source: str) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise SpecError(f"duplicate key {key[:60]!r}", source=source)
        out[key] = value
    return out


def _json_int(digits: str, source: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise SpecError(f"integer of {len(digits)} digits (at most {MAX_INT_DIGITS})", source=source)
    return int(digits)


def _no_constant(source: str):
    def refuse(name: str):
        raise SpecError(f"{name} is not a JSON number", source=source)
    return refuse


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

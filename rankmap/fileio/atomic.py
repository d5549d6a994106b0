"""Output written atomically: a temp file in the target folder, fsync, then rename.

A reader never sees a half-written file, and a run that fails before the rename leaves
the previous outputs as they were. Several files are committed together: all are
written to temp files first, and renamed only once every one was written, under an
exclusive lock (flock) on the folder itself, so that two runs writing into one folder
cannot interleave their files. The renames of one commit follow each other at once, in
the order given (the file naming the others last); SIGINT, SIGTERM and SIGHUP wait for the
last rename, so only SIGKILL between two renames (a window of microseconds) could leave
files of two runs side by side, never a truncated one.
"""

from __future__ import annotations

import fcntl
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
from typing import Callable, Iterable, Mapping

from rankmap.errors import RankmapError
from rankmap.fileio.reading import file_kind

__all__ = ["atomic_write_files", "atomic_write_text", "keep_signal_handlers", "LOCK_TIMEOUT_S"]


#: Seconds a commit waits for another run's lock on the same output folder before giving up;
#: ``RANKMAP_LOCK_TIMEOUT_S`` overrides it.
LOCK_TIMEOUT_S = float(os.environ.get("RANKMAP_LOCK_TIMEOUT_S", "60"))
#: Temporaries of a dead process (or, without a process id in the name, older than this many
#: seconds) are removed by the next commit into the folder.
STALE_TMP_S = 600.0
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_TMP = re.compile(r"\.(?P<name>.+?)\.(?:(?P<pid>[0-9]+)\.)?[A-Za-z0-9_]{8}\.tmp")


def atomic_write_files(folder: str | Path, files: Mapping[str, str | bytes | Iterable[str]], *,
                       remove: tuple[str, ...] = (),
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
    files : mapping of str to str, bytes or iterable of str
        File name (no directories) to UTF-8 text, to raw bytes (e.g. a PNG), or to an iterable
        of text pieces written one after another (a large file never held whole), in commit order.
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
        in_the_way = _not_a_regular_file(out / name)
        if in_the_way:
            raise RankmapError(f"{out / name}: cannot write output: {in_the_way} is in the way (outputs replace "
                               "regular files only)")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parent = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
        if parent is not None:  # mkdir says only "File exists" or "Not a directory"
            kind = "a file" if parent.is_file() else file_kind(os.stat(parent).st_mode)
            raise RankmapError(f"{parent}: is {kind}, not a folder: cannot write the outputs into "
                               f"{'it' if parent == out else out} (move it away or give another --out)") from None
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
                with os.fdopen(fd, "wb") as handle:
                    for data in _pieces(text):
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


def _pieces(content: str | bytes | Iterable[str]) -> Iterable[bytes]:
    """The bytes of one output: raw bytes, UTF-8 text, or text made piece by piece (a generator, so
    that a large file is never held whole)."""
    if isinstance(content, bytes):
        return (content,)
    if isinstance(content, str):
        return (content.encode("utf-8"),)
    return (piece.encode("utf-8") for piece in content)


def _not_a_regular_file(path: Path) -> str | None:
    """What sits at ``path`` if it is not a regular file (a folder, a symbolic link, a device, a
    FIFO, a socket), else None. A commit renames over its targets: renaming over ``/dev/null`` or a
    FIFO would replace it with a plain file, and over a symbolic link would replace the link."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a symbolic link" if stat.S_ISLNK(mode) else file_kind(mode)


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

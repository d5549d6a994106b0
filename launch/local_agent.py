"""The torchrun agent of ``rankmap launch --local``: torch's own agent, plus a failure report.

``python -m rankmap.launch.local_agent REPORT TORCHRUN-OPTIONS... ENTRY...`` runs torchrun
(``torch.distributed.run``) with the given arguments, which carry ``--log-dir`` and
``--redirects 2 --tee 2``: each worker's stderr goes to
``LOG_DIR/RUN_ID_XXXX/attempt_0/LOCAL_RANK/stderr.log`` and, prefixed, to the console [1]_.
When a worker fails, torch's agent raises ``ChildFailedError`` holding every failed worker's
global rank, local rank, pid, exit code and error file [2]_. This module writes them to
``REPORT`` (JSON, atomically, see :func:`failure_report`), each with the path of that worker's
stderr file and the time it failed, and exits 1 without the agent's own traceback (torchrun's
internals, and a "root cause" that on a multi-host run is often a peer that only lost its
connection): :func:`rankmap.launch.local.run_agents` reads the reports of all agents and names
the worker that failed first.

References
----------
.. [1] PyTorch documentation, "torchrun (Elastic Launch)": ``--log-dir``, ``--redirects``, ``--tee``;
   ``torch/distributed/elastic/multiprocessing/api.py`` (``DefaultLogsSpecs.reify``: the layout).
   https://pytorch.org/docs/stable/elastic/run.html
.. [2] PyTorch documentation, "Error Propagation" (``ChildFailedError``, ``ProcessFailure``).
   https://pytorch.org/docs/stable/elastic/errors.html
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from rankmap.fileio import atomic_write_text

__all__ = ["failure_report", "failure_order", "main"]


def _log_dir(argv: list[str]) -> Path | None:
    """The ``--log-dir`` of torchrun options (``--log-dir X`` or ``--log-dir=X``)."""
    for i, word in enumerate(argv):
        if word in ("--log-dir", "--log_dir") and i + 1 < len(argv):
            return Path(argv[i + 1])
        if word.startswith(("--log-dir=", "--log_dir=")):
            return Path(word.split("=", 1)[1])
    return None


def _message(failure) -> str:
    """One line from a worker's error: its exception (error file) or its signal."""
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", "")
    return " ".join(str(message).split())[:300]


def failure_report(failures: dict, run_dirs: list[Path]) -> list[dict]:
    """Rows of a failure report, earliest first.

    Parameters
    ----------
    failures : dict
        ``ChildFailedError.failures``: global rank -> ``ProcessFailure``.
    run_dirs : list of Path
        Log folders this agent created (``LOG_DIR/RUN_ID_XXXX``); the newest holds this run.

    Returns
    -------
    list of dict
        ``rank, local_rank, pid, exitcode, signal, error_file, stderr, message, time_s``.
        ``time_s`` (seconds since the epoch) is when the failure left its last trace: the error
        file's modification time when the worker recorded an exception, else its stderr file's
        (a worker killed by a signal: faulthandler's dump, or its last line). Rows come in
        :func:`failure_order`: the root cause first.
    """
    attempt = None
    if run_dirs:
        newest = max(run_dirs, key=lambda p: p.stat().st_mtime)
        attempts = sorted(newest.glob("attempt_*"), key=lambda p: p.stat().st_mtime)
        attempt = attempts[-1] if attempts else None
    rows = []
    for rank, f in failures.items():
        stderr = attempt / str(f.local_rank) / "stderr.log" if attempt is not None else None
        error_file = f.error_file if f.error_file and os.path.isfile(f.error_file) else None
        stamp = Path(error_file) if error_file else stderr
        time_s = stamp.stat().st_mtime if stamp is not None and stamp.is_file() else float(f.timestamp)
        rows.append({"rank": int(rank), "local_rank": int(f.local_rank), "pid": int(f.pid),
                     "exitcode": int(f.exitcode), "signal": f.signal_name() if f.exitcode < 0 else None,
                     "error_file": error_file, "stderr": str(stderr) if stderr is not None and stderr.is_file() else None,
                     "message": _message(f), "time_s": time_s})
    return sorted(rows, key=failure_order)


def failure_order(row: dict) -> tuple:
    """Sort key of report rows, root cause first: workers that ended by SIGTERM go last, since
    torch's agent stops every remaining worker with SIGTERM once one has failed
    (``torch/distributed/elastic/agent/server/api.py``, ``_stop_workers`` after a failed
    ``_monitor_workers``); then by ``time_s`` and rank. A worker that was quiet since it started
    has an old stderr file, so time alone would put such a bystander before the culprit."""
    return (row["exitcode"] == -signal.SIGTERM, row["time_s"], row["rank"])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    report, torchrun_argv = Path(argv[0]), argv[1:]
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    log_dir = _log_dir(torchrun_argv)
    before = set(log_dir.iterdir()) if log_dir is not None and log_dir.is_dir() else set()
    try:
        run(parse_args(torchrun_argv))
    except ChildFailedError as exc:
        made = [p for p in log_dir.iterdir() if p.is_dir() and p not in before] if log_dir is not None else []
        rows = failure_report(exc.failures, made)
        atomic_write_text(report, json.dumps({"failures": rows}, indent=1) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

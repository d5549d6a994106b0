"""Gloo process groups with one worker thread each: a workaround for a data race in torch 2.13.

The race
--------
``ProcessGroupGloo`` runs its asynchronous work on ``options.threads`` worker threads (2 by
default: ``torch/csrc/distributed/c10d/init.cpp`` sets ``threads = 2 * devices``). After each
work, ``ProcessGroupGloo::runLoop`` (``torch/csrc/distributed/c10d/ProcessGroupGloo.cpp``) writes
the group's status -- ``pgStatus_->lastCompletedSeq`` and
``pgStatus_->lastCompletedWorkName = opTypeToString(work->opType_)`` -- *after* the work's future
is completed and *without* holding ``workMutex_`` (the flight recorder's ``retire_id`` follows).
The future's completion wakes the caller, which issues the group's next operation; the group's
other worker thread runs it and writes the same ``std::string``. When the first thread is off
the CPU between reading the string's old buffer and storing its new one -- a preempted thread, as
on an overloaded machine -- both threads free the same buffer: the heap is corrupted and the
process dies of SIGABRT (glibc's "double free or corruption", "malloc(): unaligned tcache chunk
detected"), in a gloo thread, so faulthandler prints "Fatal Python error: Aborted" over a main
thread that had just finished a collective. Tensor-parallel all-gathers through functional
collectives are ``ALLGATHER_COALESCED`` works, a 19-character name, longer than libstdc++'s
15-character in-place buffer, so every one of them frees and allocates on the heap here.

Evidence (torch 2.13.0+cpu, this machine): the disassembly of ``runLoop`` shows the unguarded
string assignment; holding one worker thread for 0.3 s at that instruction (gdb) while two ranks
run TP-style all-gathers crashed the process in 13 of 14 runs, 7 of 8 with the flight recorder
on and 6 of 6 with it off (``benchmarks/gloo_worker_race.py``); with one worker thread per group
7 of 7 such runs completed.

The workaround
--------------
:func:`use_one_worker_thread` makes every gloo group this process creates from then on --
``init_process_group`` and each ``new_group`` of the device mesh -- a ``ProcessGroupGloo`` with
``threads = 1``: one writer per group status, the group's works run one after another in the
order they are issued, which every rank does alike (the contract of collectives), so nothing
waits on a work queued behind it. Point-to-point sends and receives do not use the worker
threads. Devices are chosen as torch's own constructor does (``GLOO_SOCKET_IFNAME``, else the
default device).
"""

from __future__ import annotations

import os

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

__all__ = ["use_one_worker_thread", "worker_threads"]

_BASE = dist.ProcessGroupGloo


class _OneThreadGloo(_BASE):
    """``ProcessGroupGloo(store, rank, size, timeout)`` with one worker thread."""

    def __init__(self, store, rank, size, timeout=None, **kwargs):
        if isinstance(timeout, _BASE._Options):  # the options form of the constructor: kept as given
            super().__init__(store, rank, size, timeout)
            return
        opts = _BASE._Options()
        names = [n for n in os.environ.get("GLOO_SOCKET_IFNAME", "").split(",") if n]
        opts._devices = [_BASE.create_device(interface=n) for n in names] or [_BASE.create_default_device()]
        opts._threads = 1
        if timeout is not None:
            opts._timeout = timeout
        super().__init__(store, rank, size, opts)


def use_one_worker_thread() -> None:
    """From now on, every gloo process group of this process has one worker thread (see the module docstring).

    ``torch.distributed`` builds gloo groups through its module name ``ProcessGroupGloo``; it is
    replaced by a subclass (``isinstance`` checks still hold). Call before ``init_process_group``.
    """
    c10d.ProcessGroupGloo = _OneThreadGloo


def worker_threads(group=None) -> int:
    """Worker threads of ``group``'s gloo backend (None: the default group).

    Raises
    ------
    ValueError
        The group has no gloo backend.
    """
    import torch

    backend = (group or c10d._get_default_group())._get_backend(torch.device("cpu"))
    if not isinstance(backend, _BASE):
        raise ValueError(f"{group!r} has no gloo backend")
    return backend.options._threads

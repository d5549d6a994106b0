"""Every collective and point-to-point operation of a rank, timed where the program calls it.

Gloo records no durations (the c10d flight recorder keeps, per operation, its process group,
sequence number and profiling name, with start/finish times only on NCCL and only with
``TORCH_NCCL_ENABLE_TIMING=1``; PyTorch docs, "Flight Recorder for Debugging Stuck Jobs";
``torch/csrc/distributed/c10d/FlightRecorder.hpp``). So :class:`CommHooks` wraps the Python
entry points that the engine and torch's parallel layers call:

- ``torch.distributed``: ``all_reduce``, ``all_gather_single``/``all_gather_into_tensor``,
  ``reduce_scatter_single``/``reduce_scatter_tensor``, ``broadcast``, ``barrier``, ``send``,
  ``recv``, ``isend``, ``irecv`` (FSDP2's all-gather and reduce-scatter, the pipeline
  schedules' P2P ops through ``batch_isend_irecv``, the gradient-norm all-reduce);
- ``torch.distributed._functional_collectives``: ``all_reduce``, ``all_gather_single``,
  ``all_gather_tensor``, ``reduce_scatter_single``, ``reduce_scatter_tensor``,
  ``all_to_all_single`` (DTensor's tensor- and sequence-parallel redistributions). The
  returned ``AsyncCollectiveTensor`` is waited inside the wrapper: the next operation of
  the TP block consumes it at once, so this moves the wait, it adds none.

An asynchronous call returns a wrapper whose ``wait`` ends the record: for ``isend``/``irecv``
a plain :class:`TimedWork`, for ``async_op=True`` collectives a ``torch.distributed.Work``
subclass, :class:`TimedCollectiveWork` (FSDP2 tests ``isinstance(work, Work)``). Each record names the process group's kind -- ``tp``, ``cp``,
``ep``, ``dp``, ``pp`` from the rank map's mesh, ``world`` or ``other`` -- its members
(global ranks) and a sequence number: the n-th operation of this rank on that group (for
P2P, the n-th from that source to that destination), equal on every member because every
member issues a group's collectives in the same order. Calls made inside a wrapped call
(one public function built on another) are not recorded twice.

The recorder (:class:`rankmap.engine.timing.PhaseTimer`) gives ``open_comm``,
``block``/``unblock`` (the rank is blocked in the operation, which the progress watchdog
reports; ``comm_wait`` is the same as a context) and ``close_comm``.
"""

from __future__ import annotations

import threading

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from torch.distributed import _functional_collectives as funcol

__all__ = ["CommHooks", "TimedWork", "TimedCollectiveWork", "kinds_from_mesh"]

# name -> (operation, index of the group argument; P2P: index of the peer argument too)
_DIST_OPS = {
    "all_reduce": ("all-reduce", 2), "all_gather_single": ("all-gather", 2),
    "all_gather_into_tensor": ("all-gather", 2), "reduce_scatter_single": ("reduce-scatter", 3),
    "reduce_scatter_tensor": ("reduce-scatter", 3), "broadcast": ("broadcast", 2), "barrier": ("barrier", 0),
}
_P2P_OPS = {"send": ("send", "dst"), "isend": ("send", "dst"), "recv": ("recv", "src"), "irecv": ("recv", "src")}
_FUNCOL_OPS = {
    "all_reduce": ("all-reduce", 2), "all_gather_single": ("all-gather", 2), "all_gather_tensor": ("all-gather", 2),
    "reduce_scatter_single": ("reduce-scatter", 3), "reduce_scatter_tensor": ("reduce-scatter", 3),
    "all_to_all_single": ("all-to-all", 3),
}


def kinds_from_mesh(mesh, dims=("tp", "cp", "ep", "dp", "pp")) -> dict:
    """``{members: kind}`` for this rank's groups of ``mesh`` (members: sorted global ranks)."""
    out: dict = {}
    for kind in dims:
        if kind in (mesh.mesh_dim_names or ()):
            members = tuple(sorted(dist.get_process_group_ranks(mesh[kind].get_group())))
            out.setdefault(members, kind)
    return out


def _arg(args, kwargs, index: int, name: str):
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else None


class _Timed:
    """``wait`` closes the timing record (once); the rest is the wrapped work's."""

    def _setup(self, work, hooks: "CommHooks", op) -> None:
        self._work, self._hooks, self._op = work, hooks, op

    def wait(self, timeout=None):
        work = self._work
        if self._op is None:
            return work.wait() if timeout is None else work.wait(timeout)
        rec = self._hooks.recorder
        token = rec.block(self._op)
        try:
            done = work.wait() if timeout is None else work.wait(timeout)
        finally:
            rec.unblock(self._op, token)
        rec.close_comm(self._op)
        self._op = None
        return done

    def is_completed(self):
        return self._work.is_completed()

    def is_success(self):
        return self._work.is_success()

    def exception(self):
        return self._work.exception()

    def get_future(self):
        return self._work.get_future()

    def result(self):
        return self._work.result()

    def source_rank(self):
        return self._work.source_rank()


class TimedWork(_Timed):
    """What a timed ``isend``/``irecv`` returns: a plain Python object (the pipeline schedules
    only call ``wait``), so the process group's C++ work is released as soon as it is dropped."""

    def __init__(self, work, hooks: "CommHooks", op):
        self._setup(work, hooks, op)


class TimedCollectiveWork(_Timed, dist.Work):
    """What a timed ``async_op=True`` collective returns: a ``torch.distributed.Work``
    (FSDP2 tests ``isinstance(work, Work)`` before waiting)."""

    def __init__(self, work, hooks: "CommHooks", op):
        dist.Work.__init__(self)
        self._setup(work, hooks, op)


class CommHooks:
    """Wraps torch.distributed's entry points for one rank; see the module docstring.

    Parameters
    ----------
    recorder : PhaseTimer
        Receives the records.
    kinds : dict
        ``{members: kind}`` (:func:`kinds_from_mesh`); other groups are ``world`` or ``other``.
    """

    def __init__(self, recorder, kinds: dict):
        self.recorder = recorder
        self.kinds = dict(kinds)
        self.world = tuple(range(dist.get_world_size()))
        self.rank = dist.get_rank()
        self.seq: dict = {}
        self._members: dict = {}
        self._saved: list = []
        self._local = threading.local()

    # -- groups -------------------------------------------------------------------------------
    def members(self, group) -> tuple:
        """Sorted global ranks of a ProcessGroup (None: the default group)."""
        key = id(group)
        if key not in self._members:
            pg = group if group is not None else c10d._get_default_group()
            self._members[key] = (tuple(sorted(dist.get_process_group_ranks(pg))), pg)
        return self._members[key][0]

    def kind(self, members: tuple) -> str:
        if members in self.kinds:
            return self.kinds[members]
        return "world" if members == self.world else "other"

    def _next_seq(self, key) -> int:
        n = self.seq.get(key, 0)
        self.seq[key] = n + 1
        return n

    # -- wrapping -----------------------------------------------------------------------------
    def install(self) -> "CommHooks":
        """Replace the entry points (in ``torch.distributed`` and where its callers look them up)."""
        for name, (op, gi) in _DIST_OPS.items():
            self._patch((dist, c10d), name, self._collective(getattr(c10d, name), op, gi, funcol_call=False))
        for name, (op, peer) in _P2P_OPS.items():
            self._patch((dist, c10d), name, self._p2p(getattr(c10d, name), op, peer))
        for name, (op, gi) in _FUNCOL_OPS.items():
            self._patch((funcol,), name, self._collective(getattr(funcol, name), op, gi, funcol_call=True))
        return self

    def uninstall(self) -> None:
        """Put the original functions back."""
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)
        self._saved.clear()

    def _patch(self, modules, name: str, wrapper) -> None:
        for module in modules:
            if hasattr(module, name):
                self._saved.append((module, name, getattr(module, name)))
                setattr(module, name, wrapper)

    def _inside(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def _run(self, fn, args, kwargs, op, is_async: bool, funcol_call: bool, collective_work: bool = True):
        rec = self.recorder
        self._local.depth = getattr(self._local, "depth", 0) + 1
        token = rec.block(op)
        try:
            out = fn(*args, **kwargs)
            if funcol_call and isinstance(out, funcol.AsyncCollectiveTensor):
                out = out.wait()
        finally:
            rec.unblock(op, token)
            self._local.depth -= 1
        if is_async and isinstance(out, dist.Work):
            return (TimedCollectiveWork if collective_work else TimedWork)(out, self, op)
        rec.close_comm(op)
        return out

    def _collective(self, fn, op_name: str, group_index: int, funcol_call: bool):
        hooks = self

        def wrapper(*args, **kwargs):
            if hooks._inside() or threading.current_thread() is not threading.main_thread():
                return fn(*args, **kwargs)
            group = _arg(args, kwargs, group_index, "group")
            if funcol_call:
                group = c10d._resolve_process_group(funcol._resolve_group_name(group))
            members = hooks.members(group)
            kind = hooks.kind(members)
            op = hooks.recorder.open_comm(op_name, kind, members, hooks._next_seq((kind, members)))
            is_async = not funcol_call and bool(_arg(args, kwargs, group_index + 1, "async_op"))
            return hooks._run(fn, args, kwargs, op, is_async, funcol_call)

        wrapper.__wrapped__ = fn
        wrapper.__name__ = getattr(fn, "__name__", "collective")
        return wrapper

    def _p2p(self, fn, op_name: str, peer_name: str):
        hooks = self
        is_async = fn.__name__.startswith("i")

        def wrapper(*args, **kwargs):
            if hooks._inside() or threading.current_thread() is not threading.main_thread():
                return fn(*args, **kwargs)
            group = _arg(args, kwargs, 2, "group")
            peer = _arg(args, kwargs, 1, peer_name)
            if peer is None and kwargs.get(f"group_{peer_name}") is not None:
                peer = dist.get_global_rank(group, kwargs[f"group_{peer_name}"])
            if peer is None:  # a receive from any source: not matched to a sender
                return fn(*args, **kwargs)
            members = hooks.members(group)
            kind = hooks.kind(members)
            src, dst = (hooks.rank, peer) if op_name == "send" else (peer, hooks.rank)
            op = hooks.recorder.open_comm(op_name, kind, (src, dst), hooks._next_seq(("p2p", src, dst)))
            return hooks._run(fn, args, kwargs, op, is_async, False, collective_work=False)

        wrapper.__wrapped__ = fn
        wrapper.__name__ = fn.__name__
        return wrapper

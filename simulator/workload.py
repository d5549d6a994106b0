"""SimAI / AICB workload files as an alternative description of a job's traffic.

AICB (Alibaba's AI Communication Benchmark) writes, and SimAI (NSDI 2025) reads, a text
workload: the collectives one rank issues in one training iteration. Format, as SimAI's
``Workload::initialize_workload`` reads it:

- line 1: the parallelism policy (``HYBRID_TRANSFORMER_FWD_IN_BCKWD`` or
  ``HYBRID_TRANSFORMER``) followed by ``key: value`` pairs -- ``model_parallel_NPU_group``
  (TP size), ``ep``, ``pp``, ``vpp``, ``ga`` (micro-batches), ``all_gpus``,
  ``checkpoints`` / ``checkpoint_initiates`` (a count, then that many layer numbers) and
  ``pp_comm`` (bytes a stage sends to its neighbour per micro-batch; written with or
  without the colon);
- line 2: the number of layer lines;
- one line per layer, 12 whitespace-separated fields: name, dependency, forward compute
  time, forward collective, forward bytes, input-gradient compute time, input-gradient
  collective, bytes, weight-gradient compute time, weight-gradient collective, bytes,
  weight-update time.

A collective is ``NONE`` or ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER`` or ``ALLTOALL``,
optionally suffixed ``_EP`` (expert-parallel group) or ``_DP_EP`` (expert data-parallel
group); without a suffix the forward and input-gradient collectives run in the TP group
and the weight-gradient ones in the DP group. Sizes are nccl-tests' S in bytes. Forward
and input-gradient traffic goes to the ``pipeline`` phase; weight-gradient all-gathers to
``dp-gather`` and the rest to ``dp-reduce``; ``pp_comm`` becomes ``2 * ga`` pipeline
messages per stage boundary. Compute times are kept as totals over the layer lines
(:attr:`Workload.compute_totals`: forward, backward = input-gradient + weight-gradient,
weight update), in the file's unit, for the iteration-time model
(:func:`rankmap.simulator.timing.workload_stage_times`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rankmap.errors import SpecError
from rankmap.fileio import read_text
from rankmap.job.comm import CommOp

__all__ = ["Workload", "read_aicb_workload", "parse_aicb_workload", "looks_like_aicb", "POLICIES"]

POLICIES = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", "HYBRID_TRANSFORMER")
_OPS = {"ALLREDUCE": "allreduce", "ALLGATHER": "allgather", "REDUCESCATTER": "reducescatter", "ALLTOALL": "alltoall"}
_INT_KEYS = {"model_parallel_NPU_group": "tp", "ep": "ep", "pp": "pp", "vpp": "vpp", "ga": "ga", "all_gpus": "all_gpus"}
_FIELDS = ("name", "dependency", "fwd_compute", "fwd_comm", "fwd_bytes", "ig_compute", "ig_comm", "ig_bytes",
           "wg_compute", "wg_comm", "wg_bytes", "wg_update")


@dataclass(frozen=True)
class Workload:
    """A parsed workload.

    Attributes
    ----------
    source : str
    policy : str
    tp, ep, pp, vpp, ga, all_gpus : int
        Header values (``ga``: micro-batches per iteration).
    pp_comm_bytes : float
    layers : int
        Layer lines read.
    ops : tuple of CommOp
        The iteration's collectives, merged by kind, collective, size and phase.
    compute_totals : tuple of float
        ``(forward, backward, update)``: the layer lines' compute times summed (file units;
        backward = input gradient + weight gradient).
    max_compute : float
        The largest forward, input-gradient or weight-gradient time of one layer line (file units).
    """

    source: str
    policy: str
    tp: int
    ep: int
    pp: int
    vpp: int
    ga: int
    all_gpus: int
    pp_comm_bytes: float
    layers: int
    ops: tuple
    compute_totals: tuple = (0.0, 0.0, 0.0)

    max_compute: float = 0.0

    @property
    def has_compute_times(self) -> bool:
        """True when the layer lines carry measured compute times: some forward or backward time
        above 1. AICB run without ``--aiob_enable`` writes a fixed placeholder of 1 in every
        compute field (its README: "If we do not set --aiob_enable, only fixed computation times
        can be applied"), which is no measurement; the iteration model then derives compute from
        the model's FLOPs, as for a job spec.
        """
        return self.max_compute > 1

    def check_job(self, job) -> None:
        """Raise SpecError (naming this file and the header key) unless ``job``'s shape matches."""
        for key, mine, theirs in (("model_parallel_NPU_group", self.tp, job.tp), ("pp", self.pp, job.pp),
                                  ("ep", self.ep, job.ep), ("all_gpus", self.all_gpus, job.world_size)):
            if mine != theirs:
                raise SpecError(f"workload says {key} {mine}, the rank map's job has {theirs}", source=self.source,
                                line=1, key=key)


def looks_like_aicb(text: str) -> bool:
    """True when the first word is a SimAI parallelism policy (the file is a workload, not YAML)."""
    first = text.lstrip().split(maxsplit=1)
    return bool(first) and first[0] in POLICIES


def read_aicb_workload(path: str | Path) -> Workload:
    """Read a SimAI/AICB workload file.

    Raises
    ------
    SpecError
        Unreadable file, unknown policy or collective, missing header key, bad number or
        wrong field count (FILE:LINE and the field in the message).
    """
    return parse_aicb_workload(read_text(path), str(path))


def _number(text: str, source: str, line: int, key: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"expected a number, got {text!r}", source=source, line=line, key=key) from None
    if not value >= 0 or value == float("inf"):
        raise SpecError(f"expected a number >= 0, got {text!r}", source=source, line=line, key=key)
    return value


def _header(line: str, source: str) -> dict:
    tokens = line.split()
    if not tokens or tokens[0] not in POLICIES:
        got = tokens[0] if tokens else ""
        raise SpecError(f"unsupported parallelism policy {got!r} (supported: {', '.join(POLICIES)})",
                        source=source, line=1, key="policy")
    head = {"policy": tokens[0], "ep": 1, "vpp": 1, "ga": 1, "pp_comm": 0.0}
    i = 1
    while i < len(tokens):
        key = tokens[i].rstrip(":")
        value = tokens[i + 1] if i + 1 < len(tokens) else ""
        if key in ("checkpoints", "checkpoint_initiates"):
            n = int(_number(value, source, 1, key))
            i += 2 + n
            continue
        if key in _INT_KEYS or key == "pp_comm":
            number = _number(value, source, 1, key)
            if key != "pp_comm" and (number != int(number) or number < 1):
                raise SpecError(f"expected a positive integer, got {value!r}", source=source, line=1, key=key)
            head[_INT_KEYS.get(key, key)] = number if key == "pp_comm" else int(number)
        i += 2
    for key, name in (("model_parallel_NPU_group", "tp"), ("pp", "pp"), ("all_gpus", "all_gpus")):
        if name not in head:
            raise SpecError(f"header lacks {key}", source=source, line=1, key=key)
    return head


def _collective(token: str, stage: str, source: str, line: int) -> tuple[str, str] | None:
    """``(kind, op)`` of a collective field, or None for NONE."""
    if token == "NONE":
        return None
    base, kind = token, ("dp" if stage == "wg" else "tp")
    if token.endswith("_DP_EP"):
        base, kind = token[:-6], "dp_ep"
    elif token.endswith("_EP"):
        base, kind = token[:-3], "ep"
    if base not in _OPS:
        raise SpecError(f"unsupported collective {token!r} (supported: NONE, {', '.join(_OPS)}, with optional "
                        f"_EP or _DP_EP)", source=source, line=line, key=f"{stage}_comm")
    return kind, _OPS[base]


def parse_aicb_workload(text: str, source: str = "<string>") -> Workload:
    """Parse workload text; see :func:`read_aicb_workload`.

    Examples
    --------
    >>> w = parse_aicb_workload(
    ...     "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 ep: 1 pp: 2 vpp: 1 ga: 4 "
    ...     "all_gpus: 32 checkpoints: 0 checkpoint_initiates: 0 pp_comm: 1024\\n2\\n"
    ...     "grad_param_comm -1 1 NONE 0 1 NONE 0 1 REDUCESCATTER 4096 100\\n"
    ...     "attention_row -1 5 ALLREDUCE 512 5 ALLREDUCE 512 1 NONE 0 100\\n")
    >>> [(o.label, o.size_bytes, o.count, o.phase) for o in w.ops]  # doctest: +NORMALIZE_WHITESPACE
    [('dp reducescatter', 4096.0, 1, 'dp-reduce'), ('tp allreduce', 512.0, 2, 'pipeline'),
     ('pp p2p', 1024.0, 8, 'pipeline')]
    """
    lines = text.splitlines()
    if not lines:
        raise SpecError("empty workload file", source=source)
    head = _header(lines[0], source)
    if len(lines) < 2 or not lines[1].strip().isdigit():
        raise SpecError("line 2 must be the number of layer lines", source=source, line=2, key="layers")
    n_layers = int(lines[1])
    body = [(i + 3, ln) for i, ln in enumerate(lines[2:]) if ln.strip()]
    if len(body) != n_layers:
        raise SpecError(f"line 2 announces {n_layers} layer lines, the file has {len(body)}",
                        source=source, line=2, key="layers")
    merged: dict[tuple, int] = {}
    totals, most = [0.0, 0.0, 0.0], 0.0
    for number, ln in body:
        fields = ln.split()
        if len(fields) not in (12, 13):
            raise SpecError(f"expected 12 fields ({' '.join(_FIELDS)}), got {len(fields)}", source=source,
                            line=number, key=fields[0] if fields else "layer")
        times = [_number(fields[c], source, number, _FIELDS[c]) for c in (2, 5, 8, 11)]
        totals = [totals[0] + times[0], totals[1] + times[1] + times[2], totals[2] + times[3]]
        most = max(most, *times[:3])
        for stage, col in (("fwd", 3), ("ig", 6), ("wg", 9)):
            got = _collective(fields[col], stage, source, number)
            size = _number(fields[col + 1], source, number, f"{stage}_bytes")
            if got is None or size == 0:
                continue
            kind, op = got
            phase = "pipeline" if stage != "wg" else ("dp-gather" if op == "allgather" else "dp-reduce")
            key = (kind, op, size, phase)
            merged[key] = merged.get(key, 0) + 1
    ops = [CommOp(kind=k, op=o, size_bytes=s, count=c, phase=p) for (k, o, s, p), c in merged.items()]
    if head["pp"] > 1 and head["pp_comm"] > 0:
        ops.append(CommOp(kind="pp", op="p2p", size_bytes=head["pp_comm"], count=2 * head["ga"], phase="pipeline"))
    return Workload(source, head["policy"], head["tp"], head["ep"], head["pp"], head["vpp"], head["ga"],
                    head["all_gpus"], float(head["pp_comm"]), n_layers, tuple(ops), tuple(totals), most)

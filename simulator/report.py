"""The simulation result file (``simulation.json``) and the atomic write of all outputs.

The document is built from data only (no I/O), with keys in a fixed order and every
float rounded to 6 significant digits, so the same inputs give byte-identical files.

Schema ``rankmap-simulation/v1``::

    {"schema", "cluster": {"name", "sha256"}, "job": {...}, "traffic": [{kind, op, size_bytes,
     count, phase}], "config": {...}, "placements": [{"name", "comm_time_s": {mean, p50, p95,
     max}, "ideal_comm_time_s", "slowdown_vs_ideal", "phases": [...], "slowest_group": {...},
     "uplink_bytes_per_tor_group": {...}, "max_uplink_bytes", "flows"}]}

The ``dp-reduce`` phase's ``time_s`` is every stage's DP groups released at t = 0 (what the
ECMP figures measure); when the iteration model ran, it also has ``staged_time_s`` (over
seeds: the slowest stage's reduction, each stage's groups released as its last backward readies
their gradients,
:mod:`rankmap.simulator.staging`, as the iteration time uses them) and ``stage_time_s``
(``[p]``, each stage's, mean over seeds).

On a fabric of several tiers each placement also gets ``"tiers"``: per tier of uplinks
(rail ToRs, then each switch tier below the top) its name, bytes up its cables (first
seed; spraying's bundles count for the ideal), the most on one cable, and its ECMP figures
in the longest phase (idle uplinks, most flows on one, bandwidth lost over the coflows
that climb above it). One-tier fabrics keep the document exactly as it was.
"""

from __future__ import annotations

import json

import numpy as np

from rankmap.job.spec_file import job_to_dict
from rankmap.simulator.collectives import CollectiveConfig, bus_factor
from rankmap.simulator.ecmp import EcmpConfig
from rankmap.simulator.flows import RankPlacement
from rankmap.simulator.iteration import IterationResult
from rankmap.simulator.network import Network
from rankmap.simulator.stats import IterationSweep, summarize

__all__ = ["SCHEMA", "round_floats", "placement_summary", "collective_bandwidths", "simulation_document", "document_json",
           "iteration_figures"]

SCHEMA = "rankmap-simulation/v1"


def round_floats(value, digits: int = 6):
    """Round every float inside lists and dicts to ``digits`` significant digits.

    Examples
    --------
    >>> round_floats({"a": [0.123456789, 2], "b": 1234567.8})
    {'a': [0.123457, 2], 'b': 1234570.0}
    """
    if isinstance(value, dict):
        return {k: round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(f"{float(value):.{digits}g}")
    if isinstance(value, np.integer):
        return int(value)
    return value


def _number(x) -> int | float:
    """Integral values as int (byte counts stay exact), others as float."""
    return int(x) if float(x).is_integer() else float(x)


def _group_info(network: Network, placement: RankPlacement, ranks: np.ndarray) -> dict:
    hosts = placement.host[ranks]
    groups = sorted(set(network.host_group[hosts].tolist()))
    return {"first_ranks": ranks[:8].tolist(), "size": int(ranks.size), "hosts": int(np.unique(hosts).size),
            "tor_groups": [network.cluster.tor_groups[g].name for g in groups]}


def _slowest(network: Network, placement: RankPlacement, result: IterationResult) -> dict:
    got = result.slowest()
    if got is None:
        return {}
    phase, part, g = got
    info = {"phase": phase.name, "collective": part.label, "group": g, "time_s": float(part.group_times_s[g]),
            "median_group_time_s": float(np.median(part.group_times_s))}
    info.update(_group_info(network, placement, part.groups[g]))
    return info


def _tier_loads(network: Network, sweep: IterationSweep) -> list[dict]:
    """Per tier of uplinks: bytes, most on one cable, and ECMP figures of the longest phase."""
    first = sweep.first
    longest = max(first.phases, key=lambda p: float(sweep.phase_time_s[p.name].mean()), default=None)
    ecmp = sweep.ecmp[longest.name].tier_summary() if longest is not None else []
    out = []
    for t in range(network.depth):
        r = network.link_range("tor-up" if t == 0 else f"tier{t}-up")
        up = sum((p.link_bytes[r.start:r.stop] for p in first.phases), np.zeros(len(r)))
        name = "ToR" if t == 0 else network.fabric.levels[t - 1].name
        entry = {"level": t, "name": name, "uplinks": len(r), "uplink_bytes": float(up.sum()),
                 "max_uplink_bytes": float(up.max(initial=0.0))}
        if t < len(ecmp):
            entry["ecmp"] = ecmp[t]
        out.append(entry)
    return out


def iteration_figures(it: dict) -> dict:
    """An ``"iteration"`` entry's figures as text, as the table prints them and the timeline's
    title repeats them: ``{"time", "mfu", "tokens", "bubble", "exposed": {kind: text}}``.

    Examples
    --------
    >>> iteration_figures({"time_s": {"mean": 3.8861}, "mfu": {"mean": 0.3412}, "tokens_per_s": 910649.2,
    ...                    "bubble_fraction": 0.3679, "exposed_comm_s": {"dp": 0.4339}})["exposed"]
    {'dp': '0.434 s'}
    """
    return {"time": f"{it['time_s']['mean']:.3f} s", "mfu": f"{100 * it['mfu']['mean']:.1f}%",
            "tokens": f"{it['tokens_per_s']:,.0f}", "bubble": f"{max(0.0, 100 * it['bubble_fraction']):.1f}%",
            "exposed": {k: f"{t:.3f} s" for k, t in it["exposed_comm_s"].items()}}


def _staged(staged_reduce_s) -> dict:
    """``dp-reduce`` entries from ``staged_reduce_s[S][p]`` (each seed's per-stage reductions)."""
    per_seed = np.array([list(t) for t in staged_reduce_s], dtype=float)      # (S, p)
    if per_seed.size == 0:
        return {}
    return {"staged_time_s": summarize(per_seed.max(axis=1)), "stage_time_s": per_seed.mean(axis=0).tolist()}


def placement_summary(network: Network, name: str, placement: RankPlacement, sweep: IterationSweep,
                      staged_reduce_s=None) -> dict:
    """One placement's entry of the document.

    ``staged_reduce_s[S][p]``, optional: each seed's per-stage gradient reductions, groups
    released when their stage's backward ends (``CommTimes.dp_reduce_stage_s``); they add
    ``staged_time_s`` and ``stage_time_s`` to the ``dp-reduce`` phase (see the module).
    """
    first, ideal = sweep.first, sweep.ideal
    phases = []
    for phase in first.phases:
        ideal_phase = ideal.phase(phase.name)
        parts = [{"collective": p.label, "groups": int(p.groups.shape[0]), "group_size": int(p.groups.shape[1]),
                  "group_time_s": {"min": float(p.group_times_s.min()), "median": float(np.median(p.group_times_s)),
                                   "max": float(p.group_times_s.max())}} for p in phase.parts]
        phases.append({"name": phase.name, "time_s": summarize(sweep.phase_time_s[phase.name]),
                       "ideal_time_s": ideal_phase.time_s if ideal_phase else 0.0, "flows": phase.n_flows,
                       "collectives": parts, "ecmp": sweep.ecmp[phase.name].summary(),
                       **(_staged(staged_reduce_s) if phase.name == "dp-reduce" and staged_reduce_s else {})})
    uplinks = first.uplink_bytes(network)                        # (K, rails * uplinks)
    per_group = uplinks.sum(axis=1)
    mean_time = float(sweep.comm_time_s.mean())
    return {
        "name": name,
        "comm_time_s": summarize(sweep.comm_time_s),
        "ideal_comm_time_s": ideal.comm_time_s,
        "slowdown_vs_ideal": mean_time / ideal.comm_time_s if ideal.comm_time_s > 0 else 1.0,
        "phases": phases,
        "slowest_group": _slowest(network, placement, first),
        "uplink_bytes_per_tor_group": {network.cluster.tor_groups[k].name: float(per_group[k])
                                       for k in np.flatnonzero(per_group)},
        "max_uplink_bytes": float(uplinks.max(initial=0.0)),
        "flows": first.n_flows,
        **({"tiers": _tier_loads(network, sweep)} if network.depth > 1 else {}),
    }


def collective_bandwidths(ops, phase: str, label: str, group_size: int, time_s: float) -> dict:
    """nccl-tests' figures of one simulated part: ``size_bytes`` (S of one collective),
    ``count`` (per iteration), and the slowest group's ``algbw_gbps = S / t`` and
    ``busbw_gbps = algbw * factor`` in GB/s (1e9 bytes/s), ``t`` its time over ``count``
    (nccl-tests doc/PERFORMANCE.md: factor 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
    reduce-scatter and all-to-all). Empty for pipeline sends (``p2p``), which are no collective.

    Ops of one kind and collective merge as the simulation merges them (their bytes and
    counts add up, :func:`rankmap.simulator.iteration.phase_flows`).

    Examples
    --------
    >>> from rankmap.job.comm import CommOp
    >>> ops = [CommOp(kind="dp", op="allreduce", size_bytes=6.4e9, count=1, phase="dp-reduce")]
    >>> collective_bandwidths(ops, "dp-reduce", "dp allreduce", 64, 0.32)
    {'size_bytes': 6400000000, 'count': 1, 'algbw_gbps': 20.0, 'busbw_gbps': 39.375}
    """
    kind, op = label.split(" ", 1)
    picked = [o for o in ops if o.phase == phase and o.kind == kind and o.op == op and o.size_bytes > 0 and o.count > 0]
    count = sum(o.count for o in picked)
    if op == "p2p" or not count or not time_s > 0:
        return {}
    size = sum(o.size_bytes * o.count for o in picked) / count
    algbw = size / (time_s / count) / 1e9
    return {"size_bytes": _number(size), "count": _number(count), "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor(op, group_size)}


def _with_bandwidths(ops, placement: dict) -> dict:
    """``placement`` with :func:`collective_bandwidths` in each phase's collectives."""
    phases = [{**ph, "collectives": [{**c, **collective_bandwidths(ops, ph["name"], c["collective"], c["group_size"],
                                                                   c["group_time_s"]["max"])}
                                     for c in ph["collectives"]]} for ph in placement["phases"]]
    return {**placement, "phases": phases}


def simulation_document(network: Network, job, traffic_source: str, ops, config: CollectiveConfig,
                        routing: EcmpConfig, placements: list[dict]) -> dict:
    """The whole result document; ``placements`` come from :func:`placement_summary`, each
    collective given its size, count, algbw and busbw (:func:`collective_bandwidths`)."""
    cluster = network.cluster
    placements = [_with_bandwidths(ops, p) for p in placements]
    return round_floats({
        "schema": SCHEMA,
        "cluster": {"name": cluster.name, "sha256": cluster.spec_hash()},
        "job": job_to_dict(job),
        "traffic": {"source": traffic_source,
                    "collectives": [{"kind": o.kind, "op": o.op, "size_bytes": _number(o.size_bytes),
                                     "count": _number(o.count), "phase": o.phase} for o in ops]},
        "config": {"routing": routing.mode, "per_switch_salt": routing.per_switch_salt,
                   "qps_per_connection": routing.qps_per_connection, "alpha_s": config.alpha_s,
                   "efficiency": config.efficiency, "allreduce_algorithm": config.algorithm,
                   "channels": config.channels, "channels_per_nic": config.channels_per_nic,
                   "connection_rate_fraction": config.connection_rate_fraction,
                   "alpha_nvlink_s": config.alpha_local_s},
        "placements": placements,
    })


def document_json(doc: dict) -> str:
    """Serialise with a fixed layout (2-space indent, keys in insertion order, trailing newline)."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"

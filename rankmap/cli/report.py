"""Everything the command line prints about a result: plans, replans, simulations, diagnoses, imports.

Tables are rich tables; warnings go to stderr, one line each. Nothing from input (names,
paths, phases) is ever read as rich markup: lines are printed with ``markup=False``, table
cells, headers and titles are plain :class:`rich.text.Text`, and styled words are
:meth:`rich.text.Text.assemble` parts.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rankmap.placement.metrics import human_bytes
from rankmap.placement.result import PlanResult, metrics_row
from rankmap.placement.status import status_meaning
from rankmap.placement.tier_weights import crossed_tiers
from rankmap.topology.model import Cluster
from rankmap.topology.summary import ratio_text


class _Console(Console):
    """A rich console that lets a closed stdout (``| head``) surface as BrokenPipeError, which
    :func:`rankmap.cli.main` turns into a quiet exit 0 (rich itself would exit 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def console_for(table_width: int) -> Console:
    """The console for a report whose widest table needs ``table_width`` columns.

    On a terminal, the terminal's width (rich folds cells to fit); written to a file or pipe,
    ``$COLUMNS`` or ``table_width``, whichever is wider. Text lines are never broken by rich
    (soft wrap): a path or a note stays on one line for scripts and ``grep``.
    """
    if sys.stdout.isatty():
        return _Console(soft_wrap=True)
    columns = os.environ.get("COLUMNS", "")
    return _Console(width=max(table_width, int(columns) if columns.isdigit() else 0), soft_wrap=True)


class progress:
    """``with progress("planning"):`` shows a spinner with the elapsed time on stderr while a step
    runs, and the gap of CP-SAT's latest solution to its bound while the solver searches, when
    stderr is a terminal (nothing otherwise: logs and pipes stay clean). Rich's live display; it
    disappears when the step ends."""

    def __init__(self, what: str):
        self.what = what
        self._live = None
        self._task = None
        self._solver = None

    def __enter__(self):
        if sys.stderr.isatty():
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            from rankmap.placement.cpsat_model import solver_progress

            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=Console(stderr=True), transient=True)
            self._live.start()
            self._task = self._live.add_task(self.what, total=None)
            self._solver = solver_progress(self.solver_gap)
            self._solver.__enter__()
        return self

    def solver_gap(self, objective: float, bound: float) -> None:
        """CP-SAT found a solution: show its gap to the solver's own bound (model units)."""
        if self._live is not None and objective > 0:
            gap = max(0.0, (objective - bound) / objective)
            self._live.update(self._task, description=f"{self.what} (CP-SAT: gap {100 * gap:.1f}% to its bound)")
            self._live.refresh()  # the solver may hold the GIL: draw now, not on the refresh thread's turn

    def __exit__(self, *exc) -> None:
        if self._solver is not None:
            self._solver.__exit__(*exc)
        if self._live is not None:
            self._live.stop()


def print_json(doc: dict, stream=None) -> None:
    """``doc`` as one JSON document on ``stream`` (default stdout; stderr where the command's output
    file is stdout) for ``--json``: keys in a fixed order, numbers exact.

    NumPy scalars and arrays, tuples, paths and dataclasses are written as JSON values."""
    import dataclasses
    import json

    def plain(value):
        if hasattr(value, "tolist"):  # numpy scalar or array
            return value.tolist()
        if isinstance(value, (set, frozenset)):
            return sorted(value)
        if isinstance(value, Path):
            return str(value)
        if dataclasses.is_dataclass(value):
            return dataclasses.asdict(value)
        raise TypeError(f"not JSON: {type(value).__name__}")

    (stream or sys.stdout).write(json.dumps(doc, indent=2, default=plain, allow_nan=False) + "\n")


def cluster_doc(cluster: Cluster) -> dict:
    """A cluster's headline figures for JSON outputs: hosts, GPUs, ToR groups and per-tier bandwidth."""
    return {"name": cluster.name, "hosts": len(cluster.hosts), "free_hosts": len(cluster.free_hosts()),
            "gpus": cluster.gpus, "tor_groups": len(cluster.tor_groups), "rails": cluster.rails,
            "tiers": [{"name": f.name, "domains": f.domains, "switches": f.switches, "down_gbps": f.down_gbps,
                       "up_gbps": f.up_gbps, "cabled_gbps": f.cabled_gbps,
                       "oversubscription": f.ratio} for f in cluster.tier_figures()]}


def plan_doc(cluster: Cluster, result: PlanResult, written: list[Path], elapsed_s: float) -> dict:
    """``rankmap plan --json``: the map's summary (every placement's metrics, bound, status), notes, files."""
    rm = result.rankmap
    return {"cluster": cluster_doc(cluster), "job": rm.job.name, "world_size": rm.world_size, "hosts": len(rm.hosts),
            "summary": rm.summary, "status_meaning": status_meaning(result.solver_status, result.gap),
            "solve_time_s": result.ours.solve_time_s, "notes": list(result.notes),
            "outputs": [str(p) for p in written], "elapsed_s": elapsed_s}


__all__ = ["console_for", "progress", "print_json", "cluster_doc", "plan_doc", "short_bytes", "print_plan",
           "print_replan", "replan_cost_text", "print_simulation", "tier_labels", "print_diagnosis", "print_import_summary"]


def print_plan(cluster: Cluster, result: PlanResult, written: list[Path], elapsed_s: float,
               console: Console | None = None) -> None:
    """Print the cluster and job summary, the comparison table and the output files."""
    console = console or console_for(120)
    job, rm = result.job, result.rankmap
    free = len(cluster.free_hosts())
    ratios = ", ".join(f"{f.name} {ratio_text(f.ratio)}" for f in cluster.tier_figures() if f.ratio is not None)
    console.print(Text.assemble(("cluster", "bold"), f" {cluster.name}: {len(cluster.hosts)} hosts ({free} free) in "
                                f"{len(cluster.tor_groups)} ToR groups, {cluster.rails} rails; oversubscription "
                                f"(cabled down:up bandwidth) {ratios or 'none above the ToR groups'}"))
    planned = set(rm.hosts)
    sizes = sorted({h.gpus for h in cluster.hosts if h.name in planned}, reverse=True)
    console.print(Text.assemble(
        ("job", "bold"), f" {job.name}: tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep} "
        f"order {job.order}, {job.world_size} ranks on {len(rm.hosts)} hosts of "
        f"{'/'.join(map(str, sizes)) or rm.nproc_per_node} GPUs, {job.micro_batches()} micro-batches, "
        f"{job.model.params / 1e9:.1f}B parameters; framework "
        f"{job.framework}{' ' + job.framework_version if job.framework_version else ' (current release)'}"))
    told = [f"{key} {hosts}" for key, hosts in sorted(rm.context.items())]
    if result.moved_hosts is not None:
        told.append(f"{result.moved_hosts} host(s) moved from the previous plan")
    if told:
        console.print(Text.assemble(("constraints", "bold"), " " + "; ".join(told)))
    tiers = crossed_tiers(cluster)
    labels = tier_labels(tiers)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    cols = (["placement", "weighted"] + [f"x-{t}" for t in labels] + [f"{t}\nspread" for t in labels]
            + ["x-ToR\nedges", "busiest\nToR", "gap"])
    rows = []
    bound = result.lower_bound_bytes
    for cand in (result.ours,) + result.baselines:
        row = metrics_row(cand, bound if result.has_bound else None)
        spread = [f"{dp}/{pp}" for dp, pp in itertools.zip_longest(row["max_dp_spread_per_tier"],
                                                                      row["max_pp_spread_per_tier"], fillvalue=1)]
        rows.append([
            "rankmap plan" if cand is result.ours else cand.name, short_bytes(row["weighted_bytes"]),
            *[short_bytes(b) for b in row["tier_bytes"]], *spread,
            f"{row['dp_edges_cross_tor']}/{row['pp_edges_cross_tor']}", short_bytes(row["max_uplink_bytes"]),
            "-" if row["gap_to_bound"] is None else f"{100 * row['gap_to_bound']:.1f}%"])
    _fill(table, cols, rows, bold_first=True)
    console.print(table, markup=False)
    weights = ", ".join(f"{t}={w:g}" for t, w in zip(tiers, result.tier_weights)) if result.tier_weights else ""
    console.print("weighted: bytes per iteration crossing each tier times the tier's weight (the optimised cost"
                  + (f"; weights {weights}" if weights else "") + "); x-T: bytes per iteration leaving T's domains; "
                  "T spread: the most domains below T that one DP/PP group spans (Arnold's spread); x-ToR edges: "
                  "DP/PP rank pairs in different ToR groups; busiest ToR: bytes through the busiest ToR group's "
                  "uplinks, in and out; gap: to the lower bound"
                  + "".join(f"; {label}: tier {name}" for label, name in zip(labels, tiers) if label != name),
                  markup=False)
    if not result.has_bound:  # no bound computed: "lower bound 0 B (... none)" contradicted itself
        why = result.bound_method.removeprefix("none").strip(" ()")
        bound_text = f"no lower bound{f' ({why})' if why else ''}, so no gap"
    else:
        bound_text = (f"lower bound {human_bytes(bound)} (valid for every placement of this job on these hosts; "
                      f"{result.bound_method})")
    console.print(f"{bound_text}; solved in {result.ours.solve_time_s:.2f} s, solver status {result.solver_status}: "
                  f"{status_meaning(result.solver_status, result.gap)}", markup=False)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print("wrote " + ", ".join(str(p) for p in written) + f" in {elapsed_s:.1f} s", markup=False)


TIER_LABEL_CHARS = 8   # a tier name longer than this heads its columns as T1, T2, ... (lowest first)


def tier_labels(tiers) -> list[str]:
    """Column labels for tier names: the name when short, else ``T<level>`` (the table's legend
    names it), so a long name (a Kubernetes label key) never squeezes the figures out of a
    100-column table.

    Examples
    --------
    >>> tier_labels(["pod", "cloud.google.com/gce-topology-block", "spine"])
    ['pod', 'T2', 'spine']
    """
    return [t if len(t) <= TIER_LABEL_CHARS else f"T{i}" for i, t in enumerate(tiers, start=1)]


def short_bytes(n: float) -> str:
    """Three significant figures in decimal units, for tables (JSON outputs keep exact bytes).

    Examples
    --------
    >>> short_bytes(272.41e12), short_bytes(6.994e12), short_bytes(14.15e12), short_bytes(0)
    ('272 TB', '6.99 TB', '14.2 TB', '0 B')
    >>> short_bytes(26254e12), short_bytes(3.2e18)
    ('26.3 PB', '3.20 EB')
    """
    for unit, scale in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.{max(0, 2 - int(abs(v) >= 10) - int(abs(v) >= 100))}f} {unit}"
    return f"{n:.0f} B"


def _fill(table: Table, cols: list[str], rows: list[list[str]], bold_first: bool = False) -> None:
    """Add the columns and the rows as plain Text (names never act as markup); cells never wrap."""
    for i, col in enumerate(cols):
        table.add_column(Text(col), justify="left" if i == 0 else "right", no_wrap=True)
    for k, r in enumerate(rows):
        cells = _plain(*r)
        if bold_first and k == 0:
            cells[0].stylize("bold")
        table.add_row(*cells)


def print_replan(result, written: list[Path], console: Console | None = None) -> None:
    """Print which hosts were replaced, how many ranks moved, and the cost before and after: the
    bytes per iteration crossing each tier and the tier-weighted cost the replacements minimise."""
    console = console or console_for(130)
    for node, old, new in result.replaced:
        console.print(f"node rank {node}: {old} -> {new}", markup=False)
    console.print(f"{len(result.replaced)} hosts replaced, {result.moved_ranks} ranks moved; "
                  + replan_cost_text(result), markup=False)
    console.print("wrote " + ", ".join(str(p) for p in written), markup=False)


def replan_cost_text(result) -> str:
    """Every tier's bytes per iteration before -> after, and the weighted cost.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace as NS
    >>> from rankmap.placement.metrics import PlacementMetrics
    >>> m = lambda t: PlacementMetrics(t[0], {}, {}, np.zeros(1), t, {}, t[0] + 3 * t[1])
    >>> print(replan_cost_text(NS(before=m((405.9e9, 58e9)), after=m((662.3e9, 58e9)), weights=(1.0, 3.0),
    ...                           tiers=("spine", "core"))))  # doctest: +NORMALIZE_WHITESPACE
    bytes per iteration crossing spine 405.90 GB -> 662.30 GB (+256.40 GB), core 58.00 GB -> 58.00 GB (+0 B);
    weighted (spine=1, core=3) 579.90 GB -> 836.30 GB (+256.40 GB)
    """

    def change(a: float, b: float) -> str:
        return f"{human_bytes(a)} -> {human_bytes(b)} ({'+' if b >= a else '-'}{human_bytes(abs(b - a))})"

    before, after = result.before, result.after
    tiers = result.tiers or ("ToR uplinks",)
    per = [f"{t} {change(a, b)}" for t, a, b in zip(tiers, before.tier_bytes or (before.cross_tor_bytes,),
                                                     after.tier_bytes or (after.cross_tor_bytes,))]
    text = "bytes per iteration crossing " + ", ".join(per)
    if len(per) > 1:
        weights = ", ".join(f"{t}={w:g}" for t, w in zip(tiers, result.weights))
        text += f"; weighted ({weights}) {change(before.cost, after.cost)}"
    return text


def _plain(*cells) -> list:
    """Table cells as plain Text: names from input files never act as rich markup."""
    return [c if isinstance(c, Text) else Text(str(c)) for c in cells]


def _tier_text(t: dict) -> str:
    """One tier's load and ECMP figures, e.g. 'spine: 2.20 TB up, max 1.1 GB, 36% idle, 4.2% lost'."""
    text = f"{t['name']}: {human_bytes(t['uplink_bytes'])} up, max {human_bytes(t['max_uplink_bytes'])}"
    if "ecmp" in t:
        e = t["ecmp"]
        text += (f", {100 * e['idle_uplink_fraction']['mean']:.0f}% idle, "
                 f"{100 * e['bandwidth_lost']['mean']:.1f}% lost")
    return text


def print_simulation(cluster, job, doc: dict, written, elapsed_s: float, n_seeds: int,
                     console: Console | None = None) -> None:
    """Print the simulated communication time of every placement, its phases and ECMP losses."""
    console = console or console_for(100)
    console.print(Text.assemble(("cluster", "bold"), f" {cluster.name}: {len(cluster.hosts)} hosts in "
                                f"{len(cluster.tor_groups)} ToR groups; ", ("job", "bold"),
                                f" {job.name}: tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep}, "
                                f"{job.world_size} ranks; traffic from {doc['traffic']['source']}"))
    console.print(f"communication time of one iteration in seconds ({n_seeds} ECMP seed(s), mean; phases in "
                  "sequence, every group of a phase released at t = 0)", markup=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    staged = any("staged_time_s" in q for p in doc["placements"] for q in p["phases"])
    cols = ["placement", "comm", "seeds\n+/-", "vs\nspray"] + _phase_heads(doc, staged) + ["ECMP\nloss*",
                                                                                          "busiest\nuplink"]
    rows = []
    for p in doc["placements"]:
        t = p["comm_time_s"]
        worst = max(p["phases"], key=lambda q: q["time_s"]["mean"]) if p["phases"] else None
        rows.append([p["name"], f"{t['mean']:.3f}", f"{(t['max'] - t['min']) / 2:.3f}", f"{p['slowdown_vs_ideal']:.2f}x",
                     *_phase_cells(p, staged),
                     f"{100 * worst['ecmp']['bandwidth_lost']['mean']:.1f}%" if worst else "-",
                     short_bytes(p["max_uplink_bytes"])])
    _fill(table, cols, rows, bold_first=True)
    console.print(table, markup=False)
    if staged:
        console.print("dp-reduce at t=0: every stage's DP groups in the network at once (what comm, vs spray and "
                      "the ECMP figures count); staged: the slowest stage's reduction, each stage's DP groups "
                      "released as its last backward readies their gradients (what the iteration time below uses)", markup=False)
    for p in doc["placements"]:
        slow = p["slowest_group"]
        if slow:
            console.print(f"{p['name']}: slowest group {slow['collective']} #{slow['group']} over "
                          f"{len(slow['tor_groups'])} ToR groups, {slow['time_s']:.3f} s", markup=False)
        bandwidths = [c for ph in p["phases"] for c in ph["collectives"] if "algbw_gbps" in c]
        if bandwidths:
            console.print(f"{p['name']}, slowest group of each collective (nccl-tests' algbw = S/t, busbw): "
                          + "; ".join(f"{c['collective']} {short_bytes(c['size_bytes'])} x {c['count']:g}: "
                                      f"algbw {c['algbw_gbps']:.1f} GB/s, busbw {c['busbw_gbps']:.1f} GB/s"
                                      for c in bandwidths), markup=False)
    console.print("* bandwidth lost to hash collisions in the longest phase, over the flows that cross the spine "
                  "(1 - ECMP rates / sprayed rates); seeds +/-: half the range over seeds (s); busiest uplink: bytes on the "
                  "single busiest uplink port", markup=False)
    for p in doc["placements"]:
        if p.get("tiers"):
            console.print(f"{p['name']}, per tier of uplinks: " + "; ".join(_tier_text(t) for t in p["tiers"]),
                          markup=False)
    first = doc["placements"][0]["comm_time_s"]["mean"]
    for p in doc["placements"][1:]:
        ratio = p["comm_time_s"]["mean"] / first if first > 0 else float("inf")
        console.print(f"{p['name']}: {ratio:.2f}x the communication time of {doc['placements'][0]['name']}",
                      markup=False)
    if "compute" in doc and all("iteration" in p for p in doc["placements"]):
        _print_iteration(doc, n_seeds, console)
    console.print("wrote " + ", ".join(str(w) for w in written) + f" in {elapsed_s:.1f} s", markup=False)


def _phase_heads(doc: dict, staged: bool) -> list[str]:
    """Phase columns, names broken after their hyphens (the table fits 100 columns); with staged
    reductions, dp-reduce twice: at t = 0 and staged."""
    heads = []
    for q in doc["placements"][0]["phases"]:
        head = q["name"].replace("-", "-\n")
        heads += [f"{head}\nat t=0", f"{head}\nstaged"] if staged and q["name"] == "dp-reduce" else [head]
    return heads


def _phase_cells(p: dict, staged: bool) -> list[str]:
    cells = []
    for q in p["phases"]:
        cells.append(f"{q['time_s']['mean']:.3f}")
        if staged and q["name"] == "dp-reduce":
            cells.append(f"{q['staged_time_s']['mean']:.3f}" if "staged_time_s" in q else "-")
    return cells


def _print_iteration(doc: dict, n_seeds: int, console: Console) -> None:
    """Predicted iteration time and MFU per placement, and what our plan gains end to end."""
    from rankmap.simulator.report import iteration_figures  # the simulator loads only for simulate

    c = doc["compute"]
    kinds = list(dict.fromkeys(k for p in doc["placements"] for k in p["iteration"]["exposed_comm_s"]))
    relevant = [k for k in c["overlap"] if k not in ("cp", "ep") or k in kinds]  # CP/EP only for jobs that have them
    overlaps = [k for k in relevant if c["overlap"][k]]
    off = [k for k in relevant if not c["overlap"][k]]
    not_on = f" (not {', '.join(off)})" if overlaps and off else ""
    sources = {p["iteration"].get("compute_source", "flops") for p in doc["placements"]}
    compute = (f"{c['gpu']} {c['peak_tflops']:g} TFLOP/s x {c['efficiency_gemm']:g} GEMM efficiency, "
               f"recompute {'on' if c['recompute'] else 'off'}" if sources == {"flops"} else
               f"compute times from the workload file ({c['gpu']} {c['peak_tflops']:g} TFLOP/s for MFU)")
    loading = f", data loading {c['data_loading_s']:g} s" if c.get("data_loading_s") else ""
    console.print(f"predicted iteration ({c['schedule']}, {compute}, "
                  f"overlap: {', '.join(overlaps) or 'none'}{not_on}{loading}; {n_seeds} seed(s), mean)", markup=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ["placement", "iteration", "MFU", "tokens/s", "bubble"] + [f"exposed\n{k}" for k in kinds]
    rows = []
    for p in doc["placements"]:
        f = iteration_figures(p["iteration"])
        rows.append([p["name"], f["time"], f["mfu"], f["tokens"], f["bubble"],
                     *[f["exposed"].get(k, "0.000 s") for k in kinds]])
    _fill(table, cols, rows, bold_first=True)
    console.print(table, markup=False)
    console.print("bubble: idle share of the busiest stage's pipeline time; exposed K: how much longer the "
                  "iteration is than with K's communication free, on the critical stage (the one whose reduction "
                  "ends last; simulation.png's timelines repeat these figures and mark it)", markup=False)
    ours = doc["placements"][0]
    mine = ours["iteration"]
    for p in doc["placements"][1:]:
        gain = p["iteration"]["time_s"]["mean"] / mine["time_s"]["mean"] - 1
        console.print(f"{ours['name']}: {100 * mine['mfu']['mean']:.1f}% MFU, {p['name']}: "
                      f"{100 * p['iteration']['mfu']['mean']:.1f}%, end-to-end {100 * gain:+.1f}%", markup=False)


def print_diagnosis(d, host_of: dict, tor_of: dict, written: list[Path], console: Console | None = None) -> None:
    """Print the flagged ranks, hosts and ToR groups, the hang and its culprits, and the files written."""
    console = console or console_for(130)
    console.print(f"{len(d.ranks)} ranks, phases: {', '.join(d.phases)}", markup=False)
    if d.flags:
        table = Table(title=Text("flagged (z: robust z-score against the ranks of the same pipeline stage; "
                                       "a slow link against the other senders)"), title_justify="left")
        for col in ("what", "who", "host", "ToR group", "phase", "measure", "value", "typical", "z"):
            table.add_column(Text(col), justify="right" if col in ("value", "typical", "z") else "left")
        for f in d.flags:
            host = host_of.get(int(f.who), "") if f.what == "rank" else (f.who if f.what == "host" else "")
            tor = tor_of.get(host, "") if host else (f.who if f.what == "tor_group" else "")
            table.add_row(*_plain(f.what, f.who, host, tor, f.phase, f.measure, f"{f.value_s * 1e3:.1f} ms",
                          f"{f.typical_s * 1e3:.1f} ms", f"{f.z:.1f}"))
        console.print(table, markup=False)
    else:
        console.print("no stragglers flagged", markup=False)
    if d.hang is not None:
        h = d.hang
        who = ", ".join(f"rank {c} on {host} ({state})" for c, host, state in
                        zip(h.culprits, h.culprit_hosts, h.culprit_state)) or "none found"
        text = f": {hang_where(h)}; they wait for: {who}" if h.waiting else \
            f": no rank waits for another; stuck: {who}"  # every rank is a culprit (one hung collective, or compute)
        console.print(Text.assemble(("hang", "bold red"), text), markup=False)
    console.print("wrote " + ", ".join(str(p) for p in written), markup=False)


def hang_where(h) -> str:
    """Where a hang's victims wait, counted per operation: ``7 ranks wait: 4 in pp-recv (pp #25),
    2 in tp-reduce-scatter (tp #450), 1 in dp-all-gather (dp #14)``; one operation: ``4 ranks wait
    in pp-recv (pp #25)``."""
    parts = [(len(ranks), f"{phase} ({group} {', '.join(f'#{s}' for s in seqs)})")
             for phase, group, seqs, ranks in h.waiting_in]
    if not parts:
        return f"{len(h.waiting)} ranks wait in {h.phase}" + (f" ({h.group} #{h.seq})" if h.group else "")
    if len(parts) == 1:
        return f"{parts[0][0]} {'rank waits' if parts[0][0] == 1 else 'ranks wait'} in {parts[0][1]}"
    return f"{len(h.waiting)} ranks wait: " + ", ".join(f"{n} in {where}" for n, where in parts)


def print_import_summary(result, lines: list[str], stream=None) -> None:
    """Summary of an imported topology on ``stream`` (default stdout; stderr when the spec itself goes to
    stdout); its warnings once, on stderr, one line each (not also among the summary lines, which
    a terminal would show twice)."""
    listed = {f"warning: {w}" for w in result.warnings}
    for line in lines:
        if line not in listed:
            print(line, file=stream or sys.stdout)
    for warning in result.warnings:
        print(f"rankmap: warning: {warning}", file=sys.stderr)

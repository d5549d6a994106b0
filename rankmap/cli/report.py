"""Everything the command line prints about a result: plans, replans, simulations, diagnoses, imports.

Tables are rich tables; warnings go to stderr, one line each. Nothing from input (names,
paths, phases) is ever read as rich markup: lines are printed with ``markup=False``, table
cells, headers and titles are plain :class:`rich.text.Text`, and styled words are
:meth:`rich.text.Text.assemble` parts.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rankmap.placement.metrics import human_bytes
from rankmap.placement.result import PlanResult, metrics_row
from rankmap.placement.status import status_meaning
from rankmap.placement.tier_weights import crossed_tiers
from rankmap.topology.model import Cluster

__all__ = ["print_plan", "print_replan", "print_simulation", "print_diagnosis", "print_import_summary"]


def print_plan(cluster: Cluster, result: PlanResult, written: list[Path], elapsed_s: float,
               console: Console | None = None) -> None:
    """Print the cluster and job summary, the comparison table and the output files."""
    console = console or Console(width=170)
    job, rm = result.job, result.rankmap
    free = len(cluster.free_hosts())
    console.print(Text.assemble(
        ("cluster", "bold"), f" {cluster.name}: {len(cluster.hosts)} hosts ({free} free) in "
        f"{len(cluster.tor_groups)} ToR groups, {cluster.rails} rails, uplink/downlink "
        f"{cluster.links.uplink_to_downlink_ratio:g}x"))
    console.print(Text.assemble(
        ("job", "bold"), f" {job.name}: tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep} "
        f"order {job.order}, {job.world_size} ranks on {len(rm.hosts)} hosts x {rm.nproc_per_node} GPUs, "
        f"{job.micro_batches()} micro-batches, {job.model.params / 1e9:.1f}B parameters"))
    tiers = crossed_tiers(cluster)
    table = Table(title=Text("bytes crossing each tier per iteration, and the most domains below it any DP/PP group "
                        "spans (Arnold's spread)"), title_justify="left")
    cols = (["placement", "weighted bytes"] + [f"x-{t} bytes" for t in tiers] + [f"{t} spread" for t in tiers]
            + ["DP edges x-ToR", "PP edges x-ToR", "max uplink bytes", "solve time", "gap to bound"])
    for col in cols:
        table.add_column(Text(col), justify="left" if col == "placement" else "right", no_wrap=col == "placement")
    bound = result.lower_bound_bytes
    for cand in (result.ours,) + result.baselines:
        row = metrics_row(cand, bound)
        spread = [f"{dp}/{pp}" for dp, pp in itertools.zip_longest(row["max_dp_spread_per_tier"],
                                                                      row["max_pp_spread_per_tier"], fillvalue=1)]
        table.add_row(*_plain(
            Text("rankmap plan", style="bold") if cand is result.ours else cand.name,
            human_bytes(row["weighted_bytes"]),
            *[human_bytes(b) for b in row["tier_bytes"]], *spread,
            str(row["dp_edges_cross_tor"]), str(row["pp_edges_cross_tor"]), human_bytes(row["max_uplink_bytes"]),
            f"{cand.solve_time_s:.2f} s" if cand is result.ours else "-",
            f"{100 * row['gap_to_bound']:.2f}%"))
    console.print(table, markup=False)
    weights = ", ".join(f"{t}={w:g}" for t, w in zip(tiers, result.tier_weights)) if result.tier_weights else ""
    if weights:
        console.print(f"tier weights {weights}; spread as DP/PP domains", markup=False)
    console.print(f"lower bound {human_bytes(bound)} (valid for every placement of this job on these hosts; "
                  f"{result.bound_method}); solver status {result.solver_status}: "
                  f"{status_meaning(result.solver_status, result.gap)}", markup=False)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    console.print("wrote " + ", ".join(str(p) for p in written) + f" in {elapsed_s:.1f} s", markup=False)


def print_replan(result, written: list[Path], console: Console | None = None) -> None:
    """Print which hosts were replaced, how many ranks moved, and the cost before and after."""
    console = console or Console(width=130)
    for node, old, new in result.replaced:
        console.print(f"node rank {node}: {old} -> {new}", markup=False)
    before, after = result.before.cross_tor_bytes, result.after.cross_tor_bytes
    console.print(f"{len(result.replaced)} hosts replaced, {result.moved_ranks} ranks moved; cross-ToR bytes per "
                  f"iteration {human_bytes(before)} -> {human_bytes(after)} ({human_bytes(after - before)} more)",
                  markup=False)
    console.print("wrote " + ", ".join(str(p) for p in written), markup=False)


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
    console = console or Console(width=170)
    console.print(Text.assemble(("cluster", "bold"), f" {cluster.name}: {len(cluster.hosts)} hosts in "
                                f"{len(cluster.tor_groups)} ToR groups; ", ("job", "bold"),
                                f" {job.name}: tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep}, "
                                f"{job.world_size} ranks; traffic from {doc['traffic']['source']}"), markup=False)
    phases = [p["name"] for p in doc["placements"][0]["phases"]]
    table = Table(title=Text(f"communication time of one iteration ({n_seeds} ECMP seed(s), mean; phases in sequence)"),
                  title_justify="left")
    for col in ["placement", "comm time", "seed range", "vs spraying"] + phases + ["slowest group", "ECMP loss*",
                                                                                   "max uplink"]:
        table.add_column(Text(col), justify="left" if col in ("placement", "slowest group") else "right",
                         no_wrap=col in ("placement", "slowest group", "seed range"))
    for p in doc["placements"]:
        t = p["comm_time_s"]
        slow = p["slowest_group"]
        worst = max(p["phases"], key=lambda q: q["time_s"]["mean"]) if p["phases"] else None
        table.add_row(*_plain(p["name"], f"{t['mean']:.4f} s", f"{t['min']:.4f}-{t['max']:.4f}",
                      f"{p['slowdown_vs_ideal']:.2f}x",
                      *[f"{q['time_s']['mean']:.4f} s" for q in p["phases"]],
                      (f"{slow['collective']} #{slow['group']}, {len(slow['tor_groups'])} ToR grp, "
                       f"{slow['time_s']:.3f} s" if slow else "-"),
                      f"{100 * worst['ecmp']['bandwidth_lost']['mean']:.1f}%" if worst else "-",
                      human_bytes(p["max_uplink_bytes"])))
    console.print(table, markup=False)
    console.print("* bandwidth lost to hash collisions in the longest phase, over the flows that cross the spine "
                  "(1 - ECMP rates / sprayed rates)", markup=False)
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


def _print_iteration(doc: dict, n_seeds: int, console: Console) -> None:
    """Predicted iteration time and MFU per placement, and what our plan gains end to end."""
    c = doc["compute"]
    overlaps = [k for k, on in c["overlap"].items() if on]
    kinds = list(dict.fromkeys(k for p in doc["placements"] for k in p["iteration"]["exposed_comm_s"]))
    table = Table(title=Text(f"predicted iteration ({c['schedule']}, {c['gpu']} {c['peak_tflops']:g} TFLOP/s x "
                        f"{c['efficiency_gemm']:g} GEMM efficiency, recompute {'on' if c['recompute'] else 'off'}, "
                        f"overlap: {', '.join(overlaps) or 'none'}; {n_seeds} seed(s), mean)"), title_justify="left")
    for col in ["placement", "iteration", "MFU", "tokens/s", "bubble"] + [f"exposed {k}" for k in kinds]:
        table.add_column(Text(col), justify="left" if col == "placement" else "right", no_wrap=col == "placement")
    for p in doc["placements"]:
        it = p["iteration"]
        table.add_row(*_plain(p["name"], f"{it['time_s']['mean']:.3f} s", f"{100 * it['mfu']['mean']:.1f}%",
                      f"{it['tokens_per_s']:,.0f}", f"{100 * it['bubble_fraction']:.1f}%",
                      *[f"{it['exposed_comm_s'].get(k, 0.0):.4f} s" for k in kinds]))
    console.print(table, markup=False)
    ours = doc["placements"][0]
    mine = ours["iteration"]
    for p in doc["placements"][1:]:
        gain = p["iteration"]["time_s"]["mean"] / mine["time_s"]["mean"] - 1
        console.print(f"{ours['name']}: {100 * mine['mfu']['mean']:.1f}% MFU, {p['name']}: "
                      f"{100 * p['iteration']['mfu']['mean']:.1f}%, end-to-end {100 * gain:+.1f}%", markup=False)


def print_diagnosis(d, host_of: dict, tor_of: dict, written: list[Path], console: Console | None = None) -> None:
    """Print the flagged ranks, hosts and ToR groups, the hang and its culprits, and the files written."""
    console = console or Console(width=130)
    console.print(f"{len(d.ranks)} ranks, phases: {', '.join(d.phases)}", markup=False)
    if d.flags:
        table = Table(title=Text("flagged (robust z-score against all ranks)"), title_justify="left")
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
        console.print(Text.assemble(("hang", "bold red"), f": {len(h.waiting)} ranks wait in {h.phase} "
                                    f"({h.group} #{h.seq}); they wait for: {who}"), markup=False)
    console.print("wrote " + ", ".join(str(p) for p in written), markup=False)


def print_import_summary(result, lines: list[str]) -> None:
    """Summary of an imported topology on stdout; warnings again on stderr, one line each, so they are not missed."""
    for line in lines:
        print(line)
    for warning in result.warnings:
        print(f"rankmap: warning: {warning}", file=sys.stderr)

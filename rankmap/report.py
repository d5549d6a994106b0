"""Terminal report of a plan: our placement against the baselines (rich tables)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from placement.metrics import human_bytes
from placement.plan import PlanResult, metrics_row
from topology.model import Cluster

__all__ = ["print_plan", "print_replan"]


def print_plan(cluster: Cluster, result: PlanResult, written: list[Path], elapsed_s: float,
               console: Console | None = None) -> None:
    """Print the cluster and job summary, the comparison table and the output files."""
    console = console or Console(width=130)
    job, rm = result.job, result.rankmap
    free = len(cluster.free_hosts())
    console.print(f"[bold]cluster[/] {cluster.name}: {len(cluster.hosts)} hosts ({free} free) in "
                  f"{len(cluster.tor_groups)} ToR groups, {cluster.rails} rails, uplink/downlink "
                  f"{cluster.links.uplink_to_downlink_ratio:g}x")
    console.print(f"[bold]job[/] {job.name}: tp={job.tp} pp={job.pp} dp={job.dp} cp={job.cp} ep={job.ep} "
                  f"order {job.order}, {job.world_size} ranks on {len(rm.hosts)} hosts x {rm.nproc_per_node} GPUs, "
                  f"{job.micro_batches()} micro-batches, {job.model.params / 1e9:.1f}B parameters")
    table = Table(title="bytes and ring edges crossing ToR groups, per iteration", title_justify="left")
    for col in ("placement", "cross-ToR bytes", "DP edges x-ToR", "PP edges x-ToR", "max DP spread",
                "max uplink bytes", "solve time", "gap to bound"):
        table.add_column(col, justify="left" if col == "placement" else "right", no_wrap=col == "placement")
    bound = result.lower_bound_bytes
    for cand in (result.ours,) + result.baselines:
        row = metrics_row(cand, bound)
        table.add_row(
            "[bold]rankmap plan[/]" if cand is result.ours else cand.name,
            human_bytes(row["cross_tor_bytes"]), str(row["dp_edges_cross_tor"]), str(row["pp_edges_cross_tor"]),
            f"{row['max_dp_spread_tor_groups']} groups", human_bytes(row["max_uplink_bytes"]),
            f"{cand.solve_time_s:.2f} s" if cand is result.ours else "-",
            f"{100 * row['gap_to_bound']:.2f}%")
    console.print(table)
    console.print(f"lower bound {human_bytes(bound)} (valid for every placement of this job on these hosts; "
                  f"{result.bound_method}); solver status {result.solver_status}")
    for note in result.notes:
        console.print(f"note: {note}")
    console.print("wrote " + ", ".join(str(p) for p in written) + f" in {elapsed_s:.1f} s")


def print_replan(result, written: list[Path], console: Console | None = None) -> None:
    """Print which hosts were replaced, how many ranks moved, and the cost before and after."""
    console = console or Console(width=130)
    for node, old, new in result.replaced:
        console.print(f"node rank {node}: {old} -> {new}")
    before, after = result.before.cross_tor_bytes, result.after.cross_tor_bytes
    console.print(f"{len(result.replaced)} hosts replaced, {result.moved_ranks} ranks moved; cross-ToR bytes per "
                  f"iteration {human_bytes(before)} -> {human_bytes(after)} ({human_bytes(after - before)} more)")
    console.print("wrote " + ", ".join(str(p) for p in written))

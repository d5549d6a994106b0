"""Terminal report of ``rankmap diagnose`` (rich tables)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

__all__ = ["print_diagnosis"]


def print_diagnosis(d, host_of: dict, tor_of: dict, written: list[Path], console: Console | None = None) -> None:
    console = console or Console(width=130)
    console.print(f"{len(d.ranks)} ranks, phases: {', '.join(d.phases)}")
    if d.flags:
        table = Table(title="flagged (robust z-score against all ranks)", title_justify="left")
        for col in ("what", "who", "host", "ToR group", "phase", "measure", "value", "typical", "z"):
            table.add_column(col, justify="right" if col in ("value", "typical", "z") else "left")
        for f in d.flags:
            host = host_of.get(int(f.who), "") if f.what == "rank" else (f.who if f.what == "host" else "")
            tor = tor_of.get(host, "") if host else (f.who if f.what == "tor_group" else "")
            table.add_row(f.what, f.who, host, tor, f.phase, f.measure, f"{f.value_s * 1e3:.1f} ms",
                          f"{f.typical_s * 1e3:.1f} ms", f"{f.z:.1f}")
        console.print(table)
    else:
        console.print("no stragglers flagged")
    if d.hang is not None:
        h = d.hang
        who = ", ".join(f"rank {c} on {host} ({state})" for c, host, state in
                        zip(h.culprits, h.culprit_hosts, h.culprit_state)) or "none found"
        console.print(f"[bold red]hang[/]: {len(h.waiting)} ranks wait in {h.phase} ({h.group} #{h.seq}); "
                      f"they wait for: {who}")
    console.print("wrote " + ", ".join(str(p) for p in written))

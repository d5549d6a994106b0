"""Hang localisation from the records of ranks whose progress watchdog fired (MegaScale, NSDI'24 §5).

Every rank whose progress watchdog fired wrote what it was in: an operation it is
blocked in (group, members, sequence number), or a compute phase. The ranks a blocked rank
waits on are the members of its operation not blocked in that same instance; following
those waits ends at ranks that are not blocked in any operation -- stuck in compute, or
with no record at all (never entered the operation: frozen, dead, or stopped before it)
-- the culprits. The blocked ranks are the victims.

When the waits end at no such rank, the hang is inside an operation: every member of it
entered it and none completed (an NCCL collective that hangs on a link, a NIC or one
member's communicator; the engine's ``stall_mode: collective`` drill). Host-side records
cannot tell its members apart, so all of them are the culprits, the operation named.
Only then: a complete operation is otherwise a victim too (on GPUs, a collective queued on
a stream behind an operation that waits for a culprit does not complete either).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rankmap.diagnose.records import RunRecords

__all__ = ["HangVerdict", "hang_verdict"]


@dataclass(frozen=True)
class HangVerdict:
    """The operation most ranks are blocked in, the ranks they wait for (culprits) and the
    blocked ranks (victims)."""

    group: str
    seq: int
    phase: str
    waiting: tuple
    culprits: tuple
    culprit_hosts: tuple
    culprit_state: tuple   # per culprit: what its own watchdog recorded, or "no record"
    instances: tuple = ()  # per operation ranks are blocked in, lowest sequence number first per group:
                           # (phase, group, members, seq, entered, missing)
    waiting_in: tuple = ()  # where the victims wait, most victims first: (phase, group, seqs, ranks)


def _instance(h) -> tuple:
    """The operation instance a hang record is blocked in (P2P: source, destination, number)."""
    if h.phase.endswith(("-send", "-recv")) and len(h.peers) == 2:
        return ("p2p", h.peers[0], h.peers[1], h.seq)
    return (h.group, tuple(sorted(set(h.peers) | {h.rank})), h.seq)


def hang_verdict(records: RunRecords, host_of: dict) -> HangVerdict | None:
    """The operation most ranks are blocked in, its culprits and victims (module docstring);
    None when no rank wrote a hang record."""
    if not records.hangs:
        return None
    by_rank = {h.rank: h for h in records.hangs}
    blocked = {h.rank: _instance(h) for h in records.hangs if h.group is not None and h.state == "collective"}
    waits_on: dict = {}
    for r, inst in blocked.items():
        h = by_rank[r]
        waits_on[r] = sorted(p for p in set(h.peers) - {r} if blocked.get(p) != inst)
    # Follow the waits: the culprits are waited on and blocked in no operation themselves.
    seen, todo, culprits = set(), sorted(blocked), set()
    while todo:
        r = todo.pop()
        for p in waits_on.get(r, ()):
            if p not in blocked:
                culprits.add(p)
            elif p not in seen:
                seen.add(p)
                todo.append(p)
    stuck_inside = set()
    if not culprits:  # no rank outside the operations: the operations every member entered are stuck
        stuck_inside = {r for r in blocked if not waits_on[r]}
        culprits = set(stuck_inside)
    counts: dict = defaultdict(list)
    for r in blocked:  # the headline: the operation most victims are blocked in (P2P pairs together)
        counts[by_rank[r].phase, by_rank[r].group, by_rank[r].seq].append(r)
    if counts:
        (phase, group, seq), _ = max(counts.items(), key=lambda kv: (len(kv[1]), -kv[0][2], kv[0]))
    else:  # nobody blocked in an operation: every recorded rank stopped in compute
        group, seq, phase = None, 0, by_rank[min(by_rank)].phase
        culprits = set(by_rank)
    culprits = sorted(culprits)
    state = tuple(_inside_text(by_rank[c]) if c in stuck_inside else _state_text(by_rank.get(c)) if c in by_rank
                  else _never_entered(c, records, by_rank, blocked) for c in culprits)
    victims = tuple(sorted(set(blocked) - set(culprits)))
    return HangVerdict(group or "", seq, phase, victims, tuple(culprits), tuple(host_of.get(c, "?") for c in culprits),
                       state, _blocked_instances(blocked, by_rank), _waiting_in(victims, by_rank))


def _waiting_in(victims: tuple, by_rank: dict) -> tuple:
    """``((phase, group, seqs, ranks), ...)``: the victims by the operation they are blocked in,
    most victims first (then by phase): each group of a phase has its own sequence numbers."""
    where: dict = defaultdict(list)
    for r in victims:
        where[by_rank[r].phase, by_rank[r].group].append(r)
    rows = [(phase, group, tuple(sorted({by_rank[r].seq for r in ranks})), tuple(sorted(ranks)))
            for (phase, group), ranks in where.items()]
    return tuple(sorted(rows, key=lambda x: (-len(x[3]), x[0], x[1])))


def _blocked_instances(blocked: dict, by_rank: dict) -> tuple:
    """The operations ranks are blocked in, matched across ranks: who entered, who never did."""
    entered: dict = defaultdict(list)
    for r, inst in blocked.items():
        entered[inst].append(r)
    out = []
    for inst, ranks in entered.items():
        h = by_rank[ranks[0]]
        members = tuple(inst[1:3]) if inst[0] == "p2p" else inst[1]
        out.append((h.phase if inst[0] != "p2p" else f"{h.group}-p2p", h.group, members, inst[-1],
                    tuple(sorted(ranks)), tuple(m for m in members if m not in ranks)))
    return tuple(sorted(out, key=lambda x: (x[1], x[2], x[3])))


def _never_entered(rank: int, records: RunRecords, by_rank: dict, blocked: dict) -> str:
    """What a rank without a hang record last completed of an operation its peers are blocked in."""
    for r in sorted(blocked):
        inst = blocked[r]
        if rank not in by_rank[r].peers:
            continue
        if inst[0] == "p2p":
            done = [e.seq for e in records.events if e.rank == rank and len(e.peers) == 2
                    and (e.peers[0], e.peers[1]) == (inst[1], inst[2]) and e.phase.endswith(("-send", "-recv"))]
            what = f"P2P {inst[1]}->{inst[2]} ({by_rank[r].group})"
        else:
            done = [e.seq for e in records.events if e.rank == rank and e.group == inst[0]
                    and tuple(sorted(set(e.peers) | {e.rank})) == inst[1]]
            what = f"{by_rank[r].phase} ({inst[0]})"
        last = f"#{max(done)}" if done else "none"
        return (f"no record: never entered {what} #{inst[-1]} (its last completed: {last}; frozen, dead, or "
                f"stopped before it)")
    return _state_text(None)


def _inside_text(h) -> str:
    """What a culprit blocked in an operation that every member entered was in."""
    return (f"blocked in {h.phase} ({h.group} #{h.seq}) with every member: the operation itself hangs (a link, "
            f"a NIC or a member's communicator)")


def _state_text(h) -> str:
    if h is None:
        return "no record: never entered the operation (frozen, dead, or stopped before it)"
    if h.state == "compute":
        return f"stuck in compute ({h.phase}, step {h.step})"
    if h.state == "idle":
        return f"stopped between phases (step {h.step})"
    return f"blocked in {h.phase} ({h.group} #{h.seq})"

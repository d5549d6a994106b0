"""What users ask of a placement beyond the job itself, and why a request cannot be met.

- ``exclude``: hosts not to use (drained, suspected slow: e.g. from ``rankmap diagnose``).
- ``reserve``: hosts held by running jobs (read from their rank maps): place around them.
- ``quotas``: at most N hosts of this job in a ToR group.
- ``stage_pins``: pipeline stage -> ToR group holding all of that stage's hosts.
- ``rank_pins``: global rank -> host it must run on.

Constraint files (YAML)::

    exclude: "node[003,017]"
    reserve: [../jobA/rankmap.json]          # paths relative to this file
    quotas: {tg00: 10}
    pins:
      stages: {0: tg03}
      ranks: {0: node042}
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rankmap.errors import InfeasibleError, RankmapError, SpecError
from rankmap.names import host_identity
from rankmap.topology.hostnames import compress_hostlist, expand_hostlist
from rankmap.topology.model import Cluster, Host
from rankmap.yamlio import Fields, read_yaml

__all__ = ["PlacementConstraints", "load_constraints", "constraints_to_yaml", "explain_shortage"]


@dataclass(frozen=True)
class PlacementConstraints:
    """Constraints on a placement (all optional); see the module docstring."""

    exclude: tuple = ()
    reserve: tuple = ()
    quotas: dict = field(default_factory=dict)
    stage_pins: dict = field(default_factory=dict)
    rank_pins: dict = field(default_factory=dict)
    source: str = "<command line>"
    lines: dict = field(default_factory=dict, compare=False)  # key path -> line of ``source``, for errors
    # host identity -> (file, line, key, rank map path) of the reservation that took it, for errors
    reserved_by: dict = field(default_factory=dict, compare=False)

    def check_names(self, cluster: Cluster) -> None:
        """Every named host and ToR group exists (SpecError naming FILE:LINE and the key otherwise).

        Host names match in any letter case (host names ignore case, RFC 4343)."""
        named = ([("exclude", h) for h in self.exclude] + [("reserve", h) for h in self.reserve]
                 + [(f"pins.ranks.{r}", h) for r, h in self.rank_pins.items()])
        for key, h in named:
            if not cluster.has_host(h):
                raise SpecError(f"host {h!r} is not in cluster {cluster.name!r}", source=self.source,
                                line=self.lines.get(key), key=key)
        groups = {g.name for g in cluster.tor_groups}
        named = ([(f"quotas.{g}", g) for g in self.quotas]
                 + [(f"pins.stages.{s}", g) for s, g in self.stage_pins.items()])
        for key, g in named:
            if g not in groups:
                raise SpecError(f"ToR group {g!r} is not in cluster {cluster.name!r}", source=self.source,
                                line=self.lines.get(key), key=key)

    def in_spelling_of(self, cluster: Cluster) -> "PlacementConstraints":
        """A copy naming each host as ``cluster`` spells it (names match in any letter case);
        names the cluster lacks stay as given, for :meth:`check_names` to report."""
        def spell(name: str) -> str:
            return cluster.host(name).name if cluster.has_host(name) else name
        return dataclasses.replace(self, exclude=tuple(map(spell, self.exclude)),
                                   reserve=tuple(map(spell, self.reserve)),
                                   rank_pins={r: spell(h) for r, h in self.rank_pins.items()})

    def usable(self, hosts: list[Host]) -> list[Host]:
        """Hosts left after exclusions and reservations (names match in any letter case)."""
        taken = {host_identity(h) for h in (*self.exclude, *self.reserve)}
        return [h for h in hosts if host_identity(h.name) not in taken]

    def caps(self, cluster: Cluster, usable: list[Host]) -> tuple[int, ...]:
        """``caps[K]``: hosts this job may use per ToR group (free, after quotas)."""
        free = Counter(h.tor_group for h in usable)
        return tuple(min(free.get(g.name, 0), self.quotas.get(g.name, 1 << 60)) for g in cluster.tor_groups)


def load_constraints(path: str | Path, cluster: Cluster | None = None) -> PlacementConstraints:
    """Read a constraints YAML file (see the module docstring); reserved rank maps are read
    too, and checked to belong to ``cluster`` when it is given.

    Raises
    ------
    SpecError
        Unknown keys, bad values, unreadable rank maps (FILE:LINE and key named).
    """
    from rankmap.job.rank_map import read_rankmap

    source = str(path)
    top = Fields(read_yaml(path) or {}, source).only("exclude", "reserve", "quotas", "pins")
    lines = {key: top.line_of(key) for key in ("exclude", "reserve") if top.has(key)}
    exclude = tuple(expand_hostlist(top.str("exclude"), source=source, line=top.line_of("exclude"), key="exclude")
                    if top.has("exclude") else ())
    reserve: list[str] = []
    reserved_by: dict = {}
    items = top.seq("reserve", [])
    item_lines = getattr(items, "item_lines", None) or [top.line_of("reserve")] * len(items)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise top.error("reserve", f"expected rank map paths, got {item!r}")
        try:
            rm = read_rankmap(Path(path).parent / item)
            if cluster is not None:
                rm.verify_cluster(cluster)
        except RankmapError as exc:  # the map's own error, located at the item that names it
            kind = type(exc) if isinstance(exc, SpecError) else SpecError
            raise kind(str(exc), source=source, line=item_lines[i], key=f"reserve[{i}]") from None
        reserve += rm.hosts
        reserved_by |= {host_identity(h): (source, item_lines[i], f"reserve[{i}]", item) for h in rm.hosts}
    quotas = {}
    q = top.sub("quotas")
    for name in list(q.data):
        quotas[str(name)] = q.int(name, minimum=0)
        lines[f"quotas.{name}"] = q.line_of(name)
    pins = top.sub("pins").only("stages", "ranks")
    stages, ranks = pins.sub("stages"), pins.sub("ranks")
    stage_pins = {_index(stages, k): stages.str(k) for k in list(stages.data)}
    rank_pins = {_index(ranks, k): ranks.str(k) for k in list(ranks.data)}
    lines |= {f"pins.stages.{k}": stages.line_of(k) for k in stage_pins}
    lines |= {f"pins.ranks.{k}": ranks.line_of(k) for k in rank_pins}
    out = PlacementConstraints(exclude=exclude, reserve=tuple(reserve), quotas=quotas, stage_pins=stage_pins,
                               rank_pins=rank_pins, source=source, lines=lines, reserved_by=reserved_by)
    return out.in_spelling_of(cluster) if cluster is not None else out


def constraints_to_yaml(constraints: PlacementConstraints, comment: str = "") -> str:
    """A constraints file that :func:`load_constraints` reads back as ``constraints``.

    Written with PyYAML's safe dumper, so host and ToR group names are quoted as needed and
    cannot add keys. ``reserve`` names rank map files, not hosts, so it is not written:
    give reserved hosts as ``exclude`` instead.

    Parameters
    ----------
    constraints : PlacementConstraints
        ``reserve`` must be empty.
    comment : str
        Text for a leading ``#`` comment line (e.g. which command wrote the file).

    Returns
    -------
    str
        The YAML document.

    Raises
    ------
    ValueError
        ``constraints.reserve`` is not empty.

    Examples
    --------
    >>> print(constraints_to_yaml(PlacementConstraints(exclude=("n1", "n2"), quotas={"tg: x": 0})), end="")
    exclude: n[1-2]
    quotas:
      'tg: x': 0
    """
    import yaml

    if constraints.reserve:
        raise ValueError("reserve holds hosts of other jobs' rank maps; write them as exclude")
    doc: dict = {}
    if constraints.exclude:
        doc["exclude"] = compress_hostlist(list(constraints.exclude))
    if constraints.quotas:
        doc["quotas"] = {str(g): int(n) for g, n in constraints.quotas.items()}
    pins = {}
    if constraints.stage_pins:
        pins["stages"] = {int(s): str(g) for s, g in constraints.stage_pins.items()}
    if constraints.rank_pins:
        pins["ranks"] = {int(r): str(h) for r, h in constraints.rank_pins.items()}
    if pins:
        doc["pins"] = pins
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + (yaml.safe_dump(doc, sort_keys=False, default_flow_style=False) if doc else "{}\n")


def _index(f: Fields, key) -> int:
    if not isinstance(key, int) or isinstance(key, bool) or key < 0:
        raise f.error(str(key), f"expected a stage or rank number >= 0, got {key!r}")
    return key


def explain_shortage(cluster: Cluster, caps: tuple, need: int, what: str, source: str, key: str,
                     constraints: PlacementConstraints | None = None, usable: list[Host] | None = None) -> InfeasibleError:
    """An InfeasibleError saying how many hosts are short and where the usable ones are.

    With ``constraints`` and ``usable`` (the hosts left after exclusions and reservations), a
    shortage that the quotas cause -- the usable hosts would be enough without them -- is blamed
    on the quotas (the constraints file, the line of the first quota that holds hosts back), not
    on ``key`` (the job's dp, which was fine); otherwise the message still says how many hosts
    the quotas hold back.
    """
    have = sum(caps)
    by_group = sorted(((c, g.name) for c, g in zip(caps, cluster.tor_groups) if c), reverse=True)
    shown = ", ".join(f"{n}: {c}" for c, n in by_group[:6]) + (" ..." if len(by_group) > 6 else "")
    text = f"{what} needs {need} hosts; {have} usable in {len(by_group)} ToR groups ({shown or 'none'}): {need - have} short"
    if constraints is None or usable is None or not constraints.quotas:
        return InfeasibleError(text, source=source, key=key)
    free = Counter(h.tor_group for h in usable)
    held = [(g.name, free.get(g.name, 0), c) for g, c in zip(cluster.tor_groups, caps) if free.get(g.name, 0) > c]
    if not held:
        return InfeasibleError(text, source=source, key=key)
    back = sum(f - c for _, f, c in held)
    quotas = ", ".join(f"{g}: {c} of {f}" for g, f, c in held[:6]) + (" ..." if len(held) > 6 else "")
    if have + back < need:  # too few hosts even without the quotas: the job asks too much
        return InfeasibleError(f"{text} (the quotas of {constraints.source} hold back {back} more)",
                               source=source, key=key)
    first = f"quotas.{held[0][0]}"
    return InfeasibleError(f"the quotas hold back {back} usable hosts ({quotas}), and {what} needs {need}: "
                           f"{have} left under them ({shown or 'none'}), {need - have} short; raise the quotas "
                           f"or plan a smaller job", source=constraints.source, line=constraints.lines.get(first),
                           key="quotas")

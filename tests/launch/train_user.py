"""A user's own training script, as ``rankmap launch ... -- train_user.py --steps 2`` runs it.

It checks at start-up that it sits where the rank map says (:func:`rankmap.launch.check_placement`:
alone before ``init_process_group``, then with every process's claim), builds the map's DP and
PP groups with torch.distributed, and trains a tiny linear model for ``--steps`` steps on gloo:
gradients averaged over the DP group, the loss summed over the PP group. Each rank writes
``rank-R.json`` (rank, host, Slurm node, groups, losses) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--out", default="user-run")
    args = ap.parse_args()

    from rankmap.launch import check_placement
    check_placement()  # this process alone, before the process group exists

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    where = check_placement()  # every process's claim, exchanged over the default group
    groups = {}
    for kind in ("dp", "pp"):  # every rank creates every group, in the same order
        for ranks in _all_groups(kind):
            group = dist.new_group(ranks=ranks)
            if where.rank in ranks:
                groups[kind] = group
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(args.steps):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(where.coords["dp"] * 100 + step))  # (B, C)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=groups["dp"])
            p.grad /= len(where.groups["dp"])
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, group=groups["pp"])
        losses.append(float(total))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = {"rank": where.rank, "env_rank": int(os.environ["RANK"]), "host": where.host,
              "slurmd_nodename": os.environ.get("SLURMD_NODENAME"), "local_rank": where.local_rank,
              "groups": {k: where.groups[k] for k in ("tp", "pp", "dp")}, "losses": losses}
    (out / f"rank-{where.rank}.json").write_text(json.dumps(record) + "\n")
    dist.destroy_process_group()
    return 0


def _all_groups(kind: str) -> list[list[int]]:
    """Every group of ``kind`` in the map (``$RANKMAP_FILE``), in order of their smallest rank."""
    from rankmap.job.rank_map import read_rankmap

    rm = read_rankmap(os.environ["RANKMAP_FILE"])
    return [[int(r) for r in row] for row in rm.layout.groups(kind)]


if __name__ == "__main__":
    raise SystemExit(main())

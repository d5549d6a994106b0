"""A user's own torch.distributed script timed with rankmap.engine.usertiming.timed_run (run by torchrun
in test_usertiming.py): tp=2 x pp=2 on 4 ranks, a TP all-reduce and a PP send/receive in the forward,
a world all-reduce in the optimizer; rank SLOW (argv[2]) computes 0.2 s longer from step 2 on."""

import sys
import time

import torch
import torch.distributed as dist

from rankmap.engine.usertiming import timed_run

out, slow = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo")
rank = dist.get_rank()
tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]      # the map's TP pairs (tp fastest)
pp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
tp, pp = tp_groups[rank // 2], pp_groups[rank % 2]
with timed_run(out, hang_timeout_s=60) as run:
    for step in range(1, 6):
        with run.step(step):
            with run.phase("forward"):
                x = torch.full((1024,), float(rank))
                end = time.perf_counter() + 0.02 + (0.2 if rank == slow and step > 1 else 0.0)
                while time.perf_counter() < end:
                    pass
                dist.all_reduce(x, group=tp)
                if rank < 2:
                    dist.send(x, dst=rank + 2, group=pp)
                else:
                    dist.recv(x, src=rank - 2, group=pp)
            with run.phase("optimizer"):
                dist.all_reduce(torch.ones(4))
dist.destroy_process_group()

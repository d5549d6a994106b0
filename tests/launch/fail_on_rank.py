"""A tiny gloo job that fails on one rank: ``fail_on_rank.py RANK raise|abort``.

Every rank joins the process group (torchrun's environment) and passes a barrier; then rank
RANK raises ``ValueError`` (or calls ``os.abort()``: SIGABRT) while the others wait in a second
barrier, which fails when its connection closes ("Connection closed by peer").
"""

import os
import sys

import torch.distributed as dist

fail_rank, how = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == fail_rank:
    if how == "abort":
        os.abort()
    raise ValueError(f"boom on rank {fail_rank}")
dist.barrier()

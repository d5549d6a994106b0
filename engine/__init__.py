"""engine: a small 3D-parallel GPT trainer and the launchers that start it from a rank map.

Modules, one topic each:

- :mod:`engine.config` -- typed, validated run configuration (``engine.yaml``).
- :mod:`engine.ranks` -- which rank this process is: its host and local rank, checked against
  the rank map across all processes (no torch).
- :mod:`engine.mesh` -- the process group and DeviceMesh built from the rank map, with peer checks.
- :mod:`engine.model` -- the GPT model (byte vocabulary, rotary attention, MLP).
- :mod:`engine.parallel` -- tensor, pipeline and data parallelism from torch.distributed's own parts.
- :mod:`engine.data` -- real offline text (the Python standard library), byte tokens, seeded batches.
- :mod:`engine.optim` -- AdamW, learning rate, gradient clipping across meshes.
- :mod:`engine.checkpoint` -- distributed checkpoints, committed atomically.
- :mod:`engine.train` -- the training entry point (parse -> build -> run -> close).
- :mod:`engine.reference` -- the same model and batches in one process, for comparison.
- :mod:`engine.launch` -- torchrun lines, a Slurm batch script, an Open MPI rankfile and a DeepSpeed
  hostfile from a rank map (no torch); :mod:`engine.launchfiles` reads them back.
- :mod:`engine.local` -- one torchrun agent per host of the map, all on 127.0.0.1.
- :mod:`engine.records`, :mod:`engine.diagnose`, :mod:`engine.heatmap`, :mod:`engine.trace` --
  per-rank timing and hang records and ``rankmap diagnose`` (stragglers, hangs).

PyTorch is an optional dependency (``pip install 'rankmap[engine]'``): importing ``engine``,
``engine.launch``, ``engine.launchfiles``, ``engine.ranks``, ``engine.runspec``, ``engine.data`` or
``engine.local`` does not import torch. The engine never imports ortools or networkx.
"""

"""engine: a small 3D-parallel GPT trainer and the launchers that start it from a rank map.

Modules, one topic each:

- :mod:`rankmap.engine.config` -- typed, validated run configuration (``engine.yaml``).
- :mod:`rankmap.engine.ranks` -- which rank this process is: its host and local rank, checked against
  the rank map across all processes (no torch).
- :mod:`rankmap.engine.mesh` -- the process group and DeviceMesh built from the rank map, with peer checks.
- :mod:`rankmap.engine.model` -- the GPT model (byte vocabulary, rotary attention, MLP).
- :mod:`rankmap.engine.parallel` -- tensor, pipeline and data parallelism from torch.distributed's own parts.
- :mod:`rankmap.engine.data` -- real offline text (the Python standard library), byte tokens, seeded batches.
- :mod:`rankmap.engine.optim` -- AdamW, learning rate, gradient clipping across meshes.
- :mod:`rankmap.engine.checkpoint` -- distributed checkpoints, committed atomically.
- :mod:`rankmap.engine.train` -- the training entry point (parse -> build -> run -> close).
- :mod:`rankmap.engine.reference` -- the same model and batches in one process, for comparison.
- :mod:`rankmap.launch.writers` -- torchrun lines, a Slurm batch script, an Open MPI rankfile and a DeepSpeed
  hostfile from a rank map (no torch); :mod:`rankmap.launch.readers` reads them back.
- :mod:`rankmap.launch.local` -- one torchrun agent per host of the map, all on 127.0.0.1.
- :mod:`rankmap.diagnose.records`, :mod:`rankmap.diagnose.analysis`, :mod:`rankmap.diagnose.heatmap`, :mod:`rankmap.diagnose.trace` --
  per-rank timing and hang records and ``rankmap diagnose`` (stragglers, hangs).

PyTorch is an optional dependency (``pip install 'rankmap[engine]'``): importing ``engine``,
``rankmap.launch.writers``, ``rankmap.launch.readers``, ``rankmap.engine.ranks``, ``rankmap.engine.runspec``, ``rankmap.engine.data`` or
``rankmap.launch.local`` does not import torch. The engine never imports ortools or networkx.
"""

"""launch: start a placed job so that global rank r runs where the rank map says (no torch).

- :mod:`rankmap.launch.writers` -- torchrun lines, a Slurm batch script, an Open MPI rankfile and a
  DeepSpeed hostfile from a rank map.
- :mod:`rankmap.launch.readers` -- the same files read back (what rank each line starts).
- :mod:`rankmap.launch.local` -- one torchrun agent per host of the map, all on 127.0.0.1.

Importing this package, or any module in it, does not import torch.
"""

"""launch: start a placed job so that global rank r runs where the rank map says (no torch).

- :mod:`rankmap.launch.common` -- launch options, host checks, the engine's arguments, script headers, line reading.
- :mod:`rankmap.launch.torchrun` -- torchrun lines (static rendezvous) and ``torchrun.sh``; the listing read back.
- :mod:`rankmap.launch.slurm` -- the Slurm batch script and ``SLURM_HOSTFILE``; the hostfile read back and checked.
- :mod:`rankmap.launch.mpi` -- the Open MPI rankfile and ``mpirun.sh``; the rankfile read back and checked.
- :mod:`rankmap.launch.deepspeed` -- the DeepSpeed hostfile and ``deepspeed.sh``; the hostfile read back and checked.
- :mod:`rankmap.launch.formats` -- ``FORMATS`` and ``launch_files``: every format's files by name; ``check_against_map``.
- :mod:`rankmap.launch.local` -- one torchrun agent per host of the map, all on 127.0.0.1.
- :mod:`rankmap.launch.allocation` -- the sbatch script that plans inside its Slurm allocation.
- :mod:`rankmap.launch.ranks` -- the start-up check's core: launcher variables, host claims, map ranks.
- :mod:`rankmap.launch.placement` -- :func:`check_placement`, the start-up check for a user's own script.
- :mod:`rankmap.launch.adapters` -- Megatron-LM, torchtitan and DeepSpeed flags for the map's groups.
- :mod:`rankmap.launch.noderank` -- this host's node rank and torchrun flags (Kubernetes pods).

Importing this package, or any module in it, does not import torch.
"""

from rankmap.launch.placement import Placement, check_placement

__all__ = ["check_placement", "Placement"]

"""job: what is being placed -- the job spec, its rank layout, its traffic, its rank map file.

Shared by the planner, the simulator, the launchers and the engine:

- :mod:`rankmap.job.spec` -- the job spec (parallel sizes, order string, model, batch, precision) and
  model presets, read from YAML.
- :mod:`rankmap.job.layout` -- the rank generator: global rank <-> (tp, cp, ep, dp, pp) coordinates and
  every process group of each kind.
- :mod:`rankmap.job.traffic` -- the bytes each group moves per iteration.
- :mod:`rankmap.job.rank_map` -- the placed job (``rankmap.json``) and the hostfile: writer and reader.

Imports :mod:`rankmap.topology` only; importing this package loads nothing.
"""

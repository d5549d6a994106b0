"""job: what is being placed -- the job spec, its rank layout, its communication, its rank map file.

Shared by the planner, the simulator, the launchers and the engine:

- :mod:`rankmap.job.spec` -- the job spec (parallel sizes, order, model, batch, precision) and model presets.
- :mod:`rankmap.job.spec_file` -- the job spec YAML file: reader (FILE:LINE errors) and writer.
- :mod:`rankmap.job.layout` -- the rank generator: rank <-> named coordinates, groups of every kind and composite.
- :mod:`rankmap.job.comm` -- one iteration's communication, once: collective, group kind, bytes, count, phase.
- :mod:`rankmap.job.traffic` -- the planner's view of it: bytes per rank-level edge of each kind's groups.
- :mod:`rankmap.job.rank_map` -- the placed job (``rankmap.json``) and the hostfile: writer and reader.

Imports :mod:`rankmap.errors`, :mod:`rankmap.fileio`, :mod:`rankmap.yamlio` and :mod:`rankmap.topology`
only; importing this package loads nothing.
"""

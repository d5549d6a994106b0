"""engine: a small 3D-parallel GPT trainer started from a rank map (the trainer only).

Modules, one topic each:

- :mod:`rankmap.engine.config` -- typed, validated run configuration (``engine.yaml``).
- :mod:`rankmap.engine.runspec` -- the run's shape: the config checked against the rank map's job (no torch).
- :mod:`rankmap.engine.mesh` -- the process group and DeviceMesh built from the rank map, with peer checks.
- :mod:`rankmap.engine.model` -- the GPT model (byte vocabulary, rotary attention, MLP).
- :mod:`rankmap.engine.parallel` -- tensor, pipeline and data parallelism from torch.distributed's own parts.
- :mod:`rankmap.engine.data` -- real offline text (the Python standard library), byte tokens, seeded batches.
- :mod:`rankmap.engine.optim` -- AdamW, learning rate, gradient clipping across meshes.
- :mod:`rankmap.engine.step` -- one training iteration: split the batch, forward-backward, clip, step.
- :mod:`rankmap.engine.timing` -- the phase timer and progress watchdog of one rank (records via
  :mod:`rankmap.diagnose.records`).
- :mod:`rankmap.engine.comms` -- every collective and P2P operation timed where it is called.
- :mod:`rankmap.engine.usertiming` -- the same timing and watchdog for a user's own torch script.
- :mod:`rankmap.engine.checkpoint` -- distributed checkpoints, committed atomically.
- :mod:`rankmap.engine.train` -- the training entry point (parse -> build -> run -> close).
- :mod:`rankmap.engine.reference` -- the same model and batches in one process, for comparison.

The launch files that start it, and the start-up check of which rank this process is
(:mod:`rankmap.launch.ranks`), are :mod:`rankmap.launch`'s; the diagnosis of its records is
:mod:`rankmap.diagnose`'s.

PyTorch is an optional dependency (``pip install 'rankmap[engine]'``): importing ``rankmap.engine``,
``rankmap.engine.runspec`` or ``rankmap.engine.data`` does not import
torch. The engine never imports ortools or networkx.
"""

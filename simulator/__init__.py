"""simulator: flow-level replay of a placed job's collective traffic, with ECMP hashing.

What a placement costs on the network before GPU hours are spent. Collectives
are decomposed as NCCL runs them (:mod:`~rankmap.simulator.collectives`), their flows laid on the
cluster's links -- NIC, rail ToR, spine, NVLink -- with ECMP hashing salted per switch or
packet spraying (:mod:`~rankmap.simulator.network`, :mod:`~rankmap.simulator.ecmp`), and run to
completion at max-min fair rates (:mod:`~rankmap.simulator.maxmin`, :mod:`~rankmap.simulator.events`).
:mod:`~rankmap.simulator.iteration` simulates one training iteration's communication phase by phase,
:mod:`~rankmap.simulator.compute` (FLOPs, GPU presets), :mod:`~rankmap.simulator.schedule` (1F1B and
interleaved 1F1B as a dependency graph, overlaps) and :mod:`~rankmap.simulator.timing` turn it into
iteration time, tokens/s and MFU,
:mod:`~rankmap.simulator.stats` repeats it over hash seeds, :mod:`~rankmap.simulator.workload` reads
SimAI/AICB workloads, :mod:`~rankmap.simulator.report` / :mod:`~rankmap.simulator.plot` write the JSON
result and the PNG figure, and :func:`~rankmap.simulator.simulate.simulate_placements` runs it all for
named rank maps (the library form of ``rankmap simulate``).

Layering: imports ``topology`` and ``job`` (the traffic is :func:`rankmap.job.comm.iteration_comm`),
never ``placement`` or the command line. Submodules are imported where used, so importing
this package costs nothing.
"""

"""diagnose: a run's per-rank timing and hang records turned into stragglers and culprits (no torch).

- :mod:`rankmap.diagnose.records` -- the event and hang record files: their writing (called by the engine's timer) and reading.
- :mod:`rankmap.diagnose.clocks` -- clock offsets between hosts from collective completion times.
- :mod:`rankmap.diagnose.analysis` -- stragglers and slow links.
- :mod:`rankmap.diagnose.lateness` -- late arrivals to collectives: the rank its peers keep waiting for.
- :mod:`rankmap.diagnose.hangs` -- hang localisation (culprits and victims).
- :mod:`rankmap.diagnose.heatmap` -- the per-rank heat map (PNG).
- :mod:`rankmap.diagnose.trace` -- the timeline as a Chrome/Perfetto trace.

Importing this package, or any module in it, does not import torch.
"""

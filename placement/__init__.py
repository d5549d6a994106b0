"""placement: the placement search (host order per job), its baselines and re-planning.

The front door, and building the problem once:

- ``plan``: :func:`~rankmap.placement.plan.plan`, order strings, islands, candidates -> PlanResult.
- ``problem``: usable hosts (once per plan), capacities, host grid, pins: the PlacementProblem.
- ``pins``: rank and stage pins checked and turned into typed grid pins.
- ``constraints``: exclusions, reservations, quotas and pins as the user gives them (YAML).

The grid and its cost:

- ``host_grid``: node ranks as (stage row, DP column) cells; order-string checks; cells <-> hosts.
- ``grid_problem``: the grid problem in cost units, typed grid pins, exact cost and uplink load.
- ``metrics``: what a host order costs on the network (the one ``measure_order``).
- ``objectives``: the objectives (bytes, spread, uplink, fragmentation, moved) and their ranking key.

Construction methods, bounds and the solver:

- ``baselines``: hostname order, arrival order, topology greedy (what users get without rankmap).
- ``subset_sum``: fewest whole ToR groups filling a row exactly (shared by the layouts).
- ``snake_layout``: whole groups per stage, laid boustrophedon.
- ``band_layout``: bands of consecutive stages stacked in the same groups.
- ``mixed_gpu_counts``: whole TP groups per host on hosts of different GPU counts.
- ``lower_bounds``: the analytic bound and the CP-SAT relaxation bound.
- ``crossing_bound``: per tier, the counting bound of whole rings against split ones.
- ``cpsat_model``: the CP-SAT interval model: build, hint, solve, decode.
- ``grid_search``: constructive starts, bounds, then CP-SAT; which placement wins.
- ``status``: SolverStatus, the statuses a plan reports.

Results and re-planning:

- ``result``: Candidate and PlanResult, and the summary written to rankmap.json.
- ``replan``: replace failed hosts, moving only their ranks.

Importing this package stays cheap: the CP-SAT modules (``cpsat_model``, ``lower_bounds``,
``grid_search``) and the planner (``plan``) are imported only where they are used.
"""

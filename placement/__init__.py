"""placement: jobs, traffic per group, rank layouts, rank maps and the placement solver.

Importing this package stays cheap: the CP-SAT solver (``rankmap.placement.solver``) and the
planner (``rankmap.placement.plan``) are imported only where they are used.
"""

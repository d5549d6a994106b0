"""Which rank this process is: the torch-free start-up check now lives in
:mod:`rankmap.launch.ranks` (a user's own script uses it through
:func:`rankmap.launch.check_placement`); re-exported here for the engine.
"""

from rankmap.launch.ranks import Claim, LaunchEnv, check_claims, find_host, launcher_message, machine_names, make_claim

__all__ = ["LaunchEnv", "Claim", "find_host", "make_claim", "check_claims", "launcher_message", "machine_names"]

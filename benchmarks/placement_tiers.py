"""Three-tier benchmark instances: time, peak memory and gap per instance.

Kept for its command line; the instances live in ``instances.py`` and the loop in
``placement.py`` (``python benchmarks/placement.py --fabric three-tier``).
``python benchmarks/placement_tiers.py [--sizes 1024 12288] [--kinds gpt3 deep cp ep mixed]``.
"""

from __future__ import annotations

import argparse

from instances import KINDS, SIZES  # benchmarks/instances.py, beside this script

from placement import run_tiered  # benchmarks/placement.py, beside this script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 12288], choices=sorted(SIZES))
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    args = ap.parse_args()
    run_tiered(args.sizes, args.kinds, args.time_limit)


if __name__ == "__main__":
    main()

"""Long fuzz run over every parser: ``python benchmarks/fuzz.py [--inputs 10000] [--seed 0]``.

Feeds each parser seeded mutations of its seed inputs and token soup (the corpus of
rankmap.fuzzing, which the test suite runs briefly). A parser may accept an input or
reject it with a RankmapError; any other exception, or an input taking over 5 s, is a
failure. Prints, per parser, inputs run, accepted, rejected, failures and the slowest
input; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent

from rankmap.errors import RankmapError
from rankmap.fuzzing import TOKENS, mutate, parsers


def inputs(seeds: list[str], n: int, rng: random.Random):
    for i in range(n):
        if i % 5 == 4:  # token soup
            yield "".join(rng.choice(TOKENS + ["SwitchName", "Nodes", "node", "slots", "a"])
                          for _ in range(rng.randint(0, 80)))
        else:
            edits = [(rng.randint(0, 4), rng.randint(0, 10**6), rng.choice(TOKENS)) for _ in range(rng.randint(1, 8))]
            yield mutate(rng.choice(seeds), edits)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=10000, help="inputs per parser (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    failures = 0
    print(f"{'parser':14s} {'inputs':>7s} {'accepted':>9s} {'rejected':>9s} {'failures':>9s} {'slowest s':>10s}")
    for name, (parse, seeds) in sorted(parsers(HERE.parent / "tests" / "data" / "field-cases").items()):
        rng = random.Random(f"{args.seed}:{name}")
        counts = {"accepted": 0, "rejected": 0, "failures": 0}
        slowest = 0.0
        for text in inputs(seeds, args.inputs, rng):
            t0 = time.perf_counter()
            try:
                parse(text)
                counts["accepted"] += 1
            except RankmapError:
                counts["rejected"] += 1
            except Exception:  # a bug: report the input
                counts["failures"] += 1
                if counts["failures"] <= 3:
                    print(f"{name}: {text[:200]!r}\n{traceback.format_exc()}", file=sys.stderr)
            took = time.perf_counter() - t0
            slowest = max(slowest, took)
            if took > 5:
                counts["failures"] += 1
                print(f"{name}: slow input ({took:.1f} s): {text[:200]!r}", file=sys.stderr)
        failures += counts["failures"]
        print(f"{name:14s} {args.inputs:7d} {counts['accepted']:9d} {counts['rejected']:9d} "
              f"{counts['failures']:9d} {slowest:10.3f}", flush=True)
    print("no failures" if not failures else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

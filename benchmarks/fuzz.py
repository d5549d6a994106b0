"""Long fuzz run over every parser: ``python benchmarks/fuzz.py [--inputs 10000] [--seed 0] [--save DIR]``.

Feeds each parser seeded inputs of three kinds, in turn: mutations of its seed inputs, token
soup, and grammar-aware inputs (rankmap.fuzzing.structured: the format's own syntax with
hostile names -- shell metacharacters, IPv6 zone ids, newlines, other spellings of one IPv4
address, case variants -- hostile numbers and deep nesting). A parser may accept an input or
reject it with a one-line RankmapError; a failure is any other exception, a message of more
than one line, an accepted value holding a name outside its grammar (rankmap.fuzzing.names_ok),
or an input taking over 2 s. Prints, per parser, inputs tried, accepted, rejected, failures
and the slowest input; exits non-zero on any failure. ``--save DIR`` writes every failing
input there (add them to tests/data/fuzz-corpus/, which the test suite replays).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

from rankmap.errors import RankmapError
from rankmap.fuzzing import TOKENS, mutate, names_ok, parsers, structured

HERE = Path(__file__).resolve().parent
SLOW_S = 2.0


def inputs(name: str, seeds: list[str], n: int, rng: random.Random):
    for i in range(n):
        if i % 3 == 2:  # grammar-aware
            yield structured(name, rng, seeds[0])
        elif i % 6 == 1:  # token soup
            yield "".join(rng.choice(TOKENS + ["SwitchName", "Nodes", "node", "slots", "a"])
                          for _ in range(rng.randint(0, 80)))
        else:
            edits = [(rng.randint(0, 4), rng.randint(0, 10**6), rng.choice(TOKENS)) for _ in range(rng.randint(1, 8))]
            yield mutate(rng.choice(seeds), edits)


def outcome(parse, text: str) -> tuple[str, str | None]:
    """``("accepted" or "rejected", None)``, or ``("failures", why)`` (see the module doc)."""
    try:
        why = names_ok(parse(text))
        return ("failures", f"accepted a name outside its grammar: {why}") if why else ("accepted", None)
    except RankmapError as exc:
        message = str(exc).strip()
        if message and "\n" not in message:
            return "rejected", None
        return "failures", f"message not one line: {message[:200]!r}"
    except Exception:  # a bug: report the input
        return "failures", traceback.format_exc(limit=3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=10000, help="inputs per parser (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="run one parser")
    parser.add_argument("--save", type=Path, help="folder to write failing inputs into")
    args = parser.parse_args()
    failures = 0
    print(f"{'parser':14s} {'inputs':>7s} {'accepted':>9s} {'rejected':>9s} {'failures':>9s} {'slowest s':>10s}")
    for name, (parse, seeds) in sorted(parsers(HERE.parent / "tests" / "data" / "field-cases").items()):
        if args.only and name != args.only:
            continue
        rng = random.Random(f"{args.seed}:{name}")
        counts = {"accepted": 0, "rejected": 0, "failures": 0}
        slowest = 0.0
        for i, text in enumerate(inputs(name, seeds, args.inputs, rng)):
            t0 = time.perf_counter()
            kind, why = outcome(parse, text)
            took = time.perf_counter() - t0
            slowest = max(slowest, took)
            if why is None and took > SLOW_S:
                kind, why = "failures", f"slow input ({took:.1f} s)"
            counts[kind] += 1
            if why is None:
                continue
            if counts["failures"] <= 3:
                print(f"{name}: {text[:200]!r}\n{why}", file=sys.stderr)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                (args.save / f"{name}--{args.seed}-{i}.txt").write_text(text)
        failures += counts["failures"]
        print(f"{name:14s} {args.inputs:7d} {counts['accepted']:9d} {counts['rejected']:9d} "
              f"{counts['failures']:9d} {slowest:10.3f}", flush=True)
    print("no failures" if not failures else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

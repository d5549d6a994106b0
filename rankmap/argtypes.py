"""argparse value types shared by the subcommands: each refuses a bad value with one line."""

from __future__ import annotations

import argparse
import math

__all__ = ["positive_int", "non_negative_int", "seed_int", "non_negative_float", "fraction", "positive_float"]


def _number(text: str, kind, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (seeds, counts)."""
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def seed_int(text: str) -> int:
    """A seed: an integer in 0 .. 2**31 - 1 (what CP-SAT and NumPy both take)."""
    value = non_negative_int(text)
    if value >= 2**31:
        raise argparse.ArgumentTypeError(f"expected a seed below 2**31, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text, float, "a number >= 0")
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (speeds in Gb/s, time limits)."""
    value = _number(text, float, "a positive number")
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = _number(text, float, "a number in (0, 1]")
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value

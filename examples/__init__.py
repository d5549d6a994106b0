"""Example clusters and jobs; installed as ``rankmap.examples`` (the embedded default)."""

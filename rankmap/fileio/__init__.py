"""Files in and out, for every layer: input text read with clear errors, output written atomically.

- :mod:`rankmap.fileio.reading` -- :func:`read_text` and its limits, :func:`parse_json`.
- :mod:`rankmap.fileio.atomic` -- :func:`atomic_write_files`: several outputs committed together
  under a folder lock, never half-written.
"""

from rankmap.fileio.atomic import (
    LOCK_TIMEOUT_S,
    STALE_TMP_S,
    atomic_write_files,
    atomic_write_text,
    keep_signal_handlers,
)
from rankmap.fileio.reading import (
    MAX_INPUT_BYTES,
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    check_numbers,
    decode_text,
    depth_line,
    iter_lines,
    nesting_depth,
    parse_json,
    read_bytes,
    read_text,
)

__all__ = ["atomic_write_files", "atomic_write_text", "iter_lines", "keep_signal_handlers", "read_text", "read_bytes",
           "decode_text", "check_numbers", "parse_json", "nesting_depth", "depth_line", "MAX_INPUT_BYTES",
           "MAX_JSON_DEPTH", "MAX_INT_DIGITS", "LOCK_TIMEOUT_S", "STALE_TMP_S"]

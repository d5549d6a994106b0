"""The training log rank 0 writes (rankmap.engine.train): one appended line a step, whole lines
only, even when the writer is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rankmap.engine.train import append_train_log, open_train_log, read_train_log
from rankmap.errors import RankmapError

WRITER = """
import sys
from pathlib import Path
from rankmap.engine.train import append_train_log, open_train_log
fd = open_train_log(Path(sys.argv[1]), [])
step = 0
while True:
    step += 1
    append_train_log(fd, {"step": step, "loss": 5.0 - 1e-3 * step, "note": "x" * 500})
"""


def test_steps_are_appended_to_one_file_in_the_log_format(tmp_path):
    path = tmp_path / "train-log.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n')     # an earlier run's log
    fd = open_train_log(path, [{"step": 1, "loss": 5.5}])           # resumed after step 1
    inode = path.stat().st_ino
    for step in (2, 3):
        append_train_log(fd, {"step": step, "loss": 5.5 - step / 4})
    os.close(fd)
    assert path.stat().st_ino == inode                              # appended to, not rewritten
    assert path.read_text() == '{"step": 1, "loss": 5.5}\n{"step": 2, "loss": 5.0}\n{"step": 3, "loss": 4.75}\n'
    assert [r["step"] for r in read_train_log(path)] == [1, 2, 3]


def test_a_writer_killed_mid_run_leaves_whole_lines(tmp_path):
    path = tmp_path / "train-log.jsonl"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not path.is_file() or path.stat().st_size < 20_000):
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    records = read_train_log(path)
    assert len(records) >= 30 and [r["step"] for r in records] == list(range(1, len(records) + 1))
    assert path.read_text().endswith("}\n")


def test_a_line_cut_short_at_the_end_is_left_out_and_a_bad_line_inside_is_located(tmp_path):
    path = tmp_path / "train-log.jsonl"
    path.write_text('{"step": 1}\n{"step": 2, "lo')
    assert read_train_log(path) == [{"step": 1}]
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(RankmapError, match=r"train-log.jsonl:2: not a training-log record"):
        read_train_log(path)


def test_the_log_lines_are_json_dumps_of_the_records(tmp_path):
    record = {"step": 7, "loss": 4.5, "grad_norm": 2.25, "lr": 0.003, "tokens": 1536, "step_time_s": 3.75,
              "tokens_per_s": 409.6}
    fd = open_train_log(tmp_path / "log.jsonl", [])
    append_train_log(fd, record)
    os.close(fd)
    assert (tmp_path / "log.jsonl").read_text() == json.dumps(record) + "\n"

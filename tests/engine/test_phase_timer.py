"""The phase timer's records of one rank, written by a real PhaseTimer (no process group needed)."""

from __future__ import annotations

from rankmap.diagnose.records import read_run
from rankmap.engine.config import DiagnosticsConfig
from rankmap.engine.timing import PhaseTimer


def test_an_injected_slow_send_is_time_blocked_in_the_send(tmp_path):
    # a slow link: the sender waits for its send on the slow wire; that time is blocked time
    # (wait_s), which diagnosis subtracts from its lateness to later collectives (left out, the
    # slowed sender of a drill was named late to its DP collectives by 24 x 0.15 s)
    cfg = DiagnosticsConfig(hang_timeout_s=0, inject_rank=0, inject_phase="send", inject_delay_s=0.05)
    timer = PhaseTimer(tmp_path, 0, "h", 0, False, cfg, run_id="r")
    send = timer.open_comm("send", "pp", (0, 1), 0)
    assert timer.blocked is None                  # no longer blocked once the slow send is out
    timer.close_comm(send)
    reduce = timer.open_comm("all-reduce", "dp", (0, 2), 0)   # other operations are not slowed
    timer.close_comm(reduce)
    timer.close()
    send, reduce = read_run(tmp_path, "r").events
    assert send.phase == "pp-send" and 0.05 <= send.wait_s <= send.dur_s < 0.2
    assert reduce.wait_s == 0.0 and reduce.dur_s < 0.05

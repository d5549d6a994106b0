"""The record files' writer and reader together: what the engine's timer writes reads back unchanged."""

from __future__ import annotations

import json

import pytest

from rankmap.diagnose.records import (
    append_event,
    event_path,
    events_dir,
    hang_path,
    new_event,
    new_hang,
    open_event_log,
    read_run,
    write_hang,
)
from rankmap.errors import RankmapError


def test_written_events_and_hangs_read_back_as_written(tmp_path):
    folder = events_dir(tmp_path, "20260101T000000Z-abcdef")
    events = [new_event(rank=r, host=f"h{r // 2}", local_rank=r % 2, step=s, phase=phase, start_s=100.0 + s + 1e-7,
                        dur_s=0.1234567, group=group, peers=peers, seq=s, cpu_s=cpu)
              for r in (2, 0) for s in (1, 2)
              for phase, group, peers, cpu in (("forward", None, (), 0.1), ("dp-all-reduce", "dp", [0, 2], None))]
    for r in (2, 0):
        log = open_event_log(folder, r)            # makes RUN_DIR/events/RUN_ID/
        for e in events:
            if e.rank == r:
                append_event(log, e)
        log.close()
    hang = new_hang(rank=2, host="h1", local_rank=0, step=2, phase="dp-all-reduce", group="dp", peers=[0, 2], seq=2,
                    since_s=101.00000049, timeout_s=10)
    assert write_hang(folder, hang) == hang_path(folder, 2)
    run = read_run(tmp_path)
    assert run.ranks == (0, 2) and run.hangs == (hang,) and run.run_id == "20260101T000000Z-abcdef"
    assert run.events == tuple(e for r in (0, 2) for e in events if e.rank == r)   # ranks ascending, file order
    assert {e.dur_s for e in run.events} == {0.123457} and run.events[0].start_s == 101.0
    assert hang.since_s == 101.0 and hang.peers == (0, 2)


def test_event_files_are_never_appended_to_and_hang_records_are_one_sorted_json_object(tmp_path):
    e = new_event(rank=7, host="n3", local_rank=1, step=4, phase="forward", start_s=12.031, dur_s=0.184, cpu_s=0.181)
    log = open_event_log(tmp_path, 7)
    append_event(log, e)                           # line-buffered: on disk before close
    assert event_path(tmp_path, 7).read_text().count("\n") == 1
    log.close()
    with pytest.raises(RankmapError, match=r"rank-00007.jsonl: exists already"):
        open_event_log(tmp_path, 7)                # a second run with the same id
    lines = event_path(tmp_path, 7).read_text().splitlines()
    assert json.loads(lines[0]) == {
        "rank": 7, "host": "n3", "local_rank": 1, "step": 4, "phase": "forward", "group": None, "peers": [],
        "seq": 0, "start_s": 12.031, "dur_s": 0.184, "cpu_s": 0.181}
    hang = new_hang(rank=7, host="n3", local_rank=1, step=4, phase="tp-all-gather", group="tp", peers=(6, 7), seq=9,
                    since_s=12.5, timeout_s=5.0)
    text = write_hang(tmp_path, hang).read_text()
    assert text == json.dumps(json.loads(text), sort_keys=True) + "\n"
    assert json.loads(text) == {"rank": 7, "host": "n3", "local_rank": 1, "step": 4, "phase": "tp-all-gather",
                                "group": "tp", "peers": [6, 7], "seq": 9, "since_s": 12.5, "timeout_s": 5.0,
                                "state": "collective"}


def test_unreadable_empty_and_renamed_record_files_are_named(tmp_path):
    folder = tmp_path / "events"                              # a flat events/ folder is one run
    log = open_event_log(folder, 0)
    append_event(log, new_event(rank=0, host="h0", local_rank=0, step=1, phase="forward", start_s=1.0, dur_s=0.5))
    log.close()
    event_path(folder, 1).mkdir()                             # cannot be read as a file
    event_path(folder, 2).write_text("")                      # created, nothing written
    run = read_run(tmp_path)
    assert run.ranks == (0,) and len(run.events) == 1
    assert run.problems == (f"{event_path(folder, 1)}: cannot read: Is a directory: rank 1 left out",
                            f"{event_path(folder, 2)}: empty: rank 2 left out")
    write_hang(folder, new_hang(rank=4, host="h0", local_rank=0, step=1, phase="forward", group=None, peers=(),
                                seq=0, since_s=1.0, timeout_s=5.0, state="compute")).rename(hang_path(folder, 5))
    with pytest.raises(RankmapError) as err:
        read_run(tmp_path)
    assert str(err.value) == (f"{hang_path(folder, 5)}:1: holds a record of rank 4 but the file name says rank 5: "
                              "each rank writes only its own file (renamed or copied by hand?)")
    hang_path(folder, 5).unlink()
    (folder / "rank-7.jsonl").write_text("")
    with pytest.raises(RankmapError) as err:
        read_run(tmp_path)
    assert str(err.value) == (f"{folder}/rank-7.jsonl: not the name the recorder writes for rank 7 (rank-00007.jsonl): "
                              "renamed by hand? rename or remove it")


def _one_event_run(folder, rank: int):
    log = open_event_log(folder, rank)
    append_event(log, new_event(rank=rank, host="h0", local_rank=0, step=1, phase="forward", start_s=1.0, dur_s=0.5))
    log.close()
    return event_path(folder, rank)


@pytest.mark.parametrize("copy", ["rank-000001.jsonl", "rank-1.jsonl", "rank-0000000001.jsonl"])
def test_two_files_for_one_rank_are_refused_naming_both(tmp_path, copy):
    """The recorder writes rank-NNNNN.jsonl (5 digits, more past rank 99999); a copy under another
    spelling of the same rank would count its events twice."""
    folder = tmp_path / "events"
    _one_event_run(folder, 0)
    written = _one_event_run(folder, 1)
    (folder / copy).write_bytes(written.read_bytes())
    with pytest.raises(RankmapError) as err:
        read_run(tmp_path)
    first, second = sorted([written, folder / copy])
    assert str(err.value) == (f"{first} and {second}: two files for rank 1 (the recorder writes rank-00001.jsonl "
                              "only): remove the copy")


@pytest.mark.parametrize("name, message", [
    ("rank-00x01.jsonl", "not a record file name (the recorder writes rank-NNNNN.jsonl and hang-rank-NNNNN.json, "
                         "the rank in at least 5 digits): rename or remove it"),
    ("hang-rank-3.json", "not the name the recorder writes for rank 3 (hang-rank-00003.json): renamed by hand? "
                         "rename or remove it"),
])
def test_a_record_file_not_named_as_the_recorder_names_it_is_refused(tmp_path, name, message):
    folder = tmp_path / "events"
    _one_event_run(folder, 0)
    (folder / name).write_text("{}\n")
    with pytest.raises(RankmapError) as err:
        read_run(tmp_path)
    assert str(err.value) == f"{folder / name}: {message}"


def test_record_files_past_rank_99999_have_more_digits(tmp_path):
    folder = tmp_path / "events"
    assert _one_event_run(folder, 123456).name == "rank-123456.jsonl"
    assert read_run(tmp_path).ranks == (123456,)


def test_diagnose_refuses_two_files_for_one_rank_in_one_line(tmp_path, capsys):
    """The command line: exit 3, one line naming both files, nothing written."""
    from helpers import make_rankmap

    from rankmap.cli import main

    rankmap = make_rankmap(tmp_path / "plan", dp=2, hosts=("h1", "h2"))
    folder = tmp_path / "run" / "events"
    _one_event_run(folder, 0)
    (folder / "rank-000000.jsonl").write_bytes(_one_event_run(folder, 1).read_bytes())
    assert main(["diagnose", str(tmp_path / "run"), "--rankmap", str(rankmap)]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        f"rankmap: error: {folder}/rank-00000.jsonl and {folder}/rank-000000.jsonl: two files for rank 0 (the "
        "recorder writes rank-00000.jsonl only): remove the copy\n")
    assert not (tmp_path / "run" / "diagnosis").exists()


@pytest.mark.parametrize("name, message", [
    ("rank1.jsonl", "not the name the recorder writes for rank 1 (rank-00001.jsonl): renamed by hand?"),
    ("Rank-00001.jsonl", "not the name the recorder writes for rank 1 (rank-00001.jsonl): renamed by hand?"),
    ("rank-00001.JSONL", "not the name the recorder writes for rank 1 (rank-00001.jsonl): renamed by hand?"),
    ("rank-00001.json", "not the name the recorder writes for rank 1 (rank-00001.jsonl): renamed by hand?"),
    ("rank-00001.jsonl.bak", "not the name the recorder writes for rank 1 (rank-00001.jsonl): renamed by hand?"),
    ("rank-00001.jsonl~", "not the name the recorder writes for rank 1 (rank-00001.jsonl): renamed by hand?"),
    ("HANG-rank-00001.json", "not the name the recorder writes for rank 1 (hang-rank-00001.json): renamed by hand?"),
])
def test_every_look_alike_of_a_record_file_is_refused_alone_or_beside_the_real_one(tmp_path, name, message):
    """One rule: a name beginning with rank (hang-rank), in any case, is the recorder's exact name or
    an error; these were read as nothing (only a vague 'no records from rank 1' warning)."""
    folder = tmp_path / "events"
    _one_event_run(folder, 0)
    (folder / name).write_text("{}\n")
    with pytest.raises(RankmapError) as err:
        read_run(tmp_path)
    assert str(err.value) == f"{folder / name}: {message} rename or remove it"
    real = _one_event_run(folder, 1) if not name.lower().startswith("hang") else None
    if real is not None:  # beside rank 1's own file: a copy
        with pytest.raises(RankmapError, match="two files for rank 1 \\(the recorder writes rank-00001.jsonl only\\)"):
            read_run(tmp_path)


def test_files_that_are_no_records_are_not_read(tmp_path):
    """Stacks and flight-recorder dumps, notes and atomic writes' temporaries are not records."""
    folder = tmp_path / "events"
    _one_event_run(folder, 0)
    for name in ("stacks-rank-00000.txt", "fr-rank-00000.json", "NOTES.md", ".rank-00001.jsonl.1234.abcdefgh.tmp"):
        (folder / name).write_text("x\n")
    assert read_run(tmp_path).ranks == (0,)

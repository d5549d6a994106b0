"""Hostfiles: DeepSpeed and Open MPI ``slots=``, MPICH ``host:N``, bare names."""

from __future__ import annotations

import pytest

from rankmap.errors import SpecError
from rankmap.topology.hostfile import FLAT_GROUP, parse_hostfile
from rankmap.topology.sources import ImportOptions


def test_all_dialects_in_one_file():
    text = ("# mixed\r\n"
            "n1 slots=8 max_slots=8   # Open MPI\r\n"
            "n2 max-slots=4\r\n"
            "n3:2\r\n"
            "n10\r\n"
            "\r\n")
    r = parse_hostfile(text, "hosts", ImportOptions(gpus=6, rails=4))
    c = r.cluster
    assert [(h.name, h.gpus, h.nics) for h in c.hosts] == [("n1", 8, 4), ("n2", 4, 4), ("n3", 2, 2), ("n10", 6, 4)]
    assert [g.name for g in c.tor_groups] == [FLAT_GROUP] and c.name == "hosts"
    assert len(c.islands()) == 1


@pytest.mark.parametrize("text,message", [
    ("n1 slots=8\nworker-e lots=8\n", "hosts:2: lots=8: unknown attribute 'lots' (expected slots=N or max_slots=N)"),
    ("n1 slots=eight", "hosts:1: slots=eight: expected a positive whole number of slots, got 'eight'"),
    ("n1 slots=0", "hosts:1: slots=0: expected a positive whole number of slots, got '0'"),
    ("n1 8", "hosts:1: 8: expected slots=N after the host name, got '8'"),
    ("n1 slots=2 slots=4", "hosts:1: slots=4: slots is given twice"),
    ("n1 slots=4 max_slots=2", "hosts:1: slots=4 max_slots=2: slots=4 is more than max_slots=2"),
    ("n1\nn1 slots=2", "hosts:2: n1: host n1 is listed twice (first on line 1)"),
    ("node_1 slots=2", "hosts:1: node_1: bad host name 'node_1'"),
    ("n1:x", "hosts:1: n1:x: expected a positive whole number of slots, got 'x'"),
    ("# only a comment\n\n", "hosts:1: no hosts in hostfile"),
])
def test_errors_name_line_and_token(text, message):
    with pytest.raises(SpecError) as err:
        parse_hostfile(text, "hosts")
    assert str(err.value).startswith(message)


# -- field cases turn2: repeated hosts, IPv6 ---------------------------------------------------

TURN2 = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2"


def test_field_case_one_line_per_slot_is_slots():
    # README: read as wk-a slots=4, wk-b slots=4; never silently 1 GPU (or the --gpus default) per host.
    path = TURN2 / "hostfile-repeated-host" / "hostfile.one-line-per-slot"
    r = parse_hostfile(path.read_text(), str(path))
    assert [(h.name, h.gpus) for h in r.cluster.hosts] == [("wk-a", 4), ("wk-b", 4)]
    assert r.notes[0] == ("host wk-a is listed on 4 lines (first on line 1): read as 4 slots, one per line, "
                          "as Open MPI and MPICH do")


def test_repeated_hosts_neighbours():
    # Interleaved (round-robin) listings count the same; a single bare line keeps the --gpus default.
    r = parse_hostfile("a\nb\na\nb\na\nc\n", "hosts", ImportOptions(gpus=8))
    assert [(h.name, h.gpus) for h in r.cluster.hosts] == [("a", 3), ("b", 2), ("c", 8)]
    # A repeated host that also gives slots= is refused, saying how to write it.
    with pytest.raises(SpecError, match=r"hosts:2: a: host a is listed twice \(first on line 1\): "
                                        r"list it once with slots=N"):
        parse_hostfile("a slots=4\na slots=4\n", "hosts")
    with pytest.raises(SpecError, match="hosts:3: a:2: host a is listed twice"):
        parse_hostfile("a\na\na:2\n", "hosts")


def test_field_case_ipv6_hostfile():
    # README: `fd00:10::11 slots=8` gives one host with 8 slots; `fd00:10::11:8` is ambiguous and refused.
    path = TURN2 / "hostfile-ipv6" / "hostfile"
    r = parse_hostfile(path.read_text(), str(path))
    assert [(h.name, h.gpus) for h in r.cluster.hosts] == [("fd00:10::11", 8), ("fd00:10::12", 8)]
    mpich = TURN2 / "hostfile-ipv6" / "hostfile.mpich-style"
    with pytest.raises(SpecError) as err:
        parse_hostfile(mpich.read_text(), str(mpich))
    assert str(err.value) == (f"{mpich}:1: fd00:10::11:8: 'fd00:10::11:8' is ambiguous: the IPv6 address "
                              "fd00:10::11:8, or MPICH's host:N form for fd00:10::11 with 8 slots; write "
                              "'fd00:10::11 slots=8' (or 'fd00:10::11:8 slots=N')")


@pytest.mark.parametrize("line,expected", [
    ("fd00::1 slots=4", ("fd00::1", 4)),            # address with slots=
    ("fd00:10::11:8 slots=2", ("fd00:10::11:8", 2)),  # slots= given: the word is the whole address
    ("::1 max_slots=2", ("::1", 2)),
    ("1:2:3:4:5:6:7:8:4", ("1:2:3:4:5:6:7:8", 4)),   # nine groups: only the MPICH reading is an address
    ("fd00::12", ("fd00::12", 8)),                   # bare address: the --gpus default
])
def test_ipv6_neighbours(line, expected):
    r = parse_hostfile(line, "hosts", ImportOptions(gpus=8))
    assert [(h.name, h.gpus) for h in r.cluster.hosts] == [expected]


def test_a_name_unlike_its_neighbours_is_a_warning_naming_it_and_its_line():
    r = parse_hostfile("gpu-001 slots=8\ngpu-002 slots=8\ngpu-0O3 slots=8\ngpu-004 slots=8\n", "hosts")
    assert [str(w) for w in r.warnings] == [
        "hosts:3: gpu-0O3: host gpu-0O3 does not look like its 3 neighbours in hostfile group flat "
        "(pattern 'gpu-#O#', 3 of them 'gpu-#'): a typo?"]
    assert len(r.cluster.hosts) == 4  # kept: only a warning
    with pytest.raises(SpecError, match="an error with --strict"):
        parse_hostfile("gpu-001\ngpu-002\ngpu-0O3\n", "hosts", ImportOptions(strict=True))
    # Neighbours: names that differ only in numbers, two hosts only, or no shared pattern at all: no warning.
    for text in ("n9\nn10\nn11\n", "a1\nb1\n", "alpha\nbeta\ngamma\n", "mpi-worker.1.fabric.test\n"
                 "mpi-worker.2.fabric.test\nmpi-worker.3.fabric.test\n"):
        assert parse_hostfile(text, "hosts").warnings == ()


def test_odd_name_in_a_slurm_leaf_names_the_leaf_line():
    from rankmap.topology.slurm import parse_slurm_tree

    r = parse_slurm_tree("SwitchName=s Switches=l[1-2]\nSwitchName=l1 Nodes=gpu-[001-004],gpu-OO5\n"
                         "SwitchName=l2 Nodes=n[1-3]", "t.conf")
    assert [str(w) for w in r.warnings] == [
        "t.conf:2: gpu-OO5: host gpu-OO5 does not look like its 4 neighbours in switch l1 (pattern 'gpu-OO#', "
        "4 of them 'gpu-#'): a typo?"]

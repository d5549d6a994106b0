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

"""Nothing lost, nobody let in: hostile names, killed runs, concurrent runs, edited maps.

Every check runs the real command in a subprocess, as a user or a script would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rankmap.examples import example_inputs

REPO = Path(__file__).resolve().parents[2]
HOSTILE = ["a;rm -rf ~", "$(id)", "x`id`", "n1 n2", "host|cat"]


def rankmap(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_hostnames_are_refused_before_anything_is_written(tmp_path, name):
    out = tmp_path / "out"
    cases = {
        "cluster.yaml": f"tor_groups:\n  - name: a\n    hosts: ['n1', {json.dumps(name)}]\n",
        "topology.conf": f"SwitchName=s1 Nodes=n1,{name}\n",
        "hostfile": f"n1 slots=8\n{name} slots=8\n",
    }
    cases["nodes.json"] = json.dumps({"kind": "List", "items": [{"metadata": {"name": name, "labels": {
        "topology.k8s.aws/network-node-layer-1": "a"}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}}]})
    cases["constraints.yaml"] = f"exclude: {json.dumps(name)}\n"
    for file, text in cases.items():
        (tmp_path / file).write_text(text)
    runs = [
        rankmap("plan", "--cluster", tmp_path / "cluster.yaml", "--out", out),
        rankmap("topo", "import", "--from", "slurm", tmp_path / "topology.conf", "--out", out / "c.yaml"),
        rankmap("topo", "import", "--from", "hostfile", tmp_path / "hostfile", "--out", out / "c.yaml"),
        rankmap("plan", "--example", "racks", "--exclude", name, "--out", out),
        rankmap("topo", "import", "--from", "k8s-labels", tmp_path / "nodes.json", "--out", out / "c.yaml"),
        rankmap("plan", "--example", "racks", "--constraints", tmp_path / "constraints.yaml", "--out", out),
    ]
    for run in runs:
        assert run.returncode in (2, 3), run.stderr
        assert "Traceback" not in run.stderr and run.stderr.count("\n") == 1, run.stderr
    assert not out.exists()


@pytest.fixture
def planned(tmp_path):
    out = tmp_path / "plan"
    run = rankmap("plan", "--example", "racks", "--tp", "8", "--pp", "2", "--dp", "24", "--model", "gpt3-6.7b",
                  "--micro-batches", "4", "--out", out)
    assert run.returncode == 0, run.stderr
    return out


@pytest.mark.parametrize("edit", ["two-gpus", "other-cluster", "injected-host"])
def test_edited_rank_map_is_rejected_by_every_reader(tmp_path, planned, edit):
    path = planned / "rankmap.json"
    doc = json.loads(path.read_text())
    if edit == "two-gpus":        # rank 5 claims the GPU of rank 4
        doc["ranks"][5]["local_rank"] = 4
    elif edit == "other-cluster":
        doc["cluster"]["sha256"] = "0" * 64
    else:
        doc["ranks"][0]["host"] = "$(id)"
    path.write_text(json.dumps(doc))
    cluster = "examples/racks/cluster.yaml"
    runs = [
        rankmap("verify", path, "--cluster", cluster),
        rankmap("replan", "--rankmap", path, "--cluster", cluster, "--failed", "gpu-r1-n01", "--out", tmp_path / "r"),
        rankmap("plan", "--example", "racks", "--previous", path, "--out", tmp_path / "p"),
        rankmap("plan", "--example", "racks", "--reserve", path, "--out", tmp_path / "p"),
        rankmap("simulate", "--cluster", cluster, "--job", "examples/racks/job.yaml", "--rankmap", path,
                "--seeds", "1", "--out", tmp_path / "s"),
    ]
    for run in runs:
        assert run.returncode == 3, run.stderr
        assert str(path) in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "p").exists() and not (tmp_path / "s").exists()


def consistent_pair(folder: Path) -> bool:
    """Both files parse and the hostfile is the rank map's host order."""
    doc = json.loads((folder / "rankmap.json").read_text())
    hosts = [r["host"] for r in doc["ranks"][::doc["nproc_per_node"]]]
    return (folder / "hostfile").read_text().split() == hosts


def test_sigkill_mid_run_leaves_old_outputs_or_new_never_truncated(tmp_path):
    out = tmp_path / "out"
    assert rankmap("plan", "--example", "racks", "--out", out).returncode == 0
    old = {p: (out / p).read_bytes() for p in ("rankmap.json", "hostfile")}
    outcomes = set()
    for delay in (0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.4, 3.0):
        proc = subprocess.Popen([sys.executable, "-m", "rankmap", "plan", "--out", str(out)], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        now = {p: (out / p).read_bytes() for p in ("rankmap.json", "hostfile")}
        outcomes.add("old" if now == old else "new")
        assert consistent_pair(out)
        assert not [p for p in listing(out) if p.endswith(".tmp")]
        old = now
    assert "old" in outcomes  # at least one kill landed before the commit


def test_concurrent_runs_into_one_folder_do_not_interleave(tmp_path):
    out = tmp_path / "out"
    procs = [subprocess.Popen([sys.executable, "-m", "rankmap", "plan", "--example", ex, "--out", str(out)],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for ex in ("racks", "megascale-12k", "racks")]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    assert consistent_pair(out)
    assert listing(out) == ["hostfile", "plan.png", "rankmap.json"]


# -- Round two (issue 17): every kind of hostile or broken input exits 3 (2 for flags) with one
#    line naming the file/line/key, writes nothing and leaves no temporary file. ---------------

CLUSTER = "tor_groups:\n  - name: tg\n    hosts: [n1, n2]\n"
JOB = "parallel: {tp: 8, pp: 1, dp: 2}\nmodel: {preset: gpt3-1.3b}\nbatch: {num_micro_batches: 4}\n"


def refused(run, out: Path, code: int = 3, where: str = "") -> None:
    """The run failed with ``code``, one line on stderr holding ``where``, and wrote nothing."""
    assert run.returncode == code, (run.returncode, run.stderr)
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert where in run.stderr, (where, run.stderr)
    assert not out.exists() or not [p for p in listing(out) if not p.startswith(".keep")], listing(out)


def plan_with(tmp_path, cluster: str = CLUSTER, job: str = JOB, *extra):
    (tmp_path / "c.yaml").write_text(cluster)
    (tmp_path / "j.yaml").write_text(job)
    return rankmap("plan", "--cluster", tmp_path / "c.yaml", "--job", tmp_path / "j.yaml", "--time-limit", "2",
                   "--out", tmp_path / "out", *extra)


@pytest.mark.parametrize("cluster, where", ids=["zone-id", "zone-id-subst", "newline", "group-newline",
                                               "cluster-markup", "switch-subst"], argvalues=[
    # IPv6 zone ids carry any character; a trailing newline passed a `$` anchor
    ("tor_groups:\n  - name: tg\n    hosts: [n1, 'fe80::1%eth0;id']\n", "c.yaml:3: tor_groups[0].hosts[1]"),
    ("tor_groups:\n  - name: tg\n    hosts: [n1, \"fe80::1%$(touch x)\"]\n", "c.yaml:3: tor_groups[0].hosts[1]"),
    ('tor_groups:\n  - name: tg\n    hosts: [n1, "n2\\nn3"]\n', "c.yaml:3: tor_groups[0].hosts[1]"),
    # group, switch and cluster names have a grammar too
    ('tor_groups:\n  - name: "x\\nreserve: [/dev/zero]"\n    hosts: [n1]\n', "c.yaml:2: tor_groups[0].name"),
    ("name: '[bold]c;id'\ntor_groups:\n  - name: tg\n    hosts: [n1]\n", "c.yaml:1: name"),
    ("tor_groups:\n  - {name: a, hosts: n1}\nswitches:\n  - {name: '$(id)', children: [a]}\n", "c.yaml:4: switches[0].name"),
])
def test_names_outside_their_grammar_are_refused_with_file_line_and_key(tmp_path, cluster, where):
    refused(plan_with(tmp_path, cluster), tmp_path / "out", where=where)


def test_names_in_imported_files_are_refused(tmp_path):
    cases = {"topology.conf": ("slurm", "SwitchName=s1 Nodes=n1,fe80::1%eth0\n", "topology.conf:1"),
             "block.conf": ("slurm-block", "BlockName=$(id) Nodes=n1\n", "block.conf:1"),
             "hosts": ("hostfile", "n1 slots=8\n0xa.0.0.1 slots=8\n", "hosts:2"),
             "nodes.json": ("k8s-labels", json.dumps({"kind": "List", "items": [{"metadata": {
                 "name": "n1", "labels": {"topology.k8s.aws/network-node-layer-1": "a;id"}},
                 "status": {"capacity": {"nvidia.com/gpu": "8"}}}]}), "nodes.json")}
    for file, (fmt, text, where) in cases.items():
        (tmp_path / file).write_text(text)
        run = rankmap("topo", "import", "--from", fmt, tmp_path / file, "--out", tmp_path / "out" / "c.yaml")
        refused(run, tmp_path / "out", where=where)


def test_constraints_keys_read_as_booleans_are_refused(tmp_path):
    for text, line in (("quotas:\n  on: 0\n", 2), ("quotas: {tg: 1, yes: 0}\n", 1), ("exclude: n1\nno: 1\n", 2)):
        (tmp_path / "k.yaml").write_text(text)
        run = plan_with(tmp_path, CLUSTER, JOB, "--constraints", tmp_path / "k.yaml")
        refused(run, tmp_path / "out", where=f"k.yaml:{line}: ")
        assert "boolean" in run.stderr


def test_rich_markup_in_names_is_printed_as_text(tmp_path):
    cluster = ("tor_groups:\n  - {name: tg, hosts: 'n[1-2]'}\ntiers:\n  - {name: '[/]x[bold]', switches: 32, "
               "down_ports: 8}\n")
    run = plan_with(tmp_path, cluster)
    assert run.returncode == 0, run.stderr
    assert "[/]x[bold]" in run.stdout


@pytest.mark.parametrize("file, text, where", ids=["capacity-5000-digits", "tp-5000-digits", "model-overflow",
                                                  "batch-overflow", "nan-step"], argvalues=[
    ("c.yaml", "tor_groups:\n  - name: tg\n    capacity: " + "9" * 5000 + "\n    hosts: [n1]\n", "c.yaml:3"),
    ("j.yaml", "parallel: {tp: " + "9" * 5000 + "}\n", "j.yaml:1"),
    ("j.yaml", "parallel: {tp: 8, dp: 2}\nmodel: {layers: 9223372036854775807, hidden: 9223372036854775807, "
               "heads: 8, seq_len: 2048}\nbatch: {num_micro_batches: 4}\n", "j.yaml:2: model"),
    ("j.yaml", "parallel: {tp: 8, dp: 2}\nmodel: {preset: gpt3-1.3b}\nbatch: {micro_batch_size: 9223372036854775807,"
               " num_micro_batches: 4}\n", "j.yaml:3: batch.micro_batch_size"),
    ("j.yaml", "parallel: {tp: 8, dp: 2}\nmodel: {preset: gpt3-1.3b}\nbatch: {num_micro_batches: 4}\n"
               "hardware: {optimizer_step_s: .nan}\n", "j.yaml:4: hardware.optimizer_step_s"),
])
def test_huge_and_non_finite_numbers_exit_3(tmp_path, file, text, where):
    run = plan_with(tmp_path, text if file == "c.yaml" else CLUSTER, text if file == "j.yaml" else JOB)
    refused(run, tmp_path / "out", where=where)


def test_huge_numbers_and_deep_nesting_in_imported_files_exit_3(tmp_path):
    deep = '{"kind": "List", "items": ' + "[" * 100_000 + "]" * 100_000 + "}"
    cases = [("hostfile", "hosts", "n1 slots=" + "9" * 5000 + "\n", "hosts:1"),
             ("slurm", "t.conf", "SwitchName=s1 Nodes=n1 LinkSpeed=" + "9" * 5000 + "\n", "t.conf:1"),
             ("slurm-block", "b.conf", "BlockName=b1 Nodes=n[1-2]\nBlockSizes=" + "9" * 5000 + "\n", "b.conf:2"),
             ("k8s-labels", "nodes.json", deep, "nodes.json: invalid JSON: nested deeper than")]
    for fmt, file, text, where in cases:
        (tmp_path / file).write_text(text)
        run = rankmap("topo", "import", "--from", fmt, tmp_path / file, "--out", tmp_path / "out" / "c.yaml")
        refused(run, tmp_path / "out", where=where)


@pytest.mark.parametrize("args", [
    ("simulate", "--seeds", "100000000"), ("simulate", "--qps", "100000000000"),
    ("simulate", "--seed", "99999999999999999999"), ("plan", "--seed", "-1"), ("plan", "--time-limit", "nan"),
    ("plan", "--time-limit", "inf"), ("plan", "--objective", "bytes=-1"), ("plan", "--objective", "bytes=nan"),
    ("plan", "--tier-weights", "spine=inf"), ("plan", "--tp", "9" * 5000), ("plan", "--tp", str(2**63)),
])
def test_out_of_range_flags_exit_2(tmp_path, args):
    run = rankmap(*args, "--example", "racks", "--out", tmp_path / "out")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr and args[1] in run.stderr.splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_special_and_oversized_files_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # no writer: opening it for reading would block
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(200 * 2**20)  # 200 MB, sparse
    cases = [("/dev/zero", "not a regular file (a character device)"),
             ("/dev/urandom", "not a regular file (a character device)"),
             (fifo, "not a regular file (a FIFO)"), (tmp_path, "not a regular file (a folder)"),
             (big, f"file is {200 * 2**20} bytes, over the limit of")]
    for path, why in cases:
        run = rankmap("plan", "--cluster", path, "--job", example_inputs("racks", None, None)[1], "--out",
                      tmp_path / "out", timeout=30)
        refused(run, tmp_path / "out", where=f"{path}: {why}")
    for path, why in cases[:3]:  # named by a constraints file's reserve:
        (tmp_path / "k.yaml").write_text(f"reserve: [{json.dumps(str(path))}]\n")
        run = rankmap("plan", "--example", "racks", "--constraints", tmp_path / "k.yaml", "--out", tmp_path / "out",
                      timeout=30)
        refused(run, tmp_path / "out", where=why)


@pytest.mark.parametrize("cluster, why", [
    ("tor_groups:\n" + "".join(f"  - {{name: g{i}, hosts: 'n{i}x[0000000-0099999]'}}\n" for i in range(30)),
     "c.yaml:2: tor_groups[0].hosts: more than 65536 hosts"),   # 2.4 KB expanding to 3 million hosts
    ("tor_groups:\n  - name: tg\n    hosts: [n1, " + "a" * 100_000 + "]\n", "longer than 253 characters"),
    ("a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
                                               for p, c in zip("abcdefgh", "bcdefghi")), "once aliases are expanded"),
    ("a: " + "[" * 100_000 + "]" * 100_000 + "\n", "c.yaml:1: invalid YAML: brackets nested deeper than 100"),
], ids=["3M-hosts", "100KB-name", "alias-bomb", "deep-flow"])
def test_resource_limits_refuse_bombs(tmp_path, cluster, why):  # (ids: the reasons)
    refused(plan_with(tmp_path, cluster), tmp_path / "out", where=why)


def test_volcano_patterns_that_backtrack_are_refused(tmp_path):
    for pattern in ("(a+)+$", "(a|aa)+b", "(.*a){20}", "(x)\\1", ".*.*.*x"):
        (tmp_path / "hn.yaml").write_text(
            "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: s0}\nspec:\n  tier: 1\n"
            f"  members:\n  - type: Node\n    selector:\n      regexMatch: {{pattern: {json.dumps(pattern)}}}\n")
        run = rankmap("topo", "import", "--from", "volcano", tmp_path / "hn.yaml", "--hosts", "a" * 60 + "b",
                      "--out", tmp_path / "out" / "c.yaml", timeout=30)
        refused(run, tmp_path / "out", where="hn.yaml:9: s0.members[0].selector.regexMatch: refused regular expr")


@pytest.mark.parametrize("hosts, where", [
    ("n1 slots=8\nN1 slots=8\n", "are one host (host names ignore case)"),
    ("10.0.0.1 slots=8\n010.0.0.1 slots=8\n", "hosts:2"),
    ("10.0.0.1 slots=8\n167772161 slots=8\n", "hosts:2"),
    ("gpu-a.example slots=8\nGPU-A.example slots=8\n", "are one host (host names ignore case)"),
])
def test_one_host_in_two_spellings_is_refused(tmp_path, hosts, where):
    (tmp_path / "hosts").write_text(hosts)
    run = rankmap("topo", "import", "--from", "hostfile", tmp_path / "hosts", "--out", tmp_path / "out" / "c.yaml")
    refused(run, tmp_path / "out", where=where)


def test_rank_map_with_duplicate_keys_or_case_twins_is_refused(tmp_path, planned):
    path = planned / "rankmap.json"
    text = path.read_text()
    doc = json.loads(text)
    twin = dict(doc, ranks=[dict(r, host=doc["ranks"][0]["host"].upper()) if r["host"] == doc["ranks"][-1]["host"]
                            else r for r in doc["ranks"]])
    for edited, why in ((text.replace('"world_size": ', '"world_size": 1, "world_size": ', 1), "duplicate key"),
                        (json.dumps(twin), "disagree with earlier entries")):
        path.write_text(edited)
        run = rankmap("verify", path, "--cluster", "examples/racks/cluster.yaml")
        assert run.returncode == 3 and why in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_rankmap_json_is_committed_after_the_hostfile(tmp_path):
    run = rankmap("plan", "--example", "racks", "--out", tmp_path / "out")
    assert run.returncode == 0, run.stderr
    stats = {p: (tmp_path / "out" / p).stat().st_ctime_ns for p in ("hostfile", "rankmap.json")}
    assert stats["hostfile"] <= stats["rankmap.json"]  # a rename sets the ctime


WRITER = """
import os, sys, time
from rankmap import fileio
real = os.fsync
def slow(fd):  # hold the run inside the staging window, and say so
    real(fd); print("staged", flush=True); time.sleep(30)
os.fsync = slow
try:
    fileio.atomic_write_files(sys.argv[1], {"hostfile": "new\\n", "rankmap.json": "{}\\n"})
except KeyboardInterrupt:
    sys.exit(130)  # as the command line does
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM),
                                       (signal.SIGHUP, 128 + signal.SIGHUP)])
def test_signal_while_writing_removes_temporaries_and_keeps_old_outputs(tmp_path, sig, code):
    out = tmp_path / "out"
    out.mkdir()
    (out / "hostfile").write_text("old\n")
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(out)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "staged\n"
    assert [p for p in listing(out) if p.endswith(".tmp")]  # the temporary is there now
    proc.send_signal(sig)
    assert proc.wait(timeout=20) == code, proc.stderr.read()
    assert listing(out) == ["hostfile"] and (out / "hostfile").read_text() == "old\n"


def test_signals_during_the_renames_wait_for_the_last_one():
    from rankmap.fileio.atomic import _CleanupOnSignal
    with pytest.raises(SystemExit) as exc:
        with _CleanupOnSignal() as guard:
            with guard.held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                done = True  # reached: the signal waited
    assert done and exc.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_stale_temporaries_of_dead_runs_are_swept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names no process now
    stale = [f".hostfile.{dead.pid}.abcd_123.tmp", ".rankmap.json.ab12cd34.tmp"]
    live = f".hostfile.{os.getpid()}.efgh_456.tmp"
    for name in stale + [live, ".unrelated.ab12cd34.tmp"]:
        (out / name).write_text("x")
    old = time.time() - 3600
    os.utime(out / stale[1], (old, old))
    run = rankmap("plan", "--example", "racks", "--out", out)
    assert run.returncode == 0, run.stderr
    assert listing(out) == sorted([live, ".unrelated.ab12cd34.tmp", "hostfile", "plan.png", "rankmap.json"])


def test_lock_wait_says_what_it_waits_for_and_times_out(tmp_path):
    import fcntl
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        run = subprocess.run([sys.executable, "-m", "rankmap", "plan", "--example", "racks", "--out", str(out)],
                             cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "RANKMAP_LOCK_TIMEOUT_S": "1"})
    finally:
        os.close(fd)
    lines = run.stderr.splitlines()
    assert run.returncode == 3, run.stderr
    assert lines[0].startswith(f"rankmap: waiting for the lock on output folder {out} (held by process {os.getpid()}")
    assert lines[1] == (f"rankmap: error: {out}: timed out after 1 s waiting for the lock on the output folder "
                        f"(held by process {os.getpid()})")
    assert listing(out) == []


def test_ctrl_c_works_after_the_solver_ran():
    from ortools.sat.python import cp_model

    from rankmap.placement.cpsat_model import solver_params
    model = cp_model.CpModel()
    x = model.NewIntVar(0, 10, "x")
    model.Maximize(x)
    assert solver_params(1.0, 0, 1).Solve(model) == cp_model.OPTIMAL
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


@pytest.mark.parametrize("kwargs, key", [({"objectives": (("bytes", -1.0),)}, "--objective"),
                                         ({"objectives": (("bytes", float("nan")),)}, "--objective"),
                                         ({"time_limit_s": float("inf")}, "--time-limit"),
                                         ({"seed": 2**31}, "--seed")])
def test_library_plan_range_checks_numbers_too(kwargs, key):
    from rankmap import api
    from rankmap.errors import SpecError
    cluster = api.load_cluster(REPO / "examples" / "racks" / "cluster.yaml")
    job = api.load_job(REPO / "examples" / "racks" / "job.yaml")
    with pytest.raises(SpecError, match=f"^{key}: "):
        api.plan(cluster, job, **kwargs)


def test_a_hostfile_of_too_many_hosts_is_refused_at_the_first_host_over_the_limit(tmp_path):
    path = tmp_path / "hosts.txt"
    path.write_text("".join(f"node{i} slots=8\n" for i in range(70_000)))
    run = subprocess.run([sys.executable, "-m", "rankmap", "topo", "import", "--from", "hostfile", str(path),
                          "--out", str(tmp_path / "c.yaml")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 3 and f"{path}:65537: node65536: more than 65536 hosts" in run.stderr
    assert not (tmp_path / "c.yaml").exists()


def test_ctrl_c_while_modules_load_is_one_line_and_exit_130(tmp_path):
    """SIGINT right after the rankmap package loaded, while the command's modules still load
    (-X importtime reports each import as it completes): no traceback, no files."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "rankmap", "plan", "--example", "racks",
                             "--out", str(tmp_path / "sig")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:
        if line.rstrip().endswith("| rankmap"):  # rankmap/__init__.py has run
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130
    assert "Traceback" not in rest and rest.splitlines()[-1] == "rankmap: interrupted"
    assert not (tmp_path / "sig").exists()


@pytest.mark.parametrize("kind", ["fifo", "symlink", "folder"])
def test_an_output_path_that_is_not_a_regular_file_is_never_replaced(tmp_path, kind):
    """A commit renames over its target: over a FIFO or a device (``--out /dev/null``) that would put
    a plain file in its place, over a symbolic link it would replace the link."""
    target = tmp_path / "topology.conf"
    real = tmp_path / "real.conf"
    real.write_text("# the user's file\n")
    {"fifo": lambda: os.mkfifo(target), "symlink": lambda: target.symlink_to(real),
     "folder": lambda: target.mkdir()}[kind]()
    done = rankmap("topo", "export", "--to", "slurm", "examples/racks/cluster.yaml", "--out", str(target))
    what = {"fifo": "a FIFO", "symlink": "a symbolic link", "folder": "a folder"}[kind]
    assert done.returncode == 3
    assert done.stderr == (f"rankmap: error: {target}: cannot write output: {what} is in the way (outputs replace "
                           "regular files only)\n")
    assert {"fifo": target.is_fifo, "symlink": target.is_symlink, "folder": target.is_dir}[kind]()
    assert real.read_text() == "# the user's file\n"

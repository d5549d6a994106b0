"""Launch files from a rank map: torchrun lines, the Slurm script, rankfile and hostfile (no torch).

The Slurm script is checked as a file here (``bash -n``, its srun line, its host file);
tests/launch/test_slurm_real.py submits it to a real slurmctld/slurmd and runs it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from helpers import make_rankmap

from rankmap.errors import LaunchError, SpecError
from rankmap.job.rank_map import read_rankmap
from rankmap.launch.common import LaunchOptions, check_host
from rankmap.launch.deepspeed import read_deepspeed_hostfile
from rankmap.launch.formats import check_against_map, launch_files
from rankmap.launch.mpi import read_rankfile
from rankmap.launch.slurm import read_slurm_hostfile
from rankmap.launch.torchrun import read_torchrun_commands

# Hosts whose string order differs from their numeric order and from the plan's order.
HOSTS = ("node8", "node66", "node7", "node70")


@pytest.fixture
def rm(tmp_path):
    return read_rankmap(make_rankmap(tmp_path / "plan", tp=2, pp=2, dp=2, hosts=HOSTS, nprocs=[2, 2, 2, 2]))


def opts(**kw):
    return LaunchOptions(**{"rankmap_path": "/shared/plan/rankmap.json", "resolve": False, **kw})


def test_torchrun_lines_pin_the_plans_node_order_with_the_static_rendezvous(rm, tmp_path):
    files = launch_files(rm, "torchrun", opts(config_path="/shared/engine.yaml"), tmp_path)
    lines = read_torchrun_commands(files["torchrun-commands.txt"])
    assert [line.node_rank for line in lines] == [0, 1, 2, 3]
    for n, line in enumerate(lines):
        assert line.options["rdzv-backend"] == "static" and line.options["master-addr"] == "node8"
        assert line.options["nnodes"] == "4" and line.options["nproc-per-node"] == "2"
        assert line.argv[-6:] == ("-m", "rankmap.engine.train", "--rankmap", "/shared/plan/rankmap.json", "--config",
                                  "/shared/engine.yaml")
    assert "# node rank 2: node7\n" in files["torchrun-commands.txt"]
    assert "  2) host=node7 ;;" in files["torchrun.sh"]


def test_hosts_of_different_sizes_get_their_own_process_counts(tmp_path):
    rm = read_rankmap(make_rankmap(tmp_path / "p", tp=2, dp=3, hosts=("big", "small"), nprocs=[4, 2]))
    lines = read_torchrun_commands(launch_files(rm, "torchrun", opts(), tmp_path)["torchrun-commands.txt"])
    assert [line.options["nproc-per-node"] for line in lines] == ["4", "2"]
    assert read_deepspeed_hostfile(launch_files(rm, "deepspeed", opts(), tmp_path)["deepspeed-hostfile"]) == [("big", 4),
                                                                                                 ("small", 2)]
    ranks = read_rankfile(launch_files(rm, "mpi", opts(), tmp_path)["rankfile"])
    assert [(e.host, e.slot) for e in ranks] == [("big", 0), ("big", 1), ("big", 2), ("big", 3), ("small", 0),
                                                 ("small", 1)]


def test_every_value_is_quoted_and_every_script_parses(rm, tmp_path):
    odd = "/tmp/run dir/$HOME;`x`"
    for fmt in ("torchrun", "slurm", "mpi", "deepspeed"):
        folder = tmp_path / fmt
        folder.mkdir()
        files = launch_files(rm, fmt, opts(out_dir=odd, config_path="/a b/engine.yaml"), folder)
        for name, text in files.items():
            if name.endswith((".sh", ".sbatch")):
                (folder / name).write_text(text)
                check = subprocess.run(["bash", "-n", str(folder / name)], capture_output=True, text=True)
                assert check.returncode == 0, (name, check.stderr)
                assert odd not in text.replace(shlex.quote(odd), "")  # only ever quoted
    line = read_torchrun_commands(launch_files(rm, "torchrun", opts(out_dir=odd), tmp_path)["torchrun-commands.txt"])[0]
    assert line.argv[line.argv.index("--out") + 1] == odd


def test_slurm_script_lists_the_hosts_of_the_plan_in_node_rank_order(rm, tmp_path):
    """The file side of the Slurm launch; tests/launch/test_slurm_real.py submits it to a real Slurm."""
    slurm_dir = tmp_path / "slurm"
    slurm_dir.mkdir()
    for name, text in launch_files(rm, "slurm", opts(config_path="/shared/engine.yaml"), slurm_dir).items():
        (slurm_dir / name).write_text(text)
    script = (slurm_dir / "slurm.sbatch").read_text()
    assert subprocess.run(["bash", "-n", str(slurm_dir / "slurm.sbatch")]).returncode == 0
    assert "#SBATCH --nodes=4\n" in script and "#SBATCH --ntasks-per-node=1\n" in script
    assert "--distribution=arbitrary" in script and 'SLURM_HOSTFILE="$launch_dir/slurm-hostfile"' in script
    srun = next(line for line in script.splitlines() if line.lstrip().startswith("srun "))
    assert "--nodes" not in srun and " -N" not in srun and "--ntasks=4" in srun
    # One line per task (a torchrun agent per host), in the plan's node-rank order -- not sorted.
    assert read_slurm_hostfile((slurm_dir / "slurm-hostfile").read_text()) == list(HOSTS)


def test_sbatch_nodelist_brackets_only_trailing_digits_for_slurm_before_23_11(tmp_path):
    rm = read_rankmap(make_rankmap(tmp_path / "plan", dp=4, hosts=("n2-ib", "n1-ib", "gpu07", "gpu08")))
    script = launch_files(rm, "slurm", opts(), tmp_path)["slurm.sbatch"]
    assert "#SBATCH --nodelist=gpu[07-08],n1-ib,n2-ib\n" in script


def test_torchrun_script_refuses_a_task_on_the_wrong_host(rm, tmp_path):
    (tmp_path / "torchrun.sh").write_text(launch_files(rm, "torchrun", opts(), tmp_path)["torchrun.sh"])
    env = {**os.environ, "SLURM_PROCID": "1", "SLURMD_NODENAME": "node7"}
    run = subprocess.run(["bash", str(tmp_path / "torchrun.sh")], env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "node rank 1 belongs on node66, but this task runs on node7" in run.stderr
    run = subprocess.run(["bash", str(tmp_path / "torchrun.sh"), "9"], capture_output=True, text=True)
    assert run.returncode == 2 and "no node rank for this host" in run.stderr


def test_rankfile_and_hostfile_round_trip_through_the_readers(rm, tmp_path):
    mpi = launch_files(rm, "mpi", opts(), tmp_path)
    entries = read_rankfile(mpi["rankfile"])
    assert [(e.rank, e.host, e.slot) for e in entries[:3]] == [(0, "node8", 0), (1, "node8", 1), (2, "node66", 0)]
    check_against_map(rm, rankfile=entries)
    assert "--rankfile" in mpi["mpirun.sh"] and "MASTER_ADDR=node8" in mpi["mpirun.sh"]
    ds = launch_files(rm, "deepspeed", opts(), tmp_path)
    hosts = read_deepspeed_hostfile(ds["deepspeed-hostfile"])
    assert hosts == [(h, 2) for h in HOSTS]
    check_against_map(rm, hostfile=hosts)
    check_against_map(rm, slurm_hosts=list(HOSTS))
    with pytest.raises(LaunchError, match="the map's node order is"):
        check_against_map(rm, slurm_hosts=sorted(HOSTS))  # what a string sort would do
    swapped = entries[:2] + [entries[3], entries[2]] + entries[4:]
    swapped = [type(e)(i, e.host, e.slot) for i, e in enumerate(swapped)]
    with pytest.raises(LaunchError, match="rankfile puts rank 2 on node66 slot 1"):
        check_against_map(rm, rankfile=swapped)


@pytest.mark.parametrize("reader, text, message", [
    (read_rankfile, "rank 0=a slot=0\nrank 0=b slot=0\n", "rankfile:2: rank 0 is listed twice"),
    (read_rankfile, "rank 0=a slot=0\nrank 2=b slot=0\n", "ranks must be 0..W-1 each once; missing [1]"),
    (read_rankfile, "rank 0=a;b slot=0\n", "rankfile:1: host 'a;b' is not a valid hostname"),
    (read_deepspeed_hostfile, "a slots=2\na slots=2\n", "hostfile:2: host a is listed twice"),
    (read_deepspeed_hostfile, "a lots=2\n", "hostfile:1: expected 'HOST slots=N'"),
    (read_slurm_hostfile, "# nothing\n", "slurm-hostfile: no hosts"),
    (read_torchrun_commands, "torchrun --nnodes=2\n", "torchrun-commands.txt:1: a torchrun line needs --node-rank=N"),
])
def test_readers_refuse_bad_lines_naming_file_and_line(reader, text, message):
    with pytest.raises(SpecError) as err:
        reader(text)
    assert message in str(err.value)


def test_bad_unresolvable_and_loopback_hosts_are_refused_by_name(tmp_path):
    assert check_host("fe80::1") is None and check_host("10.0.0.30") is None
    with pytest.raises(LaunchError, match="master address 'h1;reboot' is not a valid hostname"):
        check_host("h1;reboot", "master address")
    rm = read_rankmap(make_rankmap(tmp_path / "p", dp=2, hosts=("gpu-a.invalid", "gpu-b.invalid"), nprocs=[1, 1]))
    with pytest.raises(LaunchError) as err:
        launch_files(rm, "torchrun", opts(resolve=True), tmp_path)
    assert "host 'gpu-a.invalid' (node rank 0) does not resolve" in str(err.value)
    assert "never falls back to localhost" in str(err.value)
    for addr in ("127.0.0.1", "localhost", "::1"):
        with pytest.raises(LaunchError, match="is a loopback address"):
            launch_files(rm, "slurm", opts(master_addr=addr), tmp_path)
    with pytest.raises(LaunchError, match="--format must be one of"):
        launch_files(rm, "pdsh", opts(), tmp_path)


# -- field case turn2/srun-arbitrary-with-nodes; hostlists as every Slurm reads them -----------

TURN2 = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2"


def test_field_case_srun_never_gets_nodes_with_arbitrary_distribution(tmp_path):
    # README: since Slurm 23.11 srun refuses --nodes with --distribution=arbitrary / SLURM_HOSTFILE:
    # the generated sbatch script's srun line has no --nodes (the real-Slurm run is in test_slurm_real.py).
    from rankmap.job.spec_file import load_job
    from rankmap.placement.plan import plan
    from rankmap.topology.spec import load_cluster

    case = TURN2 / "srun-arbitrary-with-nodes"
    result = plan(load_cluster(case / "cluster.yaml"), load_job(case / "job.yaml"))
    rm = result.rankmap
    files = launch_files(rm, "slurm", opts(), tmp_path)
    script = files["slurm.sbatch"]
    srun = [line for line in script.splitlines() if line.startswith("srun ")]
    assert len(srun) == 1 and "--distribution=arbitrary" in srun[0]
    assert "--nodes" not in srun[0] and not any(w.startswith("-N") for w in shlex.split(srun[0]))
    assert "unset SLURM_NNODES" in script  # srun would read an inherited SLURM_NNODES as --nodes
    assert read_slurm_hostfile(files["slurm-hostfile"]) == list(rm.hosts)
    assert sorted(rm.hosts) == ["node01", "node02", "node03", "node04"]


def test_sbatch_nodelist_is_a_hostlist_every_slurm_release_reads(tmp_path):
    # python-hostlist would write ip-10-[20,25]-6-18 (text after the bracket: Slurm >= 23.02.5 only);
    # the script writes brackets around trailing digits only, as the topology exporters do.
    import hostlist

    hosts = ("ip-10-20-6-18", "ip-10-25-6-18", "ip-10-20-6-19", "ip-10-25-6-19")
    rm = read_rankmap(make_rankmap(tmp_path / "p", tp=2, dp=4, hosts=hosts, nprocs=[2, 2, 2, 2]))
    line = next(x for x in launch_files(rm, "slurm", opts(), tmp_path)["slurm.sbatch"].splitlines()
                if x.startswith("#SBATCH --nodelist="))
    expr = line.split("=", 1)[1]
    assert expr == "ip-10-20-6-[18-19],ip-10-25-6-[18-19]"
    assert sorted(hostlist.expand_hostlist(expr)) == sorted(hosts)


def test_ipv6_hostfile_plans_and_every_launch_format_reads_back(tmp_path):
    # turn2/hostfile-ipv6: hosts named by IPv6 address travel through the plan into every launch file.
    from rankmap.job.spec import MODEL_PRESETS, JobSpec
    from rankmap.placement.plan import plan
    from rankmap.topology.importers import import_file

    cluster = import_file("hostfile", TURN2 / "hostfile-ipv6" / "hostfile").cluster
    job = JobSpec(tp=8, dp=2, model=MODEL_PRESETS["gpt3-1.3b"], num_micro_batches=1)
    rm = plan(cluster, job).rankmap
    assert sorted(rm.hosts) == ["fd00:10::11", "fd00:10::12"]
    ds = read_deepspeed_hostfile(launch_files(rm, "deepspeed", opts(), tmp_path)["deepspeed-hostfile"])
    assert ds == [(h, 8) for h in rm.hosts]
    entries = read_rankfile(launch_files(rm, "mpi", opts(), tmp_path)["rankfile"])
    check_against_map(rm, rankfile=entries, hostfile=ds, slurm_hosts=list(rm.hosts))
    lines = read_torchrun_commands(launch_files(rm, "torchrun", opts(), tmp_path)["torchrun-commands.txt"])
    assert [line.options["master-addr"] for line in lines] == [rm.hosts[0]] * 2


def test_plan_in_allocation_script_plans_without_a_picture_and_passes_no_python_on(rm):
    from rankmap.launch.allocation import allocation_script

    text = allocation_script(rm, opts(entry=("./train.sh", "--lr", "3e-4"), no_python=True), "c.yaml", "alloc")
    plan_line = next(line for line in text.splitlines() if '" plan --cluster' in line)
    assert plan_line.endswith('--allocation "$SLURM_JOB_NODELIST" --out "$plan_dir" --no-picture')
    assert "--torchrun torchrun --no-python -- ./train.sh --lr 3e-4\n" in text


def test_options_refuse_an_entry_the_launchers_would_run_with_python_twice():
    with pytest.raises(LaunchError, match="'python3' after --: the launcher starts python itself"):
        opts(entry=("python3", "train.py"))
    assert opts(entry=("python3", "train.py"), no_python=True).no_python

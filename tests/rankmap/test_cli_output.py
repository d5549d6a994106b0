"""What the command prints, for people and for scripts: JSON, pipes, terminal width, where errors point."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from rankmap import api
from rankmap.cli.report import print_plan, print_simulation
from rankmap.examples import example_inputs

RACKS = ("--example", "racks")


def rankmap(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], capture_output=True, text=True,
                          timeout=300, **kw)


def test_plan_json_is_one_document_with_the_maps_summary(tmp_path):
    run = rankmap("plan", *RACKS, "--out", tmp_path / "o", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    saved = json.loads((tmp_path / "o" / "rankmap.json").read_text())
    assert doc["summary"] == saved["summary"]
    assert doc["world_size"] == saved["world_size"] == 480 and doc["hosts"] == 60
    assert doc["cluster"]["name"] == "racks-512" and doc["cluster"]["tiers"][0]["oversubscription"] == 1.0
    # racks of 16 hosts in 32-port rail ToRs: 16 x 400 Gb/s cabled per rail against 8 x 800 up (1:1), not 2:1
    assert doc["cluster"]["tiers"][0]["cabled_gbps"] == 8 * 16 * 400.0
    assert sorted(doc["outputs"]) == sorted(str(tmp_path / "o" / n) for n in ("rankmap.json", "hostfile", "plan.png"))
    verify = rankmap("verify", tmp_path / "o" / "rankmap.json", "--json")
    assert json.loads(verify.stdout) == {"rankmap": str(tmp_path / "o" / "rankmap.json"), "valid": True,
                                         "world_size": 480, "hosts": 60, "cluster": "racks-512",
                                         "cluster_verified": False, "busy_hosts": [], "summary_checked": False}
    host = (tmp_path / "o" / "hostfile").read_text().split()[0]
    node = json.loads(rankmap("node-rank", "--rankmap", tmp_path / "o" / "rankmap.json", "--host", host,
                              "--json").stdout)
    assert node["node_rank"] == 0 and "--node-rank=0" in node["torchrun_flags"]


def test_a_closed_stdout_is_not_an_error_and_the_outputs_are_whole(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "rankmap", "plan", *RACKS, "--out", str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is printed, as with `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "error" not in err
    assert json.loads((tmp_path / "o" / "rankmap.json").read_text())["world_size"] == 480


def test_topo_import_to_stdout_prints_only_the_spec(tmp_path):
    run = rankmap("topo", "import", "--from", "slurm", "tests/data/field-cases/slurm-islands.conf", "--out", "-")
    assert run.returncode == 0, run.stderr
    spec = yaml.safe_load(run.stdout)
    assert spec["name"] == "slurm-islands" and "Slurm topology/tree" in run.stderr
    show = json.loads(rankmap("topo", "show", "tests/data/field-cases/slurm-islands.conf", "--json").stdout)
    assert show["cluster"]["hosts"] == 12 and show["format"] == "slurm"


def test_errors_about_flag_values_name_the_flag_not_the_job_file(tmp_path):
    run = rankmap("plan", *RACKS, "--dp", "400", "--out", tmp_path / "o")
    assert run.returncode == 4 and run.stderr.startswith("rankmap: error: --dp: ") and "job.yaml" not in run.stderr
    run = rankmap("plan", *RACKS, "--tp", "3", "--out", tmp_path / "o")
    assert run.returncode in (3, 4) and run.stderr.startswith("rankmap: error: --tp: ")
    assert not (tmp_path / "o").exists()
    # A value from the file is still blamed on the file, with its line.
    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: gpt3-13b}\nparallel: {tp: 8, dp: 400}\nbatch: {num_micro_batches: 2}\n")
    run = rankmap("plan", "--cluster", "examples/racks/cluster.yaml", "--job", job, "--out", tmp_path / "o")
    assert run.returncode == 4 and f"{job}:2: parallel.dp: " in run.stderr  # exit-4 errors carry the line too


def test_model_flag_renames_the_job(tmp_path):
    cluster, job = example_inputs("racks", None, None)
    assert api.load_job(job, {"model": "gpt3-6.7b"}).name == "gpt3-6.7b"
    assert api.load_job(job).name != "gpt3-6.7b"


def _lines(printer) -> list[str]:
    out = io.StringIO()
    printer(Console(file=out, width=100, soft_wrap=True))
    return out.getvalue().splitlines()


def test_tables_fit_a_100_column_terminal_without_cutting_a_figure():
    cluster_path, job_path = example_inputs("megascale-3tier", None, None)
    cluster = api.load_cluster(cluster_path)
    result = api.plan(cluster, api.load_job(job_path), time_limit_s=1.0)
    lines = _lines(lambda c: print_plan(cluster, result, [], 0.0, console=c))
    table = [line for line in lines if line.startswith((" rankmap plan", " hostname order", " spread"))]
    assert len(table) == 3 and all(len(line) <= 100 and "…" not in line for line in table)
    cluster_path, job_path = example_inputs("racks", None, None)
    cluster = api.load_cluster(cluster_path)
    run = api.simulate(cluster, api.load_job(job_path), compare=True, seeds=2)
    lines = _lines(lambda c: print_simulation(cluster, run.job, run.simulation.document, [], 0.0, 1, console=c))
    rows = [line for line in lines if line.startswith((" rankmap plan", " hostname order"))]  # table rows
    assert len(rows) == 4 and all(len(line) <= 100 and "…" not in line for line in rows)


def _complete(script: str, *words: str) -> list[str]:
    """Run the generated bash completion for ``rankmap WORDS...`` (the last word being typed)."""
    words = ("rankmap",) + words
    cmd = (f"{script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
           "_rankmap; printf '%s\\n' \"${COMPREPLY[@]}\"")
    run = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


def test_bash_completion_knows_commands_verbs_options_and_choices():
    run = rankmap("completion", "bash")
    assert run.returncode == 0 and subprocess.run(["bash", "-n"], input=run.stdout, text=True).returncode == 0
    script = run.stdout
    assert _complete(script, "pl") == ["plan"]
    assert _complete(script, "topo", "") == ["export", "import", "show"]
    assert "--no-picture" in _complete(script, "plan", "--no")
    assert _complete(script, "topo", "import", "--from", "slurm-") == ["slurm-block", "slurm-yaml"]
    assert _complete(script, "topo", "show", "--from", "clu") == ["cluster"]
    assert _complete(script, "topo", "import", "--from", "clu") == []  # import takes no cluster spec
    assert _complete(script, "launch", "--format", "") == ["torchrun", "slurm", "mpi", "deepspeed"]
    assert _complete(script, "plan", "--example", "") == ["megascale-12k", "megascale-3tier", "oversubscribed-core",
                                                           "racks"]
    assert _complete(script, "simulate", "--example", "r") == ["racks"]


def test_progress_shows_on_a_terminal_and_the_run_still_succeeds(tmp_path):
    import os
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: rankmap with a terminal on stdin, stdout and stderr
        os.execv(sys.executable, [sys.executable, "-m", "rankmap", "plan", *RACKS, "--out", str(tmp_path / "o")])
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "wrote" in text and (tmp_path / "o" / "rankmap.json").is_file()


def test_every_result_printing_command_takes_json(tmp_path):
    assert rankmap("plan", *RACKS, "--dp", "2", "--no-picture", "--out", tmp_path / "p").returncode == 0
    runs = {
        "launch": rankmap("launch", "--rankmap", tmp_path / "p" / "rankmap.json", "--format", "torchrun",
                          "--no-resolve", "--out", tmp_path / "l", "--json"),
        "export": rankmap("topo", "export", "--to", "slurm", "examples/racks/cluster.yaml", "--out",
                          tmp_path / "t.conf", "--json"),
        "show": rankmap("show", tmp_path / "p" / "rankmap.json", "--out", tmp_path / "s.png", "--json"),
        # an embedded example's map: replan finds its cluster as show and verify do
        "replan": rankmap("replan", "--rankmap", tmp_path / "p" / "rankmap.json", "--failed", "gpu-r1-n01",
                          "--out", tmp_path / "r", "--json"),
    }
    runs["import"] = rankmap("topo", "import", "--from", "slurm", tmp_path / "t.conf", "--out", tmp_path / "t.yaml",
                             "--json")
    for name, run in runs.items():
        assert run.returncode == 0, (name, run.stderr)
        json.loads(run.stdout)
    assert json.loads(runs["launch"].stdout)["outputs"][0].startswith(str(tmp_path / "l"))
    assert json.loads(runs["import"].stdout)["cluster"]["name"] == "racks-512"
    assert json.loads(runs["show"].stdout)["outputs"] == [str(tmp_path / "s.png")] and (tmp_path / "s.png").exists()
    assert json.loads(runs["replan"].stdout)["replaced"][0]["old"] == "gpu-r1-n01"


@pytest.mark.parametrize("args,line", [
    (("plan", "--tp", "0"), "rankmap plan: error: argument --tp: expected a positive integer, got '0' "
                            "(see `rankmap plan --help`)"),
    (("simulate", "--seeds", "0"), "rankmap simulate: error: argument --seeds: expected a seed count (1..4096), "
                                   "got '0' (see `rankmap simulate --help`)"),
    (("topo", "show"), "rankmap topo show: error: the following arguments are required: CLUSTER_OR_FILE "
                       "(see `rankmap topo show --help`)"),
    (("verify", "x.json", "--nope"), "rankmap: error: unrecognized arguments: --nope (see `rankmap --help`)"),
])
def test_a_bad_command_line_is_one_line_and_exit_2(args, line):
    run = rankmap(*args)
    assert (run.returncode, run.stderr) == (2, line + "\n")


def test_a_wall_clock_cap_reaches_every_solver_and_the_plan_still_comes():
    from rankmap.placement.cpsat_model import solver_params, wall_clock_limit

    assert solver_params(20.0, 0, 1).parameters.max_time_in_seconds == 400.0  # deterministic budget only
    with wall_clock_limit(0.5):
        capped = solver_params(20.0, 0, 1).parameters
        assert 0.0 < capped.max_time_in_seconds <= 0.5 and capped.max_deterministic_time == 20.0
    assert solver_params(20.0, 0, 1).parameters.max_time_in_seconds == 400.0  # the cap ends with the block
    cluster_path, job_path = example_inputs("racks", None, None)
    cluster = api.load_cluster(cluster_path)
    result = api.plan(cluster, api.load_job(job_path), objectives=("spread", "bytes"), wall_limit_s=1.0)
    assert result.rankmap.world_size == 480


def test_max_wall_flag_bounds_a_slow_objective(tmp_path):
    import time
    t0 = time.monotonic()
    run = rankmap("plan", "--objective", "spread,bytes", "--max-wall", "1", "--no-picture", "--out", tmp_path / "o")
    assert run.returncode == 0, run.stderr
    # Uncapped this objective runs CP-SAT for its whole deterministic budget (20 s of solver time).
    assert time.monotonic() - t0 < 15 and (tmp_path / "o" / "rankmap.json").is_file()


def test_solver_progress_reports_gaps_and_changes_nothing():
    from rankmap.job.rank_map import rankmap_to_json
    from rankmap.placement.cpsat_model import solver_progress

    cluster_path, job_path = example_inputs("racks", None, None)
    cluster, job = api.load_cluster(cluster_path), api.load_job(job_path)
    seen = []
    with solver_progress(lambda objective, bound: seen.append((objective, bound))):
        watched = api.plan(cluster, job)
    plain = api.plan(cluster, job)
    assert seen and all(objective >= bound for objective, bound in seen)
    assert rankmap_to_json(watched.rankmap) == rankmap_to_json(plain.rankmap)


def test_a_full_stdout_is_one_line_exit_74_and_no_outputs(tmp_path):
    full = {"stdout": open("/dev/full", "w")}
    run = subprocess.run([sys.executable, "-m", "rankmap", "plan", *RACKS, "--dp", "2", "--out", str(tmp_path / "hp")],
                         stderr=subprocess.PIPE, text=True, timeout=300, **full)
    assert run.returncode == 74 and not (tmp_path / "hp").exists()
    assert run.stderr.splitlines() == ["rankmap: error: standard output: cannot write the report: No space left on "
                                       "device; no output file was written"]
    # a folder holding an earlier plan keeps it whole, byte for byte
    assert rankmap("plan", *RACKS, "--dp", "2", "--out", tmp_path / "hp", "--no-picture").returncode == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "hp").iterdir()}
    run = subprocess.run([sys.executable, "-m", "rankmap", "plan", *RACKS, "--dp", "4", "--out", str(tmp_path / "hp")],
                         stderr=subprocess.PIPE, text=True, timeout=300, **full)
    assert run.returncode == 74 and {p.name: p.read_bytes() for p in (tmp_path / "hp").iterdir()} == before
    run = subprocess.run([sys.executable, "-m", "rankmap", "verify", str(tmp_path / "hp" / "rankmap.json")],
                         stderr=subprocess.PIPE, text=True, timeout=300, **full)
    assert run.returncode == 74
    assert run.stderr == "rankmap: error: standard output: cannot write: No space left on device\n"
    # every command that writes files: launch files, a topology export, a picture
    for args, out in ((["launch", "--rankmap", tmp_path / "hp" / "rankmap.json", "--format", "slurm", "--no-resolve",
                        "--out", tmp_path / "l"], tmp_path / "l"),
                      (["topo", "export", "--to", "slurm", "examples/racks/cluster.yaml", "--out", tmp_path / "t.conf"],
                       tmp_path / "t.conf"),
                      (["show", tmp_path / "hp" / "rankmap.json", "--out", tmp_path / "s.png"], tmp_path / "s.png")):
        run = subprocess.run([sys.executable, "-m", "rankmap", *map(str, args)], stderr=subprocess.PIPE, text=True,
                             timeout=300, **full)
        assert run.returncode == 74 and not out.exists(), (args, run.stderr)


def test_a_plan_without_picture_removes_the_old_picture(tmp_path):
    assert rankmap("plan", *RACKS, "--dp", "2", "--out", tmp_path).returncode == 0
    assert (tmp_path / "plan.png").exists()
    run = rankmap("plan", *RACKS, "--dp", "4", "--out", tmp_path, "--no-picture")
    assert run.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["hostfile", "rankmap.json"]
    assert "plan.png" not in run.stdout


def test_long_tier_names_head_their_columns_as_t1_and_no_figure_is_cut(tmp_path):
    case = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2" / "k8s-allocatable"
    assert rankmap("topo", "import", "--from", "k8s-labels", case / "nodes.json", "--out", tmp_path / "k8s.yaml"
                   ).returncode == 0
    run = rankmap("plan", "--cluster", tmp_path / "k8s.yaml", "--job", case / "job.yaml", "--out", tmp_path / "p",
                  "--no-picture")  # stdout is a pipe
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith((" placement", " rankmap plan", " spread"))]
    assert len(rows) == 3 and all(len(line) <= 100 and "…" not in line for line in rows)
    assert rows[0].split() == ["placement", "weighted", "x-T1", "spread", "edges", "ToR", "gap"]
    assert rows[1].split() == ["rankmap", "plan", "10.5", "GB", "10.5", "GB", "2/1", "16/0", "10.5", "GB", "0.0%"]
    assert "; T1: tier cloud.google.com/gce-topology-block" in run.stdout


def test_block_export_of_a_pod_fabric_warns_about_levels_across_pods(tmp_path):
    run = rankmap("topo", "export", "--to", "slurm-block", "examples/oversubscribed-core/cluster.yaml",
                  "--out", tmp_path / "t.conf")
    assert run.returncode == 0, run.stderr
    warned = [line for line in run.stderr.splitlines() if line.startswith("rankmap: warning: BlockSizes level")]
    assert len(warned) == 3 and "tg04+tg05+tg06+tg07: part of pod1 (tg04, tg05), part of pod2" in warned[0]

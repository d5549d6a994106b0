"""Framework flags for the map's groups, and node ranks for pods (no processes)."""

from __future__ import annotations

import json

import pytest
from helpers import make_rankmap

from rankmap import api
from rankmap.errors import LaunchError, SpecError
from rankmap.job.layout import ParallelLayout
from rankmap.job.rank_map import read_rankmap
from rankmap.launch.adapters import framework_flags
from rankmap.launch.noderank import node_rank_flags, node_rank_of


def megatron_layout(flags: str, world_size: int) -> ParallelLayout:
    """Megatron-Core's rank generator for these Megatron-LM flags (initialize_model_parallel's order)."""
    words = flags.split()
    size = {w.split("-")[2]: int(words[i + 1]) for i, w in enumerate(words) if w.endswith("-parallel-size")}
    sizes = {"tp": size["tensor"], "pp": size["pipeline"], "cp": size["context"], "ep": size["expert"]}
    sizes["dp"] = world_size // (sizes["tp"] * sizes["pp"] * sizes["cp"])
    order = "tp-cp-ep-pp-dp" if "--use-tp-pp-dp-mapping" in words else "tp-cp-ep-dp-pp"
    return ParallelLayout(sizes, order)


def test_megatron_flags_on_the_default_build_the_maps_groups():
    """tp=8 pp=8 cp=2 on the default cluster and job: Megatron-Core's groups == the map's groups."""
    from rankmap.examples import example_inputs

    cluster_path, job_path = example_inputs(None, None, None)
    job = api.load_job(job_path, {"tp": 8, "pp": 8, "cp": 2})
    rm = api.plan(api.load_cluster(cluster_path), job, time_limit_s=2).rankmap
    flags = framework_flags(rm, "megatron")
    assert flags.startswith("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 "
                            "--context-parallel-size 2 --expert-model-parallel-size 1")
    mcore = megatron_layout(flags, rm.world_size)
    for token, kind in (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("dp-cp", "dp")):
        assert (mcore.ranks(token) == rm.layout.groups(kind)).all(), token
    assert (mcore.ranks("dp") == rm.layout.ranks("dp")).all()  # dense DP without CP
    assert (mcore.ranks("tp-pp") == rm.layout.ranks("tp-pp")).all()  # model-parallel groups


def test_megatron_tp_pp_dp_mapping_and_refusals(tmp_path):
    rm = read_rankmap(make_rankmap(tmp_path / "a", tp=2, pp=2, dp=2, hosts=("a", "b"), order="tp-cp-ep-pp-dp"))
    flags = framework_flags(rm, "megatron")
    assert flags.endswith("--use-tp-pp-dp-mapping")
    assert (megatron_layout(flags, 8).ranks("dp") == rm.layout.groups("dp")).all()
    with pytest.raises(LaunchError, match="torchtitan cannot build the map's groups: the map orders ranks "
                                          "tp-cp-ep-pp-dp"):
        framework_flags(rm, "torchtitan")
    odd = read_rankmap(make_rankmap(tmp_path / "b", tp=2, pp=2, dp=2, hosts=("a", "b"), order="dp-tp-cp-ep-pp"))
    with pytest.raises(LaunchError, match="Megatron-LM cannot build .* only tp-cp-ep-dp-pp or tp-cp-ep-pp-dp"):
        framework_flags(odd, "megatron")
    plain = read_rankmap(make_rankmap(tmp_path / "c", tp=2, pp=2, dp=2, hosts=("a", "b")))
    assert framework_flags(plain, "torchtitan").split()[-4:] == ["--parallelism.data_parallel_shard_degree", "2",
                                                                 "--parallelism.data_parallel_replicate_degree", "1"]
    assert framework_flags(plain, "deepspeed") == "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"


def test_node_rank_exact_then_unambiguous_short_name(tmp_path):
    rm = read_rankmap(make_rankmap(tmp_path, tp=2, dp=3, hosts=("gpu-b.dc1", "gpu-a.dc1", "gpu-a.dc2")))
    assert node_rank_of(rm, "gpu-a.dc2") == 2 and node_rank_of(rm, "gpu-b") == 0
    with pytest.raises(LaunchError, match="'gpu-a' is ambiguous: its short name matches gpu-a.dc1, gpu-a.dc2"):
        node_rank_of(rm, "gpu-a")
    node, flags = node_rank_flags(rm, "gpu-a.dc1", 1234)
    assert node == 1 and "--node-rank=1" in flags and "--master-addr=gpu-b.dc1" in flags


def test_plan_hosts_from_kubectl_pods_and_errors(tmp_path):
    cluster = api.parse_cluster("hosts: {gpus: 1, nics: 1}\ntor_groups:\n- {name: t1, hosts: 'n1,n3'}\n"
                                "- {name: t2, hosts: 'n2,n4,n5'}\navailability: {busy: n5}\n", "c.yaml")
    pods = {"items": [{"metadata": {"name": f"w-{i}"}, "spec": {"nodeName": n}} for i, n in enumerate("n4 n1".split())]}
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    assert api.read_host_names(f"@{tmp_path / 'pods.json'}") == ["n4", "n1"]
    cons = api.combine_constraints(cluster, hosts=f"@{tmp_path / 'pods.json'}")
    assert sorted(cons.exclude) == ["n2", "n3", "n5"]
    with pytest.raises(SpecError, match="host 'n5' is not free \\(its state is 'busy'\\)"):
        api.combine_constraints(cluster, hosts="n[1-2],n5")
    with pytest.raises(SpecError, match="host 'n9' is not in cluster"):
        api.combine_constraints(cluster, hosts="n9")
    with pytest.raises(SpecError, match="host 'n2' is not free \\(excluded\\)"):
        api.combine_constraints(cluster, exclude="n2", hosts="n[1-2]")


def test_an_allocation_takes_its_busy_hosts_as_its_own_and_refuses_failed_ones():
    """plan --allocation "$SLURM_JOB_NODELIST": a spec refreshed from Slurm marks the job's own nodes busy."""
    from rankmap.placement.host_selection import own_allocation

    cluster = api.parse_cluster("hosts: {gpus: 1, nics: 1}\ntor_groups:\n- {name: t1, hosts: 'n1,n3'}\n"
                                "- {name: t2, hosts: 'n2,n4,n5'}\navailability: {busy: 'n[1-2]', failed: n5}\n",
                                "c.yaml")
    assert api.select_hosts(cluster, "n[1-4]", allocated=True) == {"n1", "n2", "n3", "n4"}
    with pytest.raises(SpecError, match="--hosts: host 'n1' is not free \\(its state is 'busy'\\)"):
        api.select_hosts(cluster, "n[1-4]")   # without --allocation a busy host is another job's
    with pytest.raises(SpecError, match="--allocation: host 'n5' of the allocation cannot run ranks \\(its state is "
                                        "'failed'\\): ask the scheduler for other nodes \\(Slurm: sbatch "
                                        "--exclude=n5\\)"):
        api.select_hosts(cluster, "n[1-5]", allocated=True)
    with pytest.raises(SpecError, match="--allocation: host 'n2' of the allocation cannot run ranks \\(excluded\\)"):
        api.combine_constraints(cluster, exclude="n2", hosts="n[1-2]", allocated=True)
    cons = api.combine_constraints(cluster, hosts="n[1-3]", allocated=True)
    assert sorted(cons.exclude) == ["n4", "n5"]
    own = own_allocation(cluster, {"n1", "n2", "n3"})
    assert [h.state for h in own.hosts] == ["free", "free", "free", "free", "failed"]   # n1 n3 n2 n4 n5
    assert own.spec_hash() == cluster.spec_hash()   # a map planned on it belongs to the spec


def test_plan_allocation_on_a_refreshed_spec(tmp_path):
    """The command the generated slurm-plan.sbatch runs: busy allocated nodes are planned on."""
    import subprocess
    import sys

    (tmp_path / "c.yaml").write_text("hosts: {gpus: 1, nics: 1}\ntor_groups:\n- {name: t1, hosts: 'n1,n3'}\n"
                                     "- {name: t2, hosts: 'n2,n4'}\navailability: {busy: 'n[1-3]'}\n")
    (tmp_path / "j.yaml").write_text("parallel: {tp: 1, pp: 2, dp: auto}\n"
                                     "model: {layers: 4, hidden: 64, heads: 4, seq_len: 64, vocab: 256}\n"
                                     "batch: {micro_batch_size: 1, num_micro_batches: 2}\n")
    run = subprocess.run([sys.executable, "-m", "rankmap", "plan", "--cluster", "c.yaml", "--job", "j.yaml",
                          "--allocation", "n[1-4]", "--out", "p", "--no-picture"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    rm = read_rankmap(tmp_path / "p" / "rankmap.json")
    assert sorted(rm.hosts) == ["n1", "n2", "n3", "n4"]
    assert {frozenset(rm.hosts[:2]), frozenset(rm.hosts[2:])} == {frozenset({"n1", "n3"}), frozenset({"n2", "n4"})}


def test_jobset_example_calls_node_rank(tmp_path):
    """The example manifest is valid YAML and its container runs `rankmap node-rank ... --flags-only`."""
    import subprocess
    import sys

    import yaml
    from helpers import REPO

    doc = yaml.safe_load((REPO / "examples" / "kubernetes" / "jobset.yaml").read_text())
    pod = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    script = pod["containers"][0]["args"][0]
    assert 'rankmap node-rank --rankmap "$RANKMAP_FILE" --host "$NODE_NAME" --flags-only' in script
    rankmap = make_rankmap(tmp_path, tp=2, dp=2, hosts=("node-b", "node-a"))
    run = subprocess.run([sys.executable, "-m", "rankmap", "node-rank", "--rankmap", str(rankmap), "--host",
                          "node-a", "--flags-only"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == ("--nnodes=2 --nproc-per-node=2 --node-rank=1 --rdzv-backend=static "
                                                  "--master-addr=node-b --master-port=29500 --max-restarts=0\n")


def test_megatron_flags_for_folded_expert_groups():
    # Megatron-Core >= 0.10 folds CP into expert DP, as the map does: ep > 1 with cp > 1 is expressible,
    # and an expert TP of its own is passed as --expert-tensor-parallel-size.
    from rankmap.job.rank_map import RankMap
    from rankmap.job.spec import JobSpec, ModelShape

    moe = ModelShape(layers=4, hidden=64, heads=4, seq_len=64, experts=8)
    job = JobSpec(tp=2, cp=2, ep=4, etp=1, dp=2, model=moe, num_micro_batches=1)
    rm = RankMap(job=job, cluster_name="c", cluster_hash="x", hosts=("a",), tor_groups=("t",),
                 rails=(tuple(range(8)),), nproc_per_node=8)
    assert framework_flags(rm, "megatron") == ("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 "
                                               "--context-parallel-size 2 --expert-model-parallel-size 4 "
                                               "--expert-tensor-parallel-size 1")
    assert rm.layout.groups("ep").tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_interleaved_maps_pass_their_virtual_stages(tmp_path):
    """vpp=2 reaches Megatron-LM (real CLI run) and torchtitan; DeepSpeed, which cannot interleave, refuses."""
    import subprocess
    import sys
    path = make_rankmap(tmp_path / "v2", tp=2, pp=2, hosts=("a",), vpp=2, layers=4)
    run = subprocess.run([sys.executable, "-m", "rankmap", "launch", "--rankmap", str(path), "--flags", "megatron"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-2:] == ["--num-virtual-stages-per-pipeline-rank", "2"]
    rm = read_rankmap(path)
    assert framework_flags(rm, "torchtitan").split()[-2:] == ["--parallelism.pipeline_parallel_schedule",
                                                              "Interleaved1F1B"]
    with pytest.raises(LaunchError, match="DeepSpeed's pipeline engine runs one non-interleaved schedule.*vpp=2"):
        framework_flags(rm, "deepspeed")
    # vpp=3 on pp=2: 6 stages; 24 layers + 2 weigh 26, ceil(26 / 5) = 6, so 5 layers per stage
    three = read_rankmap(make_rankmap(tmp_path / "v3", tp=2, pp=2, hosts=("a",), vpp=3, layers=24))
    assert framework_flags(three, "torchtitan").split()[-4:] == [
        "--parallelism.pipeline_parallel_schedule", "Interleaved1F1B",
        "--parallelism.pipeline_parallel_layers_per_stage", "5"]
    assert framework_flags(three, "megatron").split()[-1] == "3"
    # 12 layers + 2 = 14: 3 per stage gives 5 stages, 2 gives 7, never 6
    odd = read_rankmap(make_rankmap(tmp_path / "v3b", tp=2, pp=2, hosts=("a",), vpp=3, layers=12))
    with pytest.raises(LaunchError, match="no whole layers_per_stage gives 6"):
        framework_flags(odd, "torchtitan")
    flat = read_rankmap(make_rankmap(tmp_path / "v1", tp=2, pp=2, hosts=("a",), layers=4))
    assert "virtual" not in framework_flags(flat, "megatron")
    assert "Interleaved" not in framework_flags(flat, "torchtitan")


def test_hosts_from_a_kubectl_node_list(tmp_path):
    nodes = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": {}} for n in ("n4", "n1")]}
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    assert api.read_host_names(f"@{tmp_path / 'nodes.json'}") == ["n4", "n1"]
    (tmp_path / "nodes.json").write_text(json.dumps({**nodes, "kind": "NodeList"}))
    assert api.read_host_names(f"@{tmp_path / 'nodes.json'}") == ["n4", "n1"]


def test_plan_allocation_errors_name_the_allocation_flag_and_file(tmp_path):
    """Inside an allocation the error names --allocation (not --hosts) and the @FILE that names no host."""
    import subprocess
    import sys

    (tmp_path / "c.yaml").write_text("hosts: {gpus: 1, nics: 1}\ntor_groups:\n- {name: t1, hosts: 'n[1-4]'}\n")
    (tmp_path / "j.yaml").write_text("parallel: {tp: 1, pp: 2, dp: 1}\n"
                                     "model: {layers: 4, hidden: 64, heads: 4, seq_len: 64, vocab: 256}\n"
                                     "batch: {micro_batch_size: 1, num_micro_batches: 2}\n")
    (tmp_path / "empty.txt").write_text("# no hosts yet\n")

    def plan(allocation):
        return subprocess.run([sys.executable, "-m", "rankmap", "plan", "--cluster", "c.yaml", "--job", "j.yaml",
                               "--allocation", allocation, "--out", "p", "--no-picture"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)

    run = plan("n[1-4]")
    assert run.returncode == 3 and run.stderr == (
        "rankmap: error: --allocation: --allocation gives 4 hosts but the job uses 2: n3, n4 would stay idle; set dp "
        "to fill them (dp auto) or list fewer hosts\n")
    run = plan("@empty.txt")
    assert run.returncode == 3 and run.stderr == (
        "rankmap: error: --allocation: no hosts in empty.txt (it is empty, or only comments)\n")
    assert not (tmp_path / "p").exists()

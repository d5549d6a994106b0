"""Job specs: parsing, overrides, and errors that name the file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankmap.errors import SpecError
from rankmap.job.spec import JobSpec, interleaved_rule
from rankmap.job.spec_file import job_to_dict, load_job, parse_job


def test_example_job():
    job = load_job("examples/megascale-12k/job.yaml")
    assert (job.tp, job.pp, job.dp, job.cp, job.ep, job.order) == (8, 8, None, 1, 1, "tp-cp-ep-dp-pp")
    assert job.model.layers == 96 and job.model.hidden == 12288 and job.model.seq_len == 2048
    resolved = job.resolved(1152 * 8)
    assert resolved.dp == 144 and resolved.world_size == 9216 and resolved.micro_batches() == 12


def test_overrides_and_presets():
    job = parse_job("model: {preset: gpt3-13b}\nbatch: {global_batch_size: 64}\n", "j.yaml",
                    {"tp": 4, "pp": 2, "dp": 8, "model": "gpt3-175b"})
    assert (job.tp, job.pp, job.dp, job.model.layers) == (4, 2, 8, 96)
    assert job.micro_batches() == 8
    job = parse_job("model: {preset: gpt3-13b}\nbatch: {global_batch_size: 64}\n", "j.yaml",
                    {"dp": 4, "num_micro_batches": 3})
    assert job.global_batch_size is None and job.micro_batches() == 3


def test_auto_dp_respects_global_batch():
    job = parse_job("parallel: {tp: 8, pp: 2}\nmodel: {preset: gpt3-13b}\nbatch: {global_batch_size: 96}\n")
    assert job.resolved(8 * 2 * 13).dp == 12  # 13 replicas fit; 12 is the largest that divides 96


@pytest.mark.parametrize("text, where, what", [
    ("model: {preset: gpt3-175b}\nparalel: {tp: 8}\n", "job.yaml:2: paralel", "unknown key 'paralel'"),
    ("parallel: {tp: 7}\nmodel: {preset: gpt3-175b}\nbatch: {num_micro_batches: 1}\n", "job.yaml:1: parallel.tp",
     "tp=7 must divide the model's 96 attention heads"),
    ("parallel: {pp: 5}\nmodel: {preset: gpt3-175b}\nbatch: {num_micro_batches: 1}\n", "job.yaml:1: parallel.pp",
     "96 layers"),
    ("parallel: {tp: 0}\nmodel: {preset: gpt3-175b}\n", "job.yaml:1: parallel.tp", "must be >= 1"),
    ("parallel: {order: tp-dp-tp}\nmodel: {preset: gpt3-175b}\n", "job.yaml:1: parallel.order", "distinct dims"),
    ("parallel: {cp: 2, order: tp-dp-pp}\nmodel: {preset: gpt3-175b}\n", "job.yaml:1: parallel.order", "lacks 'cp'"),
    ("model: {preset: gpt5}\n", "job.yaml:1: model.preset", "expected one of"),
    ("model: {layers: 2}\n", "job.yaml:1: model.hidden", "required key is missing"),
    ("parallel: {dp: 3}\nmodel: {preset: gpt3-175b}\nbatch: {global_batch_size: 10}\n",
     "job.yaml:3: batch.global_batch_size", "not a multiple of micro_batch_size*dp = 3"),
    ("parallel: {ep: 2, dp: 2}\nmodel: {preset: gpt3-175b}\nbatch: {num_micro_batches: 1}\n",
     "job.yaml:1: parallel.ep", "mixture-of-experts"),
    ("data_parallel: ddp\nmodel: {preset: gpt3-175b}\n", "job.yaml:1: data_parallel", "zero, allreduce"),
    ("model: {preset: gpt3-175b}\nhardware: {gpu: v100}\n", "job.yaml:2: hardware.gpu", "a100, h100, h200, b200"),
    ("model: {preset: gpt3-175b}\nhardware:\n  efficiency_gemm: 1.5\n", "job.yaml:3: hardware.efficiency_gemm",
     "fraction in (0, 1]"),
    ("model: {preset: gpt3-175b}\nhardware: {optimizer_step_s: -1}\n", "job.yaml:2: hardware.optimizer_step_s",
     ">= 0 or auto"),
    ("model: {preset: gpt3-175b}\nhardware: {data_loading_s: -0.5}\n", "job.yaml:2: hardware.data_loading_s",
     "must be >= 0 seconds, got -0.5"),
    ("model: {preset: gpt3-175b}\nhardware: {data_loading_s: .nan}\n", "job.yaml:2: hardware.data_loading_s",
     "a number"),
    ("model: {preset: gpt3-175b}\nhardware: {data_loading_s: 1e14}\n", "job.yaml:2: hardware.data_loading_s",
     "got '1e14' (YAML reads 1e14 as text: write it with a dot, e.g. 1.0e+14)"),
    ("parallel: {tp: '8'}\nmodel: {preset: gpt3-175b}\n", "job.yaml:1: parallel.tp",
     "got '8' (write 8 without quotes or exponent)"),
    ("model: {preset: gpt3-175b}\noverlap: {pp: true}\n", "job.yaml:2: overlap.pp", "unknown key"),
])
def test_bad_jobs(text, where, what):
    with pytest.raises(SpecError) as err:
        parse_job(text, "job.yaml")
    assert str(err.value).startswith(where), str(err.value)
    assert what in str(err.value)


def test_more_ranks_than_free_gpus_names_file_and_key():
    job = parse_job("parallel: {tp: 8, pp: 8, dp: 200}\nmodel: {preset: gpt3-175b}\nbatch: {num_micro_batches: 4}\n",
                    "job.yaml")
    with pytest.raises(SpecError, match=r"^job.yaml: parallel.dp: the job needs 12800 GPUs .* only 9216 are free"):
        job.resolved(9216)
    with pytest.raises(SpecError, match="one model replica needs"):
        JobSpec(tp=8, pp=8, num_micro_batches=1, source="j.yaml").resolved(32)


def test_hardware_settings_round_trip_and_default_stays_out_of_dicts():
    from rankmap.job.spec import Hardware
    from rankmap.job.spec_file import job_from_data, job_to_dict
    job = parse_job("model: {preset: gpt3-13b}\nhardware: {gpu: h100, recompute: true, data_loading_s: 0.25}\n"
                    "overlap: {tp: false}\n")
    assert job.hardware == Hardware(gpu="h100", recompute=True, overlap_tp=False, data_loading_s=0.25)
    assert job_from_data(job_to_dict(job), "again").hardware == job.hardware
    assert "hardware" not in job_to_dict(parse_job("model: {preset: gpt3-13b}\n"))   # rank maps unchanged


# -- field case turn2/vpp-microbatches: the framework decides the interleaved rule ---------------

TURN2 = Path(__file__).resolve().parents[1] / "data" / "field-cases" / "turn2" / "vpp-microbatches"


def test_field_case_engine_accepts_10_micro_batches_on_pp4_vpp2():
    pytest.importorskip("torch", reason="the engine's schedule needs PyTorch (pip install torch==2.13.0)")
    from rankmap.engine.parallel import resolve_schedule
    from rankmap.placement.plan import plan
    from rankmap.topology.spec import load_cluster

    job = load_job(TURN2 / "job.yaml")
    assert (job.framework, job.pp, job.virtual_stages, job.micro_batches()) == ("engine", 4, 2, 10)
    rm = plan(load_cluster(TURN2 / "cluster.yaml"), job).rankmap
    assert rm.world_size == 32 and rm.job.num_micro_batches == 10
    assert resolve_schedule("auto", 4, 2, 10) == "interleaved-1f1b"  # the engine runs it: 2 rounds of 5


def test_field_case_megatron_keeps_the_multiple_of_pp_rule(tmp_path):
    text = (TURN2 / "job.yaml").read_text() + "framework: megatron\n"
    with pytest.raises(SpecError) as err:
        parse_job(text, "job.yaml")
    assert str(err.value) == (
        "job.yaml:6: batch.num_micro_batches: Megatron-LM's interleaved schedule (vpp=2) needs micro-batches per "
        "pipeline (10) divisible by pp=4 (framework: megatron; set framework: to the one that trains the job)")
    assert parse_job(text.replace("num_micro_batches: 10", "num_micro_batches: 12"), "job.yaml").framework == "megatron"


@pytest.mark.parametrize("framework,m,ok", [
    ("engine", 10, True), ("torchtitan", 10, True), ("engine", 3, True),   # 1 round of 3
    ("engine", 11, False),                                                  # 2 rounds, 11 % 2 != 0
    ("megatron", 8, True), ("megatron", 10, False), ("megatron", 3, False),
    ("deepspeed", 8, False),                                                # no interleaved schedule
])
def test_interleaved_rules_per_framework(framework, m, ok):
    assert (interleaved_rule(framework, 4, 2, m) is None) == ok
    assert interleaved_rule(framework, 4, 1, m) is None  # plain 1F1B: any count


def test_framework_key_forms_and_round_trip():
    base = "model: {preset: gpt3-1.3b}\nbatch: {num_micro_batches: 2}\n"
    job = parse_job(base + "framework: {name: megatron, version: \"0.12\"}\n", "job.yaml")
    assert (job.framework, job.framework_version) == ("megatron", "0.12")
    assert job_to_dict(job)["framework"] == {"name": "megatron", "version": "0.12"}
    assert "framework" not in job_to_dict(parse_job(base, "job.yaml"))  # the default stays out of outputs
    with pytest.raises(SpecError, match=r"job.yaml:3: framework.version: write the version as a string"):
        parse_job(base + "framework: {name: megatron, version: 0.10}\n", "job.yaml")
    with pytest.raises(SpecError, match=r"job.yaml:3: framework: expected one of engine, megatron, torchtitan, "
                                        r"deepspeed; got 'nemo'"):
        parse_job(base + "framework: nemo\n", "job.yaml")


@pytest.mark.slow
def test_field_case_engine_runs_10_micro_batches_on_pp4_vpp2(tmp_path):
    """The engine really runs the field case's schedule: 4 gloo processes, pp=4 x 2 chunks, 10 micro-batches,
    two steps, and its first loss equals one process's."""
    pytest.importorskip("torch", reason="the engine needs PyTorch (pip install torch==2.13.0)")
    import numpy as np
    from helpers import launch_cli, make_rankmap, read_log

    from rankmap.engine.config import load_config
    from rankmap.engine.reference import reference_losses
    from rankmap.engine.runspec import resolve_run
    from rankmap.job.rank_map import read_rankmap

    rankmap = make_rankmap(tmp_path / "plan", pp=4, vpp=2, micro_batches=10, layers=8, hosts=("solo",))
    run = launch_cli("--rankmap", rankmap, "--local", "--steps", 2, "--out", tmp_path / "run", "--timeout", 120,
                     timeout=150)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    losses = [r["loss"] for r in read_log(tmp_path / "run")]
    cfg = load_config(None)
    ref = reference_losses(cfg, resolve_run(cfg, read_rankmap(rankmap).job), 2)
    assert len(losses) == 2 and np.allclose(losses, ref, atol=2e-5, rtol=0)


@pytest.mark.parametrize("framework,why", [
    ("megatron", "Megatron-LM's validate_args refuses an interleaved schedule without a pipeline"),
    ("torchtitan", "torch.distributed.pipelining (torchtitan) builds no pipeline for pp=1"),
    ("engine", "torch.distributed.pipelining (engine) builds no pipeline for pp=1"),
    ("deepspeed", "DeepSpeed's pipeline engine has no interleaved schedule"),
])
def test_virtual_stages_need_a_pipeline(framework, why):
    """vpp > 1 with pp = 1 was accepted, then dropped by launch --flags megatron."""
    text = (f"framework: {framework}\nparallel: {{tp: 8, pp: 1, dp: 1, vpp: 2}}\nmodel: {{preset: gpt3-13b}}\n"
            "batch: {num_micro_batches: 4}\n")
    with pytest.raises(SpecError) as err:
        parse_job(text, "job.yaml")
    assert str(err.value) == f"job.yaml:2: parallel.vpp: vpp=2 needs pp > 1, got pp=1: {why}" + (
        " (\"When interleaved schedule is used, pipeline-model-parallel size should be greater than 1\")"
        if framework == "megatron" else ", so the virtual stages would be ignored" if "pipelining" in why else "")
    with pytest.raises(SpecError, match=r"^<inline>: parallel.vpp: vpp=2 needs pp > 1, got pp=1"):
        JobSpec(tp=8, pp=1, virtual_stages=2, num_micro_batches=4, framework=framework).resolved(8)
    assert parse_job(text.replace("vpp: 2", "vpp: 1"), "job.yaml").virtual_stages == 1


def test_cli_refuses_vpp_without_a_pipeline(tmp_path, capsys):
    from rankmap.cli import main

    job = tmp_path / "job.yaml"
    job.write_text("name: x\nparallel: {tp: 8, pp: 1, dp: 1, vpp: 2}\nmodel: {preset: gpt3-13b}\n"
                   "batch: {micro_batch_size: 1, num_micro_batches: 4}\n")
    cluster = Path(__file__).resolve().parents[2] / "examples" / "racks" / "cluster.yaml"
    assert main(["plan", "--cluster", str(cluster), "--job", str(job), "--out", str(tmp_path / "p"),
                 "--no-picture"]) == 3
    assert capsys.readouterr().err.startswith(f"rankmap: error: {job}:2: parallel.vpp: vpp=2 needs pp > 1, got pp=1")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("framework, parallel, where, why", [
    ("torchtitan", "{tp: 8, pp: 4, dp: 2, order: tp-cp-ep-pp-dp}", "job.yaml:1: parallel.order",
     "torchtitan cannot build the job's groups: the job orders ranks tp-cp-ep-pp-dp (fastest first; dimensions of "
     "size > 1: tp-pp-dp), torchtitan only tp-cp-dp-pp; plan with --order tp-cp-dp-pp"),
    ("deepspeed", "{tp: 8, pp: 2, dp: 1, cp: 2}", "job.yaml:1: parallel.cp",
     "DeepSpeed's PipeModelDataParallelTopology has axes pipe, data and model only"),
    ("megatron", "{tp: 8, pp: 4, dp: 2, order: dp-tp-cp-ep-pp}", "job.yaml:1: parallel.order",
     "Megatron-LM cannot build the job's groups: the job orders ranks dp-tp-cp-ep-pp"),
    ("torchtitan", "{tp: 8, pp: 4, cp: 2, order: cp-tp-ep-dp-pp}", "job.yaml:1: parallel.order",  # dp auto: none fits
     "torchtitan cannot build the job's groups: the job orders ranks cp-tp-ep-dp-pp (fastest first; dimensions of "
     "size > 1: cp-tp-dp-pp)"),
])
def test_a_framework_that_cannot_build_the_groups_is_refused_when_the_job_is_read(framework, parallel, where, why):
    """Planned, such a job was refused only by `launch --flags` (tester report: torchtitan's order)."""
    text = f"parallel: {parallel}\nframework: {framework}\nmodel: {{preset: gpt3-13b}}\nbatch: {{num_micro_batches: 8}}\n"
    with pytest.raises(SpecError) as err:
        parse_job(text, "job.yaml")
    assert str(err.value).startswith(f"{where}: {why}"), str(err.value)
    # the engine builds any order
    assert parse_job(text.replace(f"framework: {framework}", "framework: engine"), "job.yaml").framework == "engine"


def test_only_dimensions_larger_than_one_decide_a_frameworks_order():
    """tp-cp-ep-pp-dp with dp = 1 groups ranks as torchtitan's tp-cp-dp-pp does."""
    text = "parallel: {tp: 8, pp: 4, dp: 1, order: tp-cp-ep-pp-dp}\nframework: torchtitan\nmodel: {preset: gpt3-13b}\n"
    assert parse_job(text + "batch: {num_micro_batches: 8}\n", "job.yaml").order == "tp-cp-ep-pp-dp"


def test_deepspeed_interleaving_is_blamed_on_vpp_not_on_the_micro_batches():
    """DeepSpeed has no interleaved schedule: the cause is parallel.vpp (line 5), not the batch (line 7)."""
    text = ("framework: deepspeed\nmodel: {preset: gpt3-13b}\nparallel:\n  tp: 8\n  vpp: 2\n  pp: 4\nbatch:\n"
            "  num_micro_batches: 8\n")
    with pytest.raises(SpecError) as err:
        parse_job(text, "job.yaml")
    assert str(err.value) == ("job.yaml:5: parallel.vpp: DeepSpeed's pipeline engine runs one non-interleaved "
                              "schedule: it cannot run the job's vpp=2 model chunks per pipeline rank; plan with "
                              "vpp=1 (framework: deepspeed)")


def test_a_preset_with_shape_keys_says_they_cannot_be_combined():
    """README lists layers as a model key: 'unknown key' beside a preset misled; the message says why."""
    with pytest.raises(SpecError) as err:
        parse_job("model:\n  preset: gpt3-13b\n  layers: 41\n", "job.yaml")
    assert str(err.value) == ("job.yaml:3: model.layers: a preset fixes the whole shape, so preset and layers cannot "
                              "be combined: give the preset alone, or the shape keys (layers, hidden, heads, seq_len, "
                              "...) without it")
    with pytest.raises(SpecError, match="job.yaml:3: model.colour: unknown key 'colour' \\(expected one of: preset\\)"):
        parse_job("model:\n  preset: gpt3-13b\n  colour: red\n", "job.yaml")

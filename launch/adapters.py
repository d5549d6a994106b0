"""Framework adapters: the command-line flags that make a training framework build exactly the
rank map's process groups. No torch here.

Every framework below numbers ranks with a fixed digit order (fastest first) over its
parallel sizes; given the map's sizes, its groups equal the map's when its order agrees with
the map's on every dimension of size > 1 (dimensions of size 1 can sit anywhere). A map whose
order a framework cannot express is refused, saying why.

- Megatron-LM / Megatron-Core: ``initialize_model_parallel(order=...)`` builds its groups with
  ``RankGenerator``; Megatron-LM passes ``order="tp-cp-ep-dp-pp"``, or ``"tp-cp-ep-pp-dp"`` with
  ``--use-tp-pp-dp-mapping`` [1]_, [2]_. Its expert groups come from a second generator without a
  CP digit (CP ranks fold into expert data parallelism, Megatron-Core >= 0.10), as the map's do
  (:mod:`rankmap.job.layout`); ``--expert-tensor-parallel-size`` is passed when it differs from tp.
  A map with ``vpp > 1`` (interleaved 1F1B) adds ``--num-virtual-stages-per-pipeline-rank vpp``,
  which sets ``virtual_pipeline_model_parallel_size`` directly (the older
  ``--num-layers-per-virtual-pipeline-stage`` says it in layers; the two exclude each other) [2]_.
- torchtitan: ``ParallelDims`` builds the mesh ``("pp", "dp_replicate", "dp_shard", "cp", "tp")``,
  slowest first, i.e. the order ``tp-cp-dp-pp`` [3]_; its EP is carved out of ``dp_shard`` x
  ``cp``, so ``ep > 1`` is refused. ``vpp > 1`` selects the ``Interleaved1F1B`` schedule, which
  builds 2 stages per rank by default; more take ``pipeline_parallel_layers_per_stage``, from
  which torchtitan counts ``ceil((layers + 2) / layers_per_stage)`` stages (the embedding and the
  output each weigh one layer) [5]_; a vpp no whole layer count gives is refused.
- DeepSpeed: ``PipeModelDataParallelTopology`` has axes ``("pipe", "data", "model")``, slowest
  first, i.e. ``tp-dp-pp`` [4]_; it has no context or expert axis, and its pipeline engine runs
  one non-interleaved schedule (``TrainSchedule``), so ``vpp > 1`` is refused.
- The bundled engine reads the layout from the rank map itself.

References
----------
.. [1] NVIDIA Megatron-LM, ``megatron/core/parallel_state.py``: ``initialize_model_parallel(order=
   "tp-cp-ep-dp-pp")``, ``RankGenerator``. https://github.com/NVIDIA/Megatron-LM
.. [2] NVIDIA Megatron-LM, ``megatron/training/arguments.py`` and ``initialize.py``:
   ``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``, ``--context-parallel-size``,
   ``--expert-model-parallel-size``, ``--use-tp-pp-dp-mapping``,
   ``--num-virtual-stages-per-pipeline-rank`` (``args.virtual_pipeline_model_parallel_size =
   args.num_virtual_stages_per_pipeline_rank``) and ``--num-layers-per-virtual-pipeline-stage``.
.. [3] torchtitan, ``torchtitan/distributed/parallel_dims.py`` (``ParallelDims``) and the
   ``[parallelism]`` job config. https://github.com/pytorch/torchtitan
.. [4] DeepSpeed, ``deepspeed/runtime/pipe/topology.py``: ``PipeModelDataParallelTopology``;
   ``deepspeed/runtime/pipe/schedule.py``: ``TrainSchedule``. https://github.com/deepspeedai/DeepSpeed
.. [5] torchtitan, ``torchtitan/distributed/pipeline_parallel.py`` (``pipeline_llm``: stages per
   rank 2 for a multi-stage schedule without ``pipeline_parallel_layers_per_stage``; with it,
   ``ceil((n_layers + input_weight + output_weight) / layers_per_stage)`` virtual stages, weights
   ``pipeline_parallel_first/last_stage_less_layers``, default 1).
"""

from __future__ import annotations

from rankmap.errors import LaunchError
from rankmap.job.frameworks import effective_order, layout_rule
from rankmap.job.rank_map import RankMap

__all__ = ["FRAMEWORKS", "MEGATRON_ORDERS", "framework_flags", "effective_order"]

FRAMEWORKS = ("megatron", "torchtitan", "deepspeed", "engine")
# Megatron-LM's two orders: the default, and the one --use-tp-pp-dp-mapping selects.
MEGATRON_ORDERS = {"tp-cp-ep-dp-pp": (), "tp-cp-ep-pp-dp": ("--use-tp-pp-dp-mapping",)}


def _express(rm: RankMap, framework: str) -> tuple:
    """Refuse a map ``framework`` cannot build (:func:`rankmap.job.frameworks.layout_rule`, the rule
    a job naming that framework is held to when it is planned); else the extra flags of the first
    of its orders equivalent to the map's (Megatron-LM's ``--use-tp-pp-dp-mapping``)."""
    job = rm.job
    sizes = job.sizes()
    rule = layout_rule(framework, sizes, job.order, job.virtual_stages, subject="the map")
    if rule:
        raise LaunchError(rule[1])
    if framework != "megatron":
        return ()
    want = effective_order(job.order, sizes)
    return next(extra for order, extra in MEGATRON_ORDERS.items() if effective_order(order, sizes) == want)


def megatron_flags(rm: RankMap) -> list[str]:
    """Megatron-LM flags for the map's sizes and order (see the module docstring)."""
    job = rm.job
    extra = _express(rm, "megatron")
    etp = ["--expert-tensor-parallel-size", str(job.etp)] if job.etp not in (None, job.tp) else []
    vpp = ["--num-virtual-stages-per-pipeline-rank", str(job.virtual_stages)] if _interleaved(job) else []
    return ["--tensor-model-parallel-size", str(job.tp), "--pipeline-model-parallel-size", str(job.pp),
            "--context-parallel-size", str(job.cp), "--expert-model-parallel-size", str(job.ep), *etp, *vpp,
            *extra]


def _interleaved(job) -> bool:
    """The map runs the interleaved 1F1B schedule (model chunks per pipeline rank > 1)."""
    return job.virtual_stages > 1 and job.pp > 1


def _torchtitan_pipeline(job) -> list[str]:
    """torchtitan flags for ``vpp`` stages per pipeline rank (see the module docstring)."""
    if not _interleaved(job):
        return []
    flags = ["--parallelism.pipeline_parallel_schedule", "Interleaved1F1B"]
    if job.virtual_stages == 2:
        return flags                      # the multi-stage default: 2 stages per rank
    stages = job.pp * job.virtual_stages
    weighted = job.model.layers + 2       # the embedding and the output weigh one layer each
    per_stage = -(-weighted // stages)
    if -(-weighted // per_stage) != stages:
        raise LaunchError(f"torchtitan cannot build vpp={job.virtual_stages} stages per rank from the model's "
                          f"{job.model.layers} layers on pp={job.pp}: it counts ceil((layers + 2) / "
                          f"layers_per_stage) stages, and no whole layers_per_stage gives {stages}")
    return flags + ["--parallelism.pipeline_parallel_layers_per_stage", str(per_stage)]


def torchtitan_flags(rm: RankMap) -> list[str]:
    """torchtitan ``[parallelism]`` overrides (one replicate group: FSDP over all of DP)."""
    job = rm.job
    _express(rm, "torchtitan")
    return ["--parallelism.tensor_parallel_degree", str(job.tp), "--parallelism.pipeline_parallel_degree",
            str(job.pp), "--parallelism.context_parallel_degree", str(job.cp),
            "--parallelism.data_parallel_shard_degree", str(job.dp), "--parallelism.data_parallel_replicate_degree",
            "1", *_torchtitan_pipeline(job)]


def deepspeed_flags(rm: RankMap) -> list[str]:
    """Megatron-DeepSpeed flags; DeepSpeed's pipeline topology is tp-dp-pp."""
    job = rm.job
    _express(rm, "deepspeed")
    return ["--tensor-model-parallel-size", str(job.tp), "--pipeline-model-parallel-size", str(job.pp)]


def framework_flags(rm: RankMap, framework: str) -> str:
    """One line of flags that make ``framework`` build the map's groups.

    Parameters
    ----------
    rm : RankMap
    framework : {"megatron", "torchtitan", "deepspeed", "engine"}

    Returns
    -------
    str
        Space-separated flags (``engine``: ``--rankmap PATH`` is all it needs, so ``""``).

    Raises
    ------
    LaunchError
        An unknown framework, or an order or dimension it cannot express (the reason is named).

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> rm = RankMap(job=JobSpec(tp=2, pp=2, dp=2, num_micro_batches=2, order="tp-cp-ep-pp-dp"),
    ...              cluster_name="c", cluster_hash="x", hosts=("a", "b"), tor_groups=("t", "t"),
    ...              rails=((0, 1, 2, 3),) * 2, nproc_per_node=4)
    >>> framework_flags(rm, "megatron")
    '--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --context-parallel-size 1 --expert-model-parallel-size 1 --use-tp-pp-dp-mapping'
    >>> framework_flags(rm, "deepspeed")
    Traceback (most recent call last):
    ...
    rankmap.errors.LaunchError: DeepSpeed cannot build the map's groups: the map orders ranks tp-cp-ep-pp-dp (fastest first; dimensions of size > 1: tp-pp-dp), DeepSpeed only tp-dp-pp; plan with --order tp-dp-pp
    """
    makers = {"megatron": megatron_flags, "torchtitan": torchtitan_flags, "deepspeed": deepspeed_flags,
              "engine": lambda _rm: []}
    if framework not in makers:
        raise LaunchError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    return " ".join(makers[framework](rm))

"""Which framework trains a job, and the rules that differ between frameworks.

A job names its framework (:data:`FRAMEWORKS`: rankmap's own ``engine`` on torch.distributed,
Megatron-LM / Megatron-Core, torchtitan, DeepSpeed) and optionally its release. The rules
here follow it, and their messages say whose rule applies: the interleaved-pipeline
micro-batch rule (:func:`interleaved_rule`) and which Megatron-Core builds expert groups by
parallel folding (:data:`FOLDING_SINCE`, see :mod:`rankmap.job.generators`).
"""

from __future__ import annotations

__all__ = ["FRAMEWORKS", "DEFAULT_FRAMEWORK", "FOLDING_SINCE", "FRAMEWORK_NAMES", "FRAMEWORK_ORDERS", "release",
           "interleaved_rounds", "interleaved_rule", "virtual_stages_rule", "effective_order", "layout_rule"]

FOLDING_SINCE = (0, 10)   # Megatron-Core release that builds expert groups with their own generator
FRAMEWORKS = ("engine", "megatron", "torchtitan", "deepspeed")
DEFAULT_FRAMEWORK = "engine"
FRAMEWORK_NAMES = {"engine": "rankmap's engine", "megatron": "Megatron-LM", "torchtitan": "torchtitan",
                   "deepspeed": "DeepSpeed"}
#: Rank orders (fastest first) each framework builds its groups in; the engine reads any order from the map.
#: Megatron-LM: the default and ``--use-tp-pp-dp-mapping`` (``megatron/core/parallel_state.py``
#: ``RankGenerator``); torchtitan: ``ParallelDims``' mesh ``(pp, dp_replicate, dp_shard, cp, tp)``
#: (``torchtitan/distributed/parallel_dims.py``); DeepSpeed: ``PipeModelDataParallelTopology``'s axes
#: ``(pipe, data, model)`` (``deepspeed/runtime/pipe/topology.py``).
FRAMEWORK_ORDERS = {"megatron": ("tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"), "torchtitan": ("tp-cp-dp-pp",),
                    "deepspeed": ("tp-dp-pp",)}


def effective_order(order: str, sizes: dict) -> tuple[str, ...]:
    """The order's dimensions of size > 1, fastest first: what decides the groups.

    Examples
    --------
    >>> effective_order("tp-cp-ep-dp-pp", {"tp": 8, "cp": 1, "ep": 1, "dp": 4, "pp": 2})
    ('tp', 'dp', 'pp')
    """
    return tuple(d for d in order.split("-") if sizes.get(d, 1) > 1)


def layout_rule(framework: str, sizes: dict, order: str, vpp: int = 1,
                subject: str = "the job") -> tuple[str, str] | None:
    """Why ``framework`` cannot build the groups of a job of ``sizes`` (``{dim: size}`` for tp, cp,
    ep, dp, pp) ranked in ``order`` with ``vpp`` model chunks per pipeline rank, as
    ``(parallel key to blame, reason)``; None when it can. ``subject`` names the job in the
    reason ("the job", "the map").

    - torchtitan carves EP out of its ``dp_shard`` x ``cp`` dimensions, not from a digit of its
      own, and builds only the order ``tp-cp-dp-pp`` (``ParallelDims``).
    - DeepSpeed's ``PipeModelDataParallelTopology`` has axes pipe, data and model only (no CP,
      no EP; order ``tp-dp-pp``), and its pipeline engine has no interleaved schedule.
    - Megatron-LM builds ``tp-cp-ep-dp-pp`` and, with ``--use-tp-pp-dp-mapping``, ``tp-cp-ep-pp-dp``.
    - rankmap's engine builds its groups from the map: any order.

    Only the dimensions of size > 1 decide the groups, so ``tp-cp-ep-pp-dp`` with dp = 1 is
    torchtitan's order too.

    Examples
    --------
    >>> sizes = {"tp": 8, "cp": 1, "ep": 1, "dp": 2, "pp": 4}
    >>> layout_rule("torchtitan", sizes, "tp-cp-ep-pp-dp")[0]
    'order'
    >>> layout_rule("torchtitan", {**sizes, "dp": 1}, "tp-cp-ep-pp-dp") is None
    True
    """
    name = FRAMEWORK_NAMES.get(framework, framework)
    if framework == "torchtitan" and sizes.get("ep", 1) > 1:
        return "ep", (f"torchtitan carves EP out of its dp_shard x cp dimensions, not from a digit of its own: it "
                      f"cannot build {subject}'s EP groups; plan with ep=1")
    if framework == "deepspeed" and (sizes.get("cp", 1) > 1 or sizes.get("ep", 1) > 1):
        return ("cp" if sizes.get("cp", 1) > 1 else "ep"), (
            f"DeepSpeed's PipeModelDataParallelTopology has axes pipe, data and model only: it cannot build "
            f"{subject}'s CP or EP groups; plan with cp=1 ep=1")
    if framework == "deepspeed" and vpp > 1 and sizes.get("pp", 1) > 1:
        return "vpp", (f"DeepSpeed's pipeline engine runs one non-interleaved schedule: it cannot run {subject}'s "
                       f"vpp={vpp} model chunks per pipeline rank; plan with vpp=1")
    orders = FRAMEWORK_ORDERS.get(framework)
    want = effective_order(order, sizes)
    if orders is None or any(effective_order(o, sizes) == want for o in orders):
        return None
    return "order", (f"{name} cannot build {subject}'s groups: {subject} orders ranks {order} (fastest first; "
                     f"dimensions of size > 1: {'-'.join(want) or 'none'}), {name} only {' or '.join(orders)}; "
                     f"plan with --order {orders[0]}")


def release(text: str | None) -> tuple[int, ...] | None:
    """A framework release ``"0.12"`` as ``(0, 12)``; None stays None (the current release).

    Examples
    --------
    >>> release("0.9") < FOLDING_SINCE <= release("0.10")
    True
    """
    return None if text is None else tuple(int(p) for p in text.split(".") if p.isdigit())


def interleaved_rounds(micro_batches: int, pp: int) -> int:
    """Rounds torch.distributed.pipelining's ``ScheduleInterleaved1F1B`` splits ``micro_batches``
    into, ``max(1, m // pp)`` (torch/distributed/pipelining/schedules.py); it runs only when they
    divide ``micro_batches``, each round holding ``m / rounds``.

    >>> interleaved_rounds(10, 4), interleaved_rounds(3, 4)
    (2, 1)
    """
    return max(1, micro_batches // pp)


def virtual_stages_rule(framework: str, pp: int, vpp: int) -> str | None:
    """Why ``vpp`` model chunks per pipeline rank cannot run with ``pp`` stages (None: they can).

    Interleaving needs a pipeline: every framework refuses (or would silently drop) vpp > 1
    with pp = 1.

    - Megatron-LM: ``validate_args`` in ``megatron/training/arguments.py`` asserts "When
      interleaved schedule is used, pipeline-model-parallel size should be greater than 1"
      once virtual stages are given (``--num-virtual-stages-per-pipeline-rank``), and > 2 when
      ``--no-overlap-p2p-communication`` turns the default P2P overlap off (rankmap's flags
      keep it on); Megatron-Core's ``initialize_model_parallel``
      (``megatron/core/parallel_state.py``) raises the same for
      ``virtual_pipeline_model_parallel_size`` with ``pipeline_model_parallel_size`` < 2.
    - torchtitan and rankmap's engine (torch.distributed.pipelining): with pp = 1 no
      pipeline is built, so the virtual stages would be ignored.
    - DeepSpeed: no interleaved schedule at all (:func:`interleaved_rule`).

    Examples
    --------
    >>> print(virtual_stages_rule("megatron", 1, 2))
    vpp=2 needs pp > 1, got pp=1: Megatron-LM's validate_args refuses an interleaved schedule without a pipeline ("When interleaved schedule is used, pipeline-model-parallel size should be greater than 1")
    >>> virtual_stages_rule("engine", 2, 2) is None
    True
    """
    if vpp <= 1 or pp > 1:
        return None
    why = {"megatron": "Megatron-LM's validate_args refuses an interleaved schedule without a pipeline "
                       "(\"When interleaved schedule is used, pipeline-model-parallel size should be greater than 1\")",
           "deepspeed": "DeepSpeed's pipeline engine has no interleaved schedule"}.get(
        framework, f"torch.distributed.pipelining ({framework}) builds no pipeline for pp=1, so the virtual stages "
                   "would be ignored")
    return f"vpp={vpp} needs pp > 1, got pp={pp}: {why}"


def interleaved_rule(framework: str, pp: int, vpp: int, micro_batches: int) -> str | None:
    """Why ``framework`` cannot run an interleaved pipeline of ``micro_batches`` (None: it can).

    - Megatron-LM (``megatron``; also DeepSpeed's Megatron fork) needs a multiple of pp:
      ``forward_backward_pipelining_with_interleaving`` in
      ``megatron/core/pipeline_parallel/schedules.py`` refuses other counts.
    - torch.distributed.pipelining's ``ScheduleInterleaved1F1B`` (``engine`` and
      ``torchtitan``) runs ``rounds = max(1, m // pp)`` rounds and needs ``m % rounds == 0``
      (torch/distributed/pipelining/schedules.py): 10 micro-batches on pp=4 run 2 rounds of 5.
    - DeepSpeed's pipeline engine has no interleaved schedule.

    Examples
    --------
    >>> interleaved_rule("engine", 4, 2, 10) is None, interleaved_rule("engine", 4, 2, 11) is not None
    (True, True)
    >>> print(interleaved_rule("megatron", 4, 2, 10))
    Megatron-LM's interleaved schedule (vpp=2) needs micro-batches per pipeline (10) divisible by pp=4
    """
    if vpp <= 1 or pp <= 1:
        return None
    if framework == "deepspeed":
        return f"DeepSpeed's pipeline engine has no interleaved schedule: vpp={vpp} needs another framework"
    if framework == "megatron":
        if micro_batches % pp:
            return (f"Megatron-LM's interleaved schedule (vpp={vpp}) needs micro-batches per pipeline "
                    f"({micro_batches}) divisible by pp={pp}")
        return None
    rounds = interleaved_rounds(micro_batches, pp)
    if micro_batches % rounds:
        return (f"torch.distributed.pipelining's interleaved 1F1B ({framework}, vpp={vpp}) runs max(1, m // pp) = "
                f"{rounds} rounds and needs micro-batches per pipeline ({micro_batches}) divisible by them")
    return None

"""Which framework trains a job, and the rules that differ between frameworks.

A job names its framework (:data:`FRAMEWORKS`: rankmap's own ``engine`` on torch.distributed,
Megatron-LM / Megatron-Core, torchtitan, DeepSpeed) and optionally its release. The rules
here follow it, and their messages say whose rule applies: the interleaved-pipeline
micro-batch rule (:func:`interleaved_rule`) and which Megatron-Core builds expert groups by
parallel folding (:data:`FOLDING_SINCE`, see :mod:`rankmap.job.generators`).
"""

from __future__ import annotations

__all__ = ["FRAMEWORKS", "DEFAULT_FRAMEWORK", "FOLDING_SINCE", "release", "interleaved_rounds", "interleaved_rule",
           "virtual_stages_rule"]

FOLDING_SINCE = (0, 10)   # Megatron-Core release that builds expert groups with their own generator
FRAMEWORKS = ("engine", "megatron", "torchtitan", "deepspeed")
DEFAULT_FRAMEWORK = "engine"


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

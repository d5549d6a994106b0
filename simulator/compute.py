"""Compute time of a transformer's layers on a GPU: FLOPs, GPU presets and achieved efficiency.

FLOPs (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", SC'21, §5.1): one iteration of a GPT model of ``l`` layers, hidden
size ``h``, sequence length ``s``, vocabulary ``V``, on a batch of ``B`` sequences costs

    F = 72 B s l h^2 (1 + s/(6h) + V/(16 l h))        without activation recomputation,
    F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))        with full recomputation

(forward = 1/3 of the first, the backward pass twice the forward; full recomputation
adds one more forward, Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", MLSys'23, §2). Model FLOPs utilisation (MFU) counts the first only.
Per layer and micro-batch of ``b`` sequences the forward GEMM/attention work is
``24 b s h^2 (1 + s/(6h))``; the logit layer's share of the formula,
``24 b s h^2 l * V/(16 l h) = 1.5 b s h V`` forward, runs in the model's last chunk (on the
last pipeline stage; with interleaving, only that stage's last chunk).
A rank of a tensor-parallel group of ``tp`` does ``1/tp`` of it.

Elementwise kernels (layer norms, GeLU, dropout, residual adds, softmax) are memory bound:
their time here is the bytes of the activations Korthikanti et al. (MLSys'23, §4.1, eq. 1)
count per layer, ``s b h (34 + 5 a s / h)`` bytes (``a`` heads), read once forward and
twice backward, over HBM bandwidth times ``efficiency_elementwise`` (an assumption of this
model: the kernels touch about the bytes kept for the backward pass). The optimizer step
reads and writes ``optimizer_bytes_per_param`` bytes (assumed 32: fp32 master weight,
Adam's two moments and the gradient read and written, plus the bf16 copy) of each
parameter the rank updates, over HBM bandwidth.

GPU presets: peak dense BF16 tensor-core throughput and HBM bandwidth from the vendor
datasheets (sparsity figures halved where the datasheet lists only those):

- A100 SXM 80GB: 312 TFLOP/s, 2,039 GB/s (NVIDIA A100 Tensor Core GPU datasheet, 2021).
- H100 SXM: 989 TFLOP/s (datasheet: 1,979 with sparsity), 3.35 TB/s (NVIDIA H100 datasheet).
- H200 SXM: 989 TFLOP/s, 4.8 TB/s (NVIDIA H200 datasheet; same compute as H100 SXM).
- B200: 2,250 TFLOP/s (NVIDIA DGX B200 datasheet: 72 PFLOP/s FP8 training per 8 GPUs is
  9 per GPU with sparsity; dense halves it, BF16 halves FP8: 9/4 = 2.25 PFLOP/s), 8 TB/s.

These figures were taken from the datasheets as the project's domain notes quote them;
they were not re-read against the PDFs when this module was written.

Efficiency defaults are assumptions, not measurements: ``efficiency_gemm`` 0.65 is the one
factor fitted to Megatron-LM's GPT 175B point (153 TFLOP/s per A100, Narayanan et al.
SC'21, Table 1) with that run's setup (tests/simulator/test_calibration.py), which then
predicts its 1T point within 3%; ``efficiency_elementwise`` 0.7 of HBM bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rankmap.job.spec import Hardware, JobSpec

__all__ = ["GpuSpec", "GPUS", "ComputeConfig", "StageTimes", "iteration_flops", "model_flops",
           "layer_forward_flops", "stage_times"]


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """One GPU model: ``peak_tflops`` dense BF16 (TFLOP/s) and ``hbm_tbps`` (TB/s); ``source``: datasheet."""

    name: str
    peak_tflops: float
    hbm_tbps: float
    source: str = ""


GPUS: dict[str, GpuSpec] = {
    "a100": GpuSpec(name="A100 SXM", peak_tflops=312.0, hbm_tbps=2.039,
                    source="NVIDIA A100 Tensor Core GPU datasheet (80GB SXM)"),
    "h100": GpuSpec(name="H100 SXM", peak_tflops=989.0, hbm_tbps=3.35, source="NVIDIA H100 Tensor Core GPU datasheet"),
    "h200": GpuSpec(name="H200 SXM", peak_tflops=989.0, hbm_tbps=4.8, source="NVIDIA H200 Tensor Core GPU datasheet"),
    "b200": GpuSpec(name="B200", peak_tflops=2250.0, hbm_tbps=8.0, source="NVIDIA DGX B200 datasheet (per GPU)"),
}


@dataclass(frozen=True, kw_only=True)
class ComputeConfig:
    """How fast a GPU runs the job's kernels.

    Attributes
    ----------
    gpu : str
        A key of :data:`GPUS`.
    efficiency_gemm : float
        Achieved fraction of peak for GEMM and attention kernels (0.65, fitted; see module).
    efficiency_elementwise : float
        Achieved fraction of HBM bandwidth for elementwise kernels (assumed 0.7).
    recompute : bool
        Full activation recomputation: one more forward per backward.
    optimizer_step_s : float or None
        Time of the optimizer step; None derives it from HBM bandwidth (see module).
    optimizer_bytes_per_param : float
        HBM bytes the optimizer moves per parameter it updates (assumed 32).
    data_loading_s : float
        Seconds to load an iteration's batch before the first forward, inside the iteration,
        beside which the first model chunk's parameter all-gather runs (MegaScale, NSDI'24,
        §3.2); 0 (default, no published figure: the data loader prefetched the batch): that
        all-gather runs under the first forward, bucket by bucket.
    """

    gpu: str = Hardware.gpu                    # the job spec's defaults: one place for the fitted 0.65
    efficiency_gemm: float = Hardware.efficiency_gemm
    efficiency_elementwise: float = Hardware.efficiency_elementwise
    recompute: bool = Hardware.recompute
    optimizer_step_s: float | None = Hardware.optimizer_step_s
    optimizer_bytes_per_param: float = 32.0
    data_loading_s: float = 0.0

    def __post_init__(self) -> None:
        if self.gpu not in GPUS:
            raise ValueError(f"gpu must be one of {', '.join(GPUS)}, got {self.gpu!r}")
        for name in ("efficiency_gemm", "efficiency_elementwise"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)!r}")
        if self.optimizer_step_s is not None and not self.optimizer_step_s >= 0:
            raise ValueError(f"optimizer_step_s must be >= 0, got {self.optimizer_step_s!r}")
        if not 0 <= self.data_loading_s < float("inf"):
            raise ValueError(f"data_loading_s must be >= 0, got {self.data_loading_s!r}")

    @property
    def spec(self) -> GpuSpec:
        return GPUS[self.gpu]


@dataclass(frozen=True, kw_only=True)
class StageTimes:
    """Compute seconds of one pipeline stage per micro-batch and model chunk.

    Attributes
    ----------
    forward_s, backward_s : tuple of float
        ``[pp]``: one micro-batch's pass through one chunk of stage ``i`` (backward includes
        recomputation when on), the logit layer left out.
    optimizer_s : float
        The optimizer step after the last gradient reduction.
    source : str
        ``"flops"`` or ``"workload"`` (measured times imported from AICB/SimAI).
    logit_forward_s, logit_backward_s : float
        The logit layer of one micro-batch, which only the model's last chunk runs (0 for a
        workload's measured times, which include it in every pass).
    """

    forward_s: tuple
    backward_s: tuple
    optimizer_s: float
    source: str = field(default="flops")
    logit_forward_s: float = 0.0
    logit_backward_s: float = 0.0


def _layer_shape(job: JobSpec) -> tuple[int, int, int, int, int]:
    m = job.model
    return job.micro_batch_size, m.seq_len // job.cp, m.hidden, m.layers, m.vocab


def layer_forward_flops(job: JobSpec) -> float:
    """Forward FLOPs of one transformer layer on one micro-batch, whole layer (all TP ranks).

    ``24 b s h^2 (1 + s/(6h))`` (Narayanan et al. SC'21, §5.1), ``s`` the sequence per CP rank.

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> f"{layer_forward_flops(JobSpec(tp=8, pp=8, dp=1, num_micro_batches=1)):.4g}"
    '7.628e+12'
    """
    b, s, h, _, _ = _layer_shape(job)
    return 24 * b * s * h * h * (1 + s / (6 * h))


def iteration_flops(job: JobSpec, recompute: bool = False) -> float:
    """FLOPs of one iteration: ``(72 or 96) B s l h^2 (1 + s/(6h) + V/(16 l h))`` (Narayanan et al. SC'21).

    ``recompute`` selects the factor 96 (full activation recomputation).

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> f"{iteration_flops(JobSpec(tp=8, pp=8, dp=16, global_batch_size=1536), recompute=True):.4g}"
    '4.511e+18'
    """
    m = job.model
    batch = job.micro_batch_size * job.micro_batches() * job.sizes()["dp"]
    s, h, l, v = m.seq_len, m.hidden, m.layers, m.vocab
    return (96 if recompute else 72) * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def model_flops(job: JobSpec) -> float:
    """Model FLOPs of one iteration (no recomputation): the numerator of MFU."""
    return iteration_flops(job, recompute=False)


def _elementwise_bytes(job: JobSpec) -> float:
    """Activation bytes of one layer and micro-batch per TP rank (Korthikanti et al. MLSys'23, eq. 1)."""
    b, s, h, _, _ = _layer_shape(job)
    return s * b * h * (34 + 5 * job.model.heads * s / h) / job.tp


def _optimizer_s(job: JobSpec, config: ComputeConfig) -> float:
    if config.optimizer_step_s is not None:
        return config.optimizer_step_s
    params = job.model.params / (job.tp * job.pp)
    if job.data_parallel == "zero":
        params /= job.sizes()["dp"]                       # ZeRO: each DP rank updates its shard
    return params * config.optimizer_bytes_per_param / (config.spec.hbm_tbps * 1e12 * config.efficiency_elementwise)


def stage_times(job: JobSpec, config: ComputeConfig | None = None) -> StageTimes:
    """Per-stage forward and backward time of one micro-batch through one model chunk.

    Parameters
    ----------
    job : JobSpec
        Resolved; ``l / (pp * vpp)`` layers per chunk, the logit layer in the last stage's
        last chunk (``logit_forward_s``, ``logit_backward_s``).
    config : ComputeConfig, optional

    Returns
    -------
    StageTimes

    Examples
    --------
    >>> from rankmap.job.spec import JobSpec
    >>> t = stage_times(JobSpec(tp=8, pp=8, dp=16, global_batch_size=1536), ComputeConfig(efficiency_gemm=0.5))
    >>> round(t.forward_s[0] * 1e3, 1), round(t.backward_s[0] / t.forward_s[0], 2)
    (76.4, 2.0)
    >>> round(t.logit_forward_s * 1e3, 2), t.forward_s[-1] == t.forward_s[0]   # 1.5 b s h V / tp / (0.5 peak)
    (1.52, True)
    """
    config = config or ComputeConfig()
    gpu = config.spec
    flops_s = gpu.peak_tflops * 1e12 * config.efficiency_gemm
    bytes_s = gpu.hbm_tbps * 1e12 * config.efficiency_elementwise
    b, s, h, l, v = _layer_shape(job)
    chunk_layers = l // (job.pp * job.virtual_stages)
    fwd_layer = layer_forward_flops(job) / job.tp / flops_s + _elementwise_bytes(job) / bytes_s
    bwd_layer = 2 * fwd_layer + (fwd_layer if config.recompute else 0.0)
    logit = 1.5 * b * s * h * v / job.tp / flops_s                        # the model's last chunk only
    return StageTimes(forward_s=(chunk_layers * fwd_layer,) * job.pp, backward_s=(chunk_layers * bwd_layer,) * job.pp,
                      optimizer_s=_optimizer_s(job, config), logit_forward_s=logit, logit_backward_s=2 * logit)

"""The per-GPU memory breakdown of a workload: the one entry point that picks the inference
(`memory.inference_breakdown`), training (`training.training_breakdown`) or CPU shape.

`memory.py` holds the components and constants, `training.py` the phases of a training step; this
module sits above both so that neither imports the other's caller.
"""

from __future__ import annotations

from gpuledger.estimate.memory import (
    CPU_BASELINE_MIB,
    CPU_TEMPORARIES_FACTOR,
    MemoryBreakdown,
    inference_breakdown,
)
from gpuledger.estimate.training import training_breakdown
from gpuledger.estimate.workload import Workload
from gpuledger.models import ModelConfig, count_params, load_config


def memory_breakdown(w: Workload) -> MemoryBreakdown:
    """Returns the per-GPU memory breakdown (bytes) of workload `w`."""
    cfg = load_config(w.model)
    pc = count_params(cfg)
    m = MemoryBreakdown(params_total=pc.total, exact=pc.exact)
    if not pc.exact:
        m.assumptions.append(pc.note)
    if w.device == "cpu":
        return _cpu_breakdown(w, cfg, pc.total, m)
    if w.method == "inference":
        return inference_breakdown(w, cfg, pc.total, m)
    return training_breakdown(w, cfg, pc.total, m)


def _cpu_breakdown(w: Workload, cfg: ModelConfig, total: int, m: MemoryBreakdown) -> MemoryBreakdown:
    """A CPU run of the numpy demo trainer: fp32 everywhere, no flash attention, no checkpointing;
    `device` = resident set size (RSS) including the interpreter baseline."""
    cw = w.model_copy(update={"precision": "fp32", "flash_attn": False, "grad_ckpt": False,
                              "device": "gpu", "gpus": 1, "sharding": "none", "framework": "litgpt"})
    g = inference_breakdown(cw, cfg, total, m) if w.method == "inference" else training_breakdown(cw, cfg, total, m)
    g.extra_device = CPU_BASELINE_MIB * 2**20
    g.overhead = 0.0  # numpy frees to malloc; RSS tracks live arrays closely
    g.activations *= CPU_TEMPORARIES_FACTOR
    g.logits *= CPU_TEMPORARIES_FACTOR
    g.assumptions.append(
        f"device=cpu: fp32 numpy run, no flash attention or checkpointing; `device` is resident memory: "
        f"a {CPU_BASELINE_MIB:.0f} MiB Python+numpy baseline + arrays, activations x{CPU_TEMPORARIES_FACTOR} "
        f"for numpy temporaries (calibrated on the demo trainer: 61 MiB at micro-batch 8, 120 MiB at 32)")
    return g

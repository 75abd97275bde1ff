"""The assumptions a plan states (every number it prints has a source)."""

from __future__ import annotations

import polars as pl

from gpuledger.plan.estimates import SHARDING_RULE
from gpuledger.plan.settings import PlanSettings


def plan_assumptions(s: PlanSettings, candidates: pl.DataFrame, offers: pl.DataFrame, accel: pl.DataFrame) -> list[str]:
    """Returns the plan's assumptions, one sentence each."""
    from gpuledger.plan.formats import fmt_duration

    local = s.launcher == "local"
    a = []
    if not local:
        a.append(f"usable GPU memory = nvidia-smi total × {s.memory_safety_fraction} − {s.memory_reserve_gib} GiB "
                 "(fragmentation, NCCL/cuBLAS buffers); a trial fits when the estimator's device-level memory is within it")
    a.append(f"overhead per trial: provisioning {fmt_duration(s.provisioning_s)} + set-up {fmt_duration(s.setup_s)}, billed")
    if not local:
        a += [
            "compute time = the training-step model of `gpuledger estimate --tokens` (gpuledger/estimate/throughput.py: "
            "matmuls, attention, memory-bound work, optimizer pass, per-step costs and communication of the workload's "
            "stack on each GPU kind and count; coefficients and sources in gpuledger/estimate/coefficients.py), plus "
            "the whole run's own costs (gpuledger.estimate.run_overheads_s: reading the checkpoint, the saves, a "
            "compile warm-up, and the evaluations train.eval_steps / eval_samples state, as forward passes at the "
            "step's rate; none when the spec states none)",
            "an instance is paid whole: a trial on an instance with more GPUs than it uses pays for all of them (no packing)",
            SHARDING_RULE,
        ]
        if not accel.is_empty():
            a.append("time from " + ", ".join(sorted(set(accel["time_source"].to_list()))))
    if s.spot != "never":
        ck = (f"half the checkpoint interval ({fmt_duration(s.checkpoint_interval_s)})" if s.checkpoint_interval_s is not None
              else "half the trial's compute (trials are not assumed to checkpoint)")
        a.append(
            f"spot: expected time = T0 + rate × T0 × (restart {fmt_duration(s.restart_s)} + lost work = {ck}); "
            f"chosen only when cheaper AND the deadline holds at {s.deadline_confidence:.0%} confidence "
            "(preemptions ~ Poisson(rate × T0))"
        )
        rates = candidates.filter(pl.col("spot")).select("cloud", "accelerator", "preemptions_per_hour", "preemption_source").unique().sort("cloud", "accelerator")
        for r in rates.head(12).iter_rows(named=True):
            a.append(f"preemption rate {r['cloud']}/{r['accelerator']}: {r['preemptions_per_hour']:g}/h ({r['preemption_source']})")
        if rates.height > 12:
            a.append(f"... and {rates.height - 12} more (cloud, accelerator) preemption rates from gpuledger/catalog/preemption.csv")
        sus = offers.filter(pl.col("spot_suspicious"))
        if sus.height:
            a.append(f"{sus.height} spot prices flagged suspicious (exactly 10% of on-demand, spot >= on-demand, "
                     "below 8%, or an outlier far below its instance type's other regions) and not used: those "
                     "offers are planned on-demand only")
    from gpuledger.catalog.floors import billed_notes, offer_notes

    if not local:
        a += offer_notes(offers if s.spot != "never" else offers.drop("spot_problem", strict=False))
        a += billed_notes(offers, s.billed_rates)
    if s.spot == "always":
        a.append("spot: always (spec) — only spot offers considered")
    elif s.spot == "never" and not local:
        a.append("spot: never (spec) — only on-demand offers considered")
    if s.target is not None:
        a.append("what-if: the sweep stops launching once objective.target is reached; trials in flight then run "
                 "to completion and are paid; which trial reaches it is unknown, so time and cost are averaged "
                 "over every position (uniform prior), trials launched longest first")
    else:
        a.append("what-if: no objective.target, every trial runs (cost is the same for every K unless slots share "
                 "cores); time-to-recipe is averaged over which trial turns out best (uniform prior), trials "
                 "launched longest first")
    return a


def lengths_unstated(spec) -> bool:
    """True when a fine-tune's spec counts its data in train.samples and states neither train.padding nor
    train.sample_tokens of an unpacked run: planned at the cap (`throughput.resolved_padding`), its time band's
    P10 reaches what the typical lengths would take (`plan.bands.with_bands`)."""
    t = getattr(spec, "train", None)
    return bool(t is not None and t.samples is not None and not t.packing and t.padding == "max_length"
                and "padding" not in t.model_fields_set and t.sample_tokens is None
                and getattr(spec, "method", "lora") in ("full", "lora", "qlora"))


def stack_notes(spec) -> list[str]:
    """Returns what the plan assumed of a stack `train.framework` named (`axolotl`, `unsloth`, ...): the engine
    it is timed and sized as, and the stack's own defaults it took (`gpuledger.estimate.workload.stack_note`)."""
    from gpuledger.estimate.workload import stack_note

    t = getattr(spec, "train", None)
    if t is None or not getattr(t, "stack", None):
        return []
    return [f"train.framework {t.stack}: {stack_note(t.framework, t.stack)}"]


def sample_lengths_notes(spec) -> list[str]:
    """Returns what the plan assumed of the samples' lengths when the spec counts its data in train.samples
    (`throughput.resolved_padding`): the cap when neither padding nor the mean is stated, with the share of
    those positions the typical lengths padded per micro-batch would take instead."""
    from gpuledger.estimate.coefficients import DEFAULT_SAMPLE_TOKENS
    from gpuledger.estimate.throughput import padding_factors

    t = spec.train
    if t.samples is None or t.packing or t.padding != "max_length" or getattr(spec, "method", "lora") not in (
            "full", "lora", "qlora"):
        return []
    if not lengths_unstated(spec):
        return [f"train.samples padded to train.seq_len {t.seq_len} (train.padding max_length): each sample costs "
                f"{t.seq_len} positions"]
    share = padding_factors(t.micro_batch, False, t.seq_len, None, "longest")[1]
    return [f"train.samples with neither train.padding nor train.sample_tokens: each sample planned at train.seq_len "
            f"{t.seq_len} positions (padding max_length, the most a sample can cost: the budget's safe side); samples "
            f"of a typical instruction set (mean {DEFAULT_SAMPLE_TOKENS} tokens) padded to the longest of a micro-batch "
            f"of {t.micro_batch} would take ~{share:.0%} of those positions; train.sample_tokens (the data's mean) or "
            "train.padding longest | packed says which; each trial's time band reaches down to the typical lengths' time at its P10"]


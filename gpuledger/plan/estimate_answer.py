"""The answer to "what does this setup need, and on which GPU": `gpuledger estimate --json`'s object, for
every face (`Ledger.estimate_answer`: the CLI's `estimate`, the MCP tool `estimate`, notebooks).

The estimate's memory, parameters and FLOPs (`gpuledger.estimate.estimate`), with: `warnings` (the options go
beyond any GPU of the catalog or beyond the model's context), `memory_band` (the device memory's P10-P90 from
its cell's measured error, gpuledger/estimate/bands.py), `calibration` (the correction the team's measured runs
on the named GPU family teach), and with `tokens`: `options` (one per GPU kind x count: fits, time, $;
gpuledger/plan/gpu_table.py), `sample_lengths` and `run_costs`. The team's runs are read from the warehouse
unless `calibration` is False (and never on the CPU).
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError
from gpuledger.spec.strict import MAX_COUNT

#: most training tokens an estimate's GPU table takes
MAX_TOKENS = float(MAX_COUNT)


def band_table(workload, calibration: bool = True, warehouse: str | Path | None = None):
    """Returns the bands' table: the public rows, plus the team's measured runs in the warehouse (none
    without `calibration` or on the CPU)."""
    from gpuledger.estimate import bands
    from gpuledger.estimate import calibration as calib

    if not calibration or workload.device != "gpu":
        return bands.public_table()
    return bands.table_with_runs(calib.load_runs(warehouse))


def beyond_limits(est) -> list[str]:
    """Returns a sentence for each way the options go beyond what exists: memory per GPU beyond the
    largest GPU of the catalog (gpus.csv), tokens per sequence beyond the model's context
    (its config's max_position_embeddings)."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.models import load_config

    w, out = est.workload, []
    if w.device == "gpu":
        largest = max(gpu_kinds().values(), key=lambda k: k.memory_gib)
        need = est.memory_gib["device"]
        if need > largest.memory_gib:
            out.append(f"beyond any GPU: {need:,.1f} GiB per GPU; the largest in the catalog, {largest.name}, "
                       f"has {largest.memory_gib:,.1f} GiB (gpus.csv)")
    context = load_config(w.model).max_position_embeddings
    tokens = (w.prompt_len or 0) + (w.completion_len or 0) if w.prompt_len or w.completion_len else w.seq_len
    what = "--prompt-len + --completion-len" if w.prompt_len or w.completion_len else "--seq"
    if context and tokens > context:
        out.append(f"beyond the model's context: {what} is {tokens:,} tokens; {w.model} reads at most "
                   f"{context:,} (max_position_embeddings)")
    return out


def calibration_of(est, accelerator: str | None, calibration: bool = True,
                   warehouse: str | Path | None = None) -> tuple[Any, str]:
    """Returns (the memory Correction or None, the sentence every output carries about it)."""
    from gpuledger.estimate import calibration as calib

    w = est.workload
    if not calibration:
        return None, "not calibrated (--no-calibration)"
    if w.device != "gpu":
        return None, "not calibrated (CPU run)"
    if not accelerator:
        return None, "not calibrated: give --accelerator to apply what your measured runs on that GPU family teach"
    runs = calib.load_runs(warehouse)
    family = calib.accelerator_family(accelerator)
    c = calib.fit(runs, w.method, w.framework, family)
    if c is None:
        have = calib.matching_runs(runs, w.method, w.framework, family)
        return None, (f"not calibrated: {have} of your measured runs match {w.method}/{w.framework}/{family} "
                      f"({calib.MIN_RUNS} needed)")
    return c, c.describe()


def memory_band(est, accelerator: str | None, calibration: bool = True,
                warehouse: str | Path | None = None) -> dict | None:
    """Returns the band of the device-level memory (its cell's measured error, with the team's runs when
    `accelerator` names the GPU; else any family and the public rows): {device_gib: {p10, p50, p90},
    **Band.to_json()}; None on the CPU."""
    from gpuledger.estimate.bands import band_for, public_table

    w = est.workload
    if w.device != "gpu":
        return None
    # the warehouse is read only when a GPU is named (as for the memory correction): a plain estimate
    # stays off DuckDB
    table = band_table(w, calibration, warehouse) if accelerator else public_table()
    b = band_for("memory", w.framework, w.method, w.precision, w.gpus, accelerator, table=table)
    return {"device_gib": {k: round(v, 3) for k, v in b.of(est.memory_gib["device"]).items()}, **b.to_json()}


def gpu_options_for(workload, tokens: float, accelerators: list[str] | None = None, calibration: bool = True,
                    warehouse: str | Path | None = None) -> list[dict[str, Any]]:
    """Returns the options of `gpu_options` for `tokens` training tokens, their times corrected and their
    bands widened by what the team's runs taught (unless `calibration` is False); UserError for a bad
    number of tokens or an unknown GPU kind."""
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator
    from gpuledger.catalog.pricing import load_offers
    from gpuledger.estimate.calibration import time_corrections
    from gpuledger.plan.gpu_table import gpu_options

    if isinstance(tokens, bool) or not isinstance(tokens, numbers.Real) or not 0 < tokens <= MAX_TOKENS:
        raise UserError(f"tokens: {tokens!r} is not a number of tokens above 0 and at most {MAX_TOKENS:.0e}")
    try:
        kinds = [normalize_accelerator(a) for a in (accelerators or [])]
    except UnknownAccelerator as err:
        raise UserError(f"accelerator: {err}") from None
    corrections = time_corrections(workload, warehouse) if calibration else {}
    return gpu_options(workload, tokens, load_offers(), kinds or None, time_corrections=corrections,
                       band_table=band_table(workload, calibration, warehouse))


def estimate_answer(est, *, tokens: float | None = None, accelerators: list[str] | None = None,
                    calibration: bool = True, warehouse: str | Path | None = None) -> dict[str, Any]:
    """Returns `gpuledger estimate --json`'s object for the estimate `est` (see the module)."""
    from gpuledger.estimate import run_costs_note, sample_lengths_note

    w = est.workload
    options = (gpu_options_for(w, tokens, accelerators, calibration, warehouse) if tokens is not None else None)
    accelerator = accelerators[0] if accelerators else None
    corr, sentence = calibration_of(est, accelerator, calibration, warehouse)
    mband = memory_band(est, accelerator, calibration, warehouse)
    out = {**est.to_json(), "warnings": beyond_limits(est)}
    if mband is not None:
        out["memory_band"] = mband
    out["calibration"] = {"applied": corr is not None, "note": sentence}
    if corr is not None:
        out["calibration"].update(factor=round(corr.factor, 4), runs=corr.runs, group=list(corr.group),
                                  device_gib=round(est.memory_gib["device"] * corr.factor, 4))
    if options is not None:
        out["tokens"] = tokens
        out["options"] = options
        out["sample_lengths"] = sample_lengths_note(w)
        out["run_costs"] = run_costs_note(w)
    return out

"""The plan's bands (gpuledger/plan/bands.py) and its decisions at budget.confidence: the budget guard,
the deadline check and the spot choice at P90 by default, P50 when asked, each saying which."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.errors import BudgetExceeded, UserError
from gpuledger.plan import budget_guard, plan_sweep, render_plan
from gpuledger.spec import expand_trials, load_spec

ROOT = Path(__file__).resolve().parents[2]
BASE = (ROOT / "specs" / "llama3-8b-lora-cloud.yaml").read_text()


def _spec(tmp_path, budget: str, name="bands.yaml", pool="auto", gpus="auto", accelerators=None):
    text = BASE.replace("budget: {max_usd: 300, deadline: 8h}", f"budget: {budget}")
    if accelerators:
        text = text.replace("accelerators: [L4, A10G, L40S, A100-80GB, H100]", f"accelerators: [{accelerators}]")
    text = text.replace("gpus_per_trial: auto", f"gpus_per_trial: {gpus}")
    text = text.replace("  max_parallel: 8\n", f"  max_parallel: 8\n  pool: {pool}\n")
    text = text.replace("lora_r: [8, 16, 32]", "lora_r: [8]").replace("learning_rate: [1.0e-4, 3.0e-4]",
                                                                      "learning_rate: [1.0e-4]")
    path = tmp_path / name
    path.write_text(text)
    return load_spec(path)


def test_every_trial_and_the_total_carry_their_band(tmp_path):
    spec = _spec(tmp_path, "{max_usd: 300}")
    plan = plan_sweep(spec, expand_trials(spec))
    js = plan.to_json()
    assert js["confidence"] == "p90"
    for t in js["trials"]:
        assert t["est_wall_s_p10"] < t["est_wall_s"] < t["est_wall_s_p90"]
        assert t["est_cost_usd_p10"] < t["est_cost_usd"] < t["est_cost_usd_p90"]
        assert t["mem_gib_p90"] >= t["est_memory_gib"]
        assert "public runs of" in t["est_band"] and "median error" in t["est_band"]
    assert js["total_cost_usd_p10"] < js["total_est_cost_usd"] < js["total_cost_usd_p90"]
    assert js["makespan_s_p90"] > js["makespan_s"]
    assert js["decided_usd"] == pytest.approx(js["total_cost_usd_p90"], rel=1e-3)
    text = render_plan(plan)
    assert "P10 $" in text and "- P90 $" in text and "within budget at P90" in text and "beside" in text


def test_the_budget_guard_decides_at_the_stated_quantile(tmp_path):
    probe = plan_sweep(_spec(tmp_path, "{max_usd: 300}"))
    p50, p90 = probe.total_est_cost_usd, probe.bands.total_cost_usd_p90
    between = round((p50 + p90) / 2, 2)
    at90 = plan_sweep(_spec(tmp_path, f"{{max_usd: {between}}}"))
    assert not at90.within_budget and at90.decided_usd > between
    with pytest.raises(BudgetExceeded) as err:
        budget_guard(at90)
    msg = str(err.value)
    assert "at P90" in msg and f"P50 ${p50:,.2f} beside" in msg and "budget.confidence p90" in msg
    at50 = plan_sweep(_spec(tmp_path, f"{{max_usd: {between}, confidence: p50}}"))
    assert at50.within_budget and at50.confidence == "p50" and at50.decided_usd == pytest.approx(p50, rel=1e-4)
    budget_guard(at50)
    assert "within budget at P50" in render_plan(at50)


def test_the_deadline_and_spot_choice_take_the_p90_time(tmp_path):
    """A deadline between a choice's P50 and P90 T0: at p50 that choice stands, at p90 every trial the
    plan says meets the deadline does so at its P90 compute time (another GPU count or on-demand), or
    says it misses it at P90."""
    from gpuledger.estimate.bands import band_for

    overhead = 600.0  # provisioning + set-up (plan/settings.py)

    def t0_p90(t):
        b = band_for("time", "hf", "lora", "bf16", t["gpus"], t["accelerator"])
        return overhead + t["compute_s"] * b.p90 / b.p50

    plan = plan_sweep(_spec(tmp_path, "{max_usd: 300, confidence: p50}", pool="never"))
    for _ in range(4):  # a deadline the P50 choice meets at P50 and misses at P90
        t = plan.trials[0]
        deadline = int((overhead + t["compute_s"] + t0_p90(t)) / 2)
        plan = plan_sweep(_spec(tmp_path, f"{{max_usd: 300, deadline: {deadline}s, confidence: p50}}", pool="never"))
        a = plan.trials[0]
        if a["deadline_ok"] and t0_p90(a) > deadline:
            break
    else:
        pytest.fail("no deadline separates P50 from P90")
    at90 = plan_sweep(_spec(tmp_path, f"{{max_usd: 300, deadline: {deadline}s}}", pool="never"))
    b = at90.trials[0]
    assert (b["accelerator"], b["gpus"], b["spot"]) != (a["accelerator"], a["gpus"], a["spot"])
    for t in at90.trials:
        if t["deadline_ok"]:
            assert t0_p90(t) <= deadline + 1e-6
        else:
            assert "misses deadline" in t["reason"]


def test_the_project_setting_and_a_bad_value(tmp_path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_BUDGET_CONFIDENCE", "p50")
    assert plan_sweep(_spec(tmp_path, "{max_usd: 300}")).confidence == "p50"
    assert plan_sweep(_spec(tmp_path, "{max_usd: 300, confidence: p90}")).confidence == "p90"  # the spec wins
    monkeypatch.setenv("GPULEDGER_BUDGET_CONFIDENCE", "p75")
    with pytest.raises(UserError, match="budget.confidence"):
        plan_sweep(_spec(tmp_path, "{max_usd: 300}"))
    monkeypatch.delenv("GPULEDGER_BUDGET_CONFIDENCE")
    with pytest.raises(UserError, match="confidence"):
        _spec(tmp_path, "{max_usd: 300, confidence: p75}")


def test_the_teams_runs_join_the_bands(tmp_path):
    from gpuledger.plan.model import PlanningInputs

    spec = _spec(tmp_path, "{max_usd: 300}", gpus=1, accelerators="H100")
    before = plan_sweep(spec)
    t = before.trials[0]
    runs = [{"sweep_id": f"s{i}", "run_id": f"r{i}", "method": "lora", "framework": "hf", "accelerator": t["accelerator"],
             "gpus": t["gpus"], "est_wall_s": 1000.0, "wall_s": 1800.0, "est_basis": "estimate",
             "est_memory_gib": 30.0, "measured_memory_gib": 36.0} for i in range(6)]
    after = plan_sweep(spec, inputs=PlanningInputs(band_runs=runs))
    a = next(x for x in after.trials if x["trial_id"] == t["trial_id"])
    assert "6 of your runs" in a["est_band"] and (a["accelerator"], a["gpus"]) == (t["accelerator"], t["gpus"])
    # six runs of this cell took 1.8x what was planned and 1.2x the memory: the P50 and the P90s move up
    assert a["compute_s"] > t["compute_s"] and a["est_wall_s_p90"] > t["est_wall_s_p90"]
    assert a["mem_gib_p90"] >= 1.15 * a["est_memory_gib"]  # their peaks were 1.2x the estimate, every one


def test_the_sweep_report_reads_the_stored_plans_bands(tmp_path):
    """The sweep report shows each trial's P10-P90 and how the bands held (from the stored plan_json)."""
    import json

    import polars as pl

    from gpuledger.report.sweep import band_note, trials_table_rows
    from gpuledger.report.sweep_data import SweepData, band_hold, plan_bands

    plan = plan_sweep(_spec(tmp_path, "{max_usd: 300}"))
    stored = plan_bands([{"plan_json": plan.to_json_text()}])
    assert stored["confidence"] == "p90" and len(stored["trials"]) == len(plan.trials)
    assert plan_bands([{"plan_json": json.dumps({"trials": []})}]) == {} and plan_bands([]) == {}
    t0, t1 = plan.trials[0], plan.trials[1]
    trials = pl.DataFrame([
        {"trial_id": t0["trial_id"], "trial_index": 0, "status": "succeeded", "wall_s": t0["est_wall_s"] * 1.1,
         "est_wall_s": t0["est_wall_s"]},
        {"trial_id": t1["trial_id"], "trial_index": 1, "status": "succeeded", "wall_s": t1["est_wall_s_p90"] * 2,
         "est_wall_s": t1["est_wall_s"]}])
    empty = pl.DataFrame()
    data = SweepData(roi={}, sweep={}, trials=trials, runs=empty, accuracy=empty, savings={}, waste=empty,
                     billing_sources=empty, price_dates=[], price_sources=[], cloud_equiv=empty, plan_bands=stored)
    assert band_hold(data) == {"trials": 2, "inside": 1, "below": 0, "above": 1}
    note = band_note(data).text
    assert "decided at P90" in note and "held 1 of 2 succeeded trials" in note and "1 slower" in note
    row = trials_table_rows(data)[0]
    assert any(isinstance(c, str) and "(" in c and "-" in c for c in row)


def _fit_spec(tmp_path, accelerators: str):
    text = BASE.replace("micro_batch: [4, 8]", "micro_batch: [1, 3]").replace("lora_r: [8, 16, 32]", "lora_r: [8]") \
        .replace("learning_rate: [1.0e-4, 3.0e-4]", "learning_rate: [1.0e-4]") \
        .replace("accelerators: [L4, A10G, L40S, A100-80GB, H100]", f"accelerators: [{accelerators}]") \
        .replace("gpus_per_trial: auto", "gpus_per_trial: 1").replace("budget: {max_usd: 300, deadline: 8h}",
                                                                        "budget: {max_usd: 300}")
    path = tmp_path / "fit.yaml"
    path.write_text(text)
    return load_spec(path)


def test_the_fit_is_decided_at_the_memory_band(tmp_path):
    """Refused only when even the memory band's P10 exceeds the usable memory; between P10 and P90 a trial
    is planned with its OOM risk said, and a larger GPU whose usable memory holds the P90 wins over a
    cheaper one at risk."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import Workload, estimate
    from gpuledger.estimate.bands import band_for

    usable = gpu_kinds()["L4"].memory_gib - 0.5
    band = band_for("memory", "hf", "lora", "bf16", 1, None)
    mem = {mb: estimate(Workload(model="meta-llama/Llama-3.1-8B", method="lora", micro_batch=mb, seq_len=2048,
                                 lora_r=8, lora_targets="q,v")).memory_gib["device"] for mb in (1, 3)}
    # the cases this test is about: micro-batch 1 between the band's ends on an L4, 3 over even its P10
    assert mem[1] * band.p10 < mem[1] <= usable < mem[1] * band.p90 and mem[3] * band.p10 > usable

    only_l4 = plan_sweep(_fit_spec(tmp_path, "L4"))
    by_mb = {t["params"]["micro_batch"]: t for t in only_l4.trials}
    risky, refused = by_mb[1], by_mb[3]
    assert risky["feasible"] and risky["accelerator"] == "L4"
    assert 0.1 < risky["oom_risk"] < 0.9 and risky["memory_note"].startswith("OOM risk ~")
    assert f"P90 {mem[1] * band.p90:.1f} GiB" in risky["memory_note"] and "public runs" in risky["memory_note"]
    assert not refused["feasible"] and "P10" in refused["reason"] and f"{mem[3] * band.p10:.1f} GiB" in refused["reason"]
    text = render_plan(only_l4)
    assert "OOM risk" in text and "WARNING memory: 1 trial(s)" in text

    both = plan_sweep(_fit_spec(tmp_path, "L4, A100-80GB"))
    safe = {t["params"]["micro_batch"]: t for t in both.trials}[1]
    assert safe["accelerator"] == "A100-80GB" and safe["memory_note"] is None and safe["oom_risk"] < 0.1


def test_samples_of_unstated_lengths_are_planned_at_the_cap_with_the_typical_lengths_at_p10(tmp_path):
    """Issue 36: train.samples without padding or sample_tokens: each sample at seq_len positions (the P50),
    the band's P10 down to the typical lengths padded per micro-batch; the mean stated plans that instead."""
    def plan_of(train: str, name: str):
        spec = _spec(tmp_path, "{max_usd: 3000}", name=name, accelerators="A100-80GB", gpus="1")
        path = tmp_path / name
        path.write_text(path.read_text().replace("  tokens_per_trial: 20_000_000\n", train))
        spec = load_spec(path)
        return plan_sweep(spec, expand_trials(spec))

    cap = plan_of("  samples: 20000\n", "cap.yaml")
    stated = plan_of("  samples: 20000\n  sample_tokens: 250\n", "stated.yaml")
    a, b = cap.to_json()["trials"][0], stated.to_json()["trials"][0]
    assert a["est_wall_s"] > 2 * b["est_wall_s"]  # 2,048 positions a sample, not the longest of 4 ~250-token ones
    assert a["est_wall_s_p10"] < 1.2 * b["est_wall_s"]  # the band covers both assumptions
    assert "typical sample lengths" in a["est_band"] and "typical sample lengths" not in b["est_band"]
    assert any("neither train.padding nor train.sample_tokens" in x for x in cap.assumptions)
    assert not any("neither train.padding" in x for x in stated.assumptions)

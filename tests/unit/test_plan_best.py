"""The plan's choice (`best_per_key`, no cross join) against the cross join it replaces: every (key ×
candidate) row `scored_candidates` scores, the best picked by hand; and the deadline test's Markov
shortcut against the Poisson sum on every row."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from gpuledger.plan import PlanSettings, candidate_offers, plan_from_estimates
from gpuledger.plan.preemption import poisson_quantile
from gpuledger.plan.scoring import KEY_COLS, best_per_key, deadline_met, scored_candidates

H = 3600.0
ACCEL = pl.DataFrame({
    "accelerator": ["L4", "H100", "A100"], "precision": ["bf16"] * 3, "memory_gib": [22.49, 79.65, 40.0],
    "time_factor": [1.0, 1.0, 1.3], "time_source": ["test"] * 3,
})


def _frames(seed: int, n_trials: int = 40):
    """Random offers, estimates and a times table whose speed ranks differ by workload, rows shuffled,
    some (workload, accelerator) rows missing, two keys sharing one workload."""
    rng = np.random.default_rng(seed)
    rows = []
    for cloud in ("aws", "gcp", "azure"):
        for acc in ("L4", "H100", "A100"):
            for count in (1, 2, 4, 8):
                for k in range(2):
                    od = float(rng.uniform(0.5, 4.0) * count)
                    spot = None if rng.random() < 0.3 else float(od * rng.uniform(0.2, 0.8))
                    rows.append({"cloud": cloud, "region": f"r{k}", "instance_type": f"{acc}-{count}-{k}", "accelerator": acc,
                                 "accelerator_count": count, "usd_per_hour_on_demand": od, "usd_per_hour_spot": spot,
                                 "vcpus": 8.0, "memory_gib": 32.0, "source": "test", "as_of": "2026-11-01"})
    offers = pl.DataFrame(rows)
    est = []
    for i in range(n_trials):
        mem1 = float(rng.uniform(3.0, 120.0))
        for g in (1, 2):
            est.append({"trial_id": f"t{i:03d}", "gpus": g, "sharding": "none" if g == 1 else "fsdp",
                        "est_memory_gib": mem1 if g == 1 else mem1 / 2 + 1.0, "flops_total": float(rng.uniform(1e17, 1e19)),
                        "workload": f"w{i}/{g}"})
    est[3]["workload"] = est[1]["workload"]  # two keys (other memory) sharing one workload's times
    estimates = pl.DataFrame(est).with_columns(precision=pl.lit("bf16"))
    times = pl.DataFrame([{"workload": w, "accelerator": a, "compute_s": float(rng.uniform(0.2, 30.0) * H)}
                          for w in estimates["workload"].unique().sort() for a in ("L4", "H100", "A100")
                          if rng.random() > 0.1])
    return offers, estimates, times.sample(fraction=1.0, shuffle=True, seed=seed)


def _by_hand(scored: pl.DataFrame, spot: bool | None) -> dict[int, tuple]:
    """Each key's best row of the whole cross join: deadline met first, then cost + wall × 1e-12, then
    the lower candidate id."""
    if spot is not None:
        scored = scored.filter(pl.col("spot") == spot)
    best = {}
    for r in scored.iter_rows(named=True):
        rank = (not r["deadline_ok"], r["est_cost_usd"] + r["est_wall_s"] * 1e-12, r["cand"])
        if r["key"] not in best or rank < best[r["key"]][0]:
            best[r["key"]] = (rank, r)
    return {k: v[1] for k, v in best.items()}


def _p90_factor(accelerator, gpus, precision):
    """A deadline test at P90 (budget.confidence): per cell the compute's P90 / P50."""
    return 1.2 + 0.3 * (gpus > 1) + 0.1 * (accelerator[0] in "AB")


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("spot", [None, True, False])
@pytest.mark.parametrize("factor", [None, _p90_factor])
def test_best_per_key_is_the_best_row_of_the_cross_join(seed, spot, factor):
    offers, est, times = _frames(seed)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0, deadline_s=[None, 8 * H, 20 * H][seed % 3],
                     preemption_per_hour=[0.05, 0.4][seed % 2], deadline_confidence=0.9, deadline_factor=factor)
    keys = est.select(KEY_COLS).unique(maintain_order=True).with_row_index("key")
    cands = candidate_offers(offers, [1, 2], s).with_row_index("cand")
    scored = scored_candidates(keys, cands, ACCEL, times, s)
    want = _by_hand(scored, spot)
    got, any_fit = best_per_key(keys, cands, ACCEL, times, s, spot=spot)
    assert any_fit == (scored.height > 0)
    assert len(want) > 10 and sorted(got["key"].to_list()) == sorted(want)
    assert got.columns == scored.columns
    for r in got.iter_rows(named=True):
        assert r == want[r["key"]]  # the same row, to the last bit
    if s.deadline_s is not None and spot is None:  # the frames exercise both sides of the deadline test
        assert 0 < int(got["deadline_ok"].sum()) < got.height or seed % 3 == 2


def test_the_plan_totals_are_those_of_the_cross_join():
    offers, est, times = _frames(7, n_trials=60)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0, deadline_s=12 * H, preemption_per_hour=0.2, max_parallel=3)
    plan = plan_from_estimates(est.drop("precision"), offers, s, times=times, accel=ACCEL)
    keys = est.select(KEY_COLS).unique(maintain_order=True).with_row_index("key")
    cands = candidate_offers(offers, [1, 2], s).with_row_index("cand")
    best = _by_hand(scored_candidates(keys, cands, ACCEL, times, s), None)
    per_trial: dict[str, tuple] = {}
    for r in est.join(keys, on=KEY_COLS).iter_rows(named=True):
        b = best.get(r["key"])
        if b is not None:
            rank = (not b["deadline_ok"], b["est_cost_usd"] + b["est_wall_s"] * 1e-12)
            if r["trial_id"] not in per_trial or rank < per_trial[r["trial_id"]][0]:
                per_trial[r["trial_id"]] = (rank, b)
    assert plan.total_est_cost_usd == pytest.approx(sum(b["est_cost_usd"] for _, b in per_trial.values()), rel=1e-12)
    chosen = {t["trial_id"]: t for t in plan.trials if t["feasible"]}
    assert chosen.keys() == per_trial.keys()
    for tid, (_, b) in per_trial.items():
        assert chosen[tid]["gpus"] == b["gpus"] and chosen[tid]["spot"] == b["spot"]
        assert chosen[tid]["est_cost_usd"] == pytest.approx(round(b["est_cost_usd"], 6), abs=1e-9)


def test_the_markov_shortcut_agrees_with_the_poisson_sum_on_every_row():
    rng = np.random.default_rng(3)
    n = 20_000
    s = PlanSettings(deadline_s=10 * H, deadline_confidence=0.9)
    t0 = rng.uniform(0.1, 11.0, n) * H
    per_pre = rng.uniform(0.05, 3.0, n) * H
    mu = rng.uniform(0.0, 3.0, n) * (rng.random(n) < 0.9)
    got = deadline_met(t0, per_pre, mu, s)
    n_allowed = np.floor((s.deadline_s - t0) / per_pre)
    exact = (t0 <= s.deadline_s) & np.where(mu > 0, poisson_quantile(mu, 0.9, cap=np.maximum(n_allowed, 0)) <= n_allowed, True)
    assert (got == exact).all()
    assert 0.1 < got.mean() < 0.9  # both answers occur
    assert deadline_met(t0, per_pre, mu, PlanSettings(deadline_s=None)).all()


@pytest.mark.parametrize("seed", range(3))
def test_a_second_instance_per_key_is_in_the_choice_and_the_price(seed):
    """An RL trial's rollout instance of its own (`extra_usd` per key, gpuledger/plan/rl_roles.py): the choice
    minimises (offer + extra) x wall, not the offer's cost alone, and the chosen row's price carries both."""
    from gpuledger.plan.scoring import best_rows

    offers, est, times = _frames(seed)
    s = PlanSettings(provisioning_s=600.0, setup_s=600.0, deadline_s=[None, 20 * H][seed % 2], preemption_per_hour=0.1)
    keys = est.select(KEY_COLS).unique(maintain_order=True).with_row_index("key")
    cands = candidate_offers(offers, [1, 2], s).with_row_index("cand")
    scored = scored_candidates(keys, cands, ACCEL, times, s)
    extra = np.random.default_rng(seed).uniform(5.0, 40.0, keys.height)  # $/h, dearer than most offers
    best = {}
    for r in scored.iter_rows(named=True):
        rank = (not r["deadline_ok"], (r["usd_per_hour"] + extra[r["key"]]) * r["est_wall_s"] / H, r["cand"])
        if r["key"] not in best or rank < best[r["key"]][0]:
            best[r["key"]] = (rank, r)
    got, _ = best_rows(keys, cands, ACCEL, times, s, extra_usd=extra)
    plain, _ = best_rows(keys, cands, ACCEL, times, s)
    assert sorted(got["key"].tolist()) == sorted(best)
    changed = 0
    for i, key in enumerate(got["key"].tolist()):
        want = best[key][1]
        assert got["cand"][i] == want["cand"]
        assert got["usd_per_hour"][i] == pytest.approx(want["usd_per_hour"] + extra[key], rel=1e-12)
        assert got["est_cost_usd"][i] == pytest.approx(got["usd_per_hour"][i] * got["est_wall_s"][i] / H, rel=1e-12)
        changed += int(got["cand"][i] != plain["cand"][list(plain["key"]).index(key)])
    assert changed > 0  # the second instance's price moves some choices (to faster offers)

"""Per-trial managed jobs or a SkyPilot pool of K workers (pure).

A per-trial managed job pays provisioning and set-up for every trial (`PlanSettings.overhead_s`). A pool
(`sky jobs pool apply`, then `sky jobs launch --pool`: docs.skypilot.co/en/stable/examples/pools.html)
starts K identical workers once; each pays start-up (provisioning + set-up) once, then runs trials queued
in launch order, each trial paying only `POOL_JOB_START_S`; every worker is billed until the pool is torn
down, `POOL_TEARDOWN_S` after the last trial ends, so a worker that finishes early pays an idle tail.

The model, per candidate worker offer (one row of `scored_candidates`: an instance, spot or on-demand):
- run_i = POOL_JOB_START_S + compute_i (the trial's compute on that worker; a trial measured or calibrated
  on that accelerator keeps the plan row's compute);
- spot: run_i × (1 + rate × (restart + lost_i)), the per-trial formula of `scoring.scored_candidates`:
  a preempted worker is replaced (provisioning + set-up again) and its trial loses half its compute (or
  half the checkpoint interval);
- schedule: greedy list scheduling of run_i in launch order on K workers (`schedule.list_schedule`),
  all starting after start-up; makespan = start-up + the last end; pool end = makespan + teardown;
- cost = usd_per_hour × K × pool end / 3600 (every worker billed from its start to the teardown);
  a trial is attributed its own run plus its worker's start-up shared by run time; the idle tail
  (pool end − start-up − a worker's busy time, summed) is the sweep's;
- deadline: on-demand makespan <= deadline; spot, the makespan plus q × (restart + the longest lost
  work), q the `deadline_confidence` quantile of Poisson(rate × makespan) preemptions per worker.
K: the fewest workers (at most max_parallel) whose makespan is no longer than the per-trial plan's on
max_parallel slots (or the deadline, when that plan misses it): a pool is never planned slower than the
jobs it replaces, and each worker fewer saves its start-up and idle tail. The choice (auto): the
deadline met first, then the lower expected cost, between the per-trial plan and the best pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from gpuledger.plan.preemption import poisson_quantile
from gpuledger.plan.schedule import list_schedule
from gpuledger.plan.settings import S_PER_H, PlanSettings

if TYPE_CHECKING:
    from gpuledger.plan.sections import PoolPlan

#: Seconds from `sky jobs launch --pool` to the trial's run on a worker that is up and set up: the jobs
#: controller's scheduling loop assigns a free worker and starts the run command (no provisioning, no
#: set-up: docs.skypilot.co/en/stable/examples/pools.html, "Faster cold-starts"); planned at 30 s.
POOL_JOB_START_S = 30.0
#: Seconds the workers stay billed after the last trial ends: the launcher notices the end at its next
#: poll (`SkyPilotLauncher.poll_interval_s`, 30 s) and `sky jobs pool down` terminates the instances
#: (about 1-2 min for a GPU VM); planned at 120 s.
POOL_TEARDOWN_S = 120.0
#: Worker offers priced in full (with the schedule), ranked by a lower bound of their cost.
MAX_POOL_OFFERS = 16
#: The modes of `resources.pool`.
POOL_MODES = ("auto", "always", "never")


def pool_name(sweep_id: str) -> str:
    """Returns the SkyPilot pool name of a sweep (one pool per sweep: a re-run finds and reuses it)."""
    return f"gl-{sweep_id}"[:63].rstrip("-").lower()


@dataclass(frozen=True)
class PoolSchedule:
    """Trials on K pool workers: per trial (in the order given) start_s, end_s (from the pool's apply)
    and worker; per worker its busy seconds; the pool's makespan_s and end_s (teardown done)."""

    workers: int
    startup_s: float
    start_s: np.ndarray
    end_s: np.ndarray
    worker: np.ndarray
    busy_s: np.ndarray
    makespan_s: float
    end_pool_s: float

    @property
    def worker_s(self) -> float:
        """Billed worker-seconds: every worker from its start to the teardown."""
        return self.workers * self.end_pool_s

    @property
    def idle_tail_s(self) -> float:
        """Worker-seconds billed with no trial running (after start-up), summed over workers."""
        return float(self.workers * (self.end_pool_s - self.startup_s) - self.busy_s.sum())


def pool_schedule(run_s, workers: int, startup_s: float, teardown_s: float = POOL_TEARDOWN_S) -> PoolSchedule:
    """Returns the schedule of trials taking `run_s` seconds each (launch order) on `workers` workers
    that start up for `startup_s` seconds first and are torn down `teardown_s` after the last end."""
    d = np.asarray(run_s, dtype=np.float64)
    k = max(1, int(workers))
    start, slot = list_schedule(d, k)
    start = start + startup_s
    end = start + d
    busy = np.bincount(slot, weights=d, minlength=k) if len(d) else np.zeros(k)
    makespan = float(end.max()) if len(d) else startup_s
    return PoolSchedule(k, startup_s, start, end, slot, busy, makespan, makespan + teardown_s)


def pool_workers(run_s, max_workers: int, startup_s: float, bound_s: float | None) -> int:
    """Returns the fewest workers (at most `max_workers`, capped at the trials) whose makespan, start-up
    included, is within `bound_s` (binary search: a list schedule's makespan falls as workers are
    added, up to Graham's rare anomalies, which the final check catches); `max_workers` when none is
    or `bound_s` is None."""
    d = np.asarray(run_s, dtype=np.float64)
    top = max(1, min(int(max_workers), len(d)))
    if bound_s is None:
        return top

    def fits(k: int) -> bool:
        return pool_schedule(d, k, startup_s, 0.0).makespan_s <= bound_s * (1 + 1e-9)

    if not fits(top):
        return top
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    return lo


def spot_run_s(run_s: np.ndarray, compute_s: np.ndarray, preemptions_per_hour: float, s: PlanSettings) -> np.ndarray:
    """Returns expected run seconds on a spot worker: run × (1 + rate × (restart + lost work))."""
    if preemptions_per_hour <= 0:
        return run_s
    lost = np.full(len(compute_s), s.checkpoint_interval_s / 2) if s.checkpoint_interval_s is not None else compute_s / 2
    return run_s * (1 + preemptions_per_hour / S_PER_H * (s.restart_s + lost))


@dataclass(frozen=True)
class PoolOption:
    """One priced pool: the worker offer (a `candidate_offers` row), its schedule and money."""

    offer: dict[str, Any]
    trial_ids: list[str]
    compute_s: np.ndarray
    run_s: np.ndarray
    schedule: PoolSchedule
    cost_usd: float
    makespan_conf_s: float
    deadline_ok: bool

    @property
    def usd_per_s(self) -> float:
        return self.offer["usd_per_hour"] / S_PER_H

    def trial_cost_usd(self) -> np.ndarray:
        """Per trial: its own run plus its worker's start-up, shared by run time (the idle tail is not in it)."""
        sch = self.schedule
        share = self.run_s / np.where(sch.busy_s[sch.worker] > 0, sch.busy_s[sch.worker], 1.0)
        return (self.run_s + sch.startup_s * share) * self.usd_per_s


def price_pool(offer: dict[str, Any], trial_ids: list[str], compute_s: np.ndarray, workers: int | None,
               s: PlanSettings, bound_s: float | None = None) -> PoolOption:
    """Returns the pool of `offer` workers running the trials (launch order) priced; `workers` None:
    the fewest of at most `s.max_parallel` within `bound_s` (`pool_workers`)."""
    base = compute_s + POOL_JOB_START_S
    rate = float(offer.get("preemptions_per_hour") or 0.0) if offer["spot"] else 0.0
    run = spot_run_s(base, compute_s, rate, s)
    if workers is None:
        workers = pool_workers(run, s.max_parallel, s.overhead_s, bound_s)
    sch = pool_schedule(run, workers, s.overhead_s)
    cost = sch.worker_s * offer["usd_per_hour"] / S_PER_H
    conf = sch.makespan_s
    if rate > 0:
        nominal = pool_schedule(base, workers, s.overhead_s).makespan_s
        lost = s.checkpoint_interval_s / 2 if s.checkpoint_interval_s is not None else float(compute_s.max()) / 2
        q = float(poisson_quantile(np.array([rate / S_PER_H * nominal]), s.deadline_confidence)[0])
        conf = nominal + q * (s.restart_s + lost)
    ok = s.deadline_s is None or conf <= s.deadline_s
    return PoolOption(offer, trial_ids, compute_s, run, sch, cost, conf, ok)


def pool_options(trials: pl.DataFrame, scored: pl.DataFrame, candidates: pl.DataFrame, s: PlanSettings,
                 launch_order: list[str], bound_s: float | None = None) -> list[PoolOption]:
    """Returns the best-priced pools, one per worker offer that fits every feasible trial, cheapest first.

    `trials`: the per-trial plan (trial_id, accelerator, gpus, compute_s, feasible); `scored`: the
    `scored_candidates` rows joined to their trial (trial_id, cand, compute_s); `candidates`: the
    `candidate_offers` frame with `cand`; `bound_s`: the makespan the pool must not exceed (`pool_workers`).
    """
    feas = trials.filter(pl.col("feasible"))
    n = feas.height
    if n == 0 or scored.is_empty():
        return []
    allowed = {"auto": None, "always": True, "never": False}[s.spot]
    cand = candidates if allowed is None else candidates.filter(pl.col("spot") == allowed)
    per = (scored.join(cand.select("cand", "accelerator"), on="cand", how="inner")
           .join(feas.select("trial_id", pl.col("accelerator").alias("_acc"), pl.col("gpus").alias("_gpus"),
                             pl.col("compute_s").alias("_planned")), on="trial_id", how="inner")
           .with_columns(compute_s=pl.when((pl.col("accelerator") == pl.col("_acc")) & (pl.col("gpus") == pl.col("_gpus")))
                         .then(pl.col("_planned")).otherwise(pl.col("compute_s")))
           .group_by("cand", "trial_id").agg(pl.col("compute_s").min()))
    whole = per.group_by("cand").agg(pl.len().alias("n"), pl.col("compute_s").sum().alias("sum_s")).filter(pl.col("n") == n)
    if whole.is_empty():
        return []
    k_max = max(1, min(int(s.max_parallel), n))
    ranked = (whole.join(cand, on="cand").with_columns(
        bound=pl.col("usd_per_hour") * (pl.col("sum_s") + k_max * s.overhead_s)).sort("bound", "cand").head(MAX_POOL_OFFERS))
    order = pl.DataFrame({"trial_id": launch_order or feas["trial_id"].to_list()}).with_row_index("_o")
    out = []
    for offer in ranked.iter_rows(named=True):
        rows = per.filter(pl.col("cand") == offer["cand"]).join(order, on="trial_id", how="left").sort("_o", nulls_last=True)
        compute = rows["compute_s"].to_numpy().astype(np.float64)
        out.append(price_pool(offer, rows["trial_id"].to_list(), compute, None, s, bound_s))
    return sorted(out, key=lambda o: (not o.deadline_ok, o.cost_usd, o.schedule.makespan_s))


def pool_what_if(option: PoolOption, ks, *, stop_at_target: bool) -> list[dict[str, float]]:
    """Returns, per K in `ks`, the pool of K workers of `option`'s offer: pool_time_to_recipe_s and
    pool_cost_usd, both the mean over which trial is the recipe (uniform prior, as `what_if_curve`).
    With `stop_at_target` the pool is torn down once the recipe trial and the trials started before it
    ended; every worker is billed from its start to that teardown. A pool never starts more workers than it
    has trials (`pool_options`' bound), so a K above the trial count is priced as that many workers."""
    out = []
    n = len(option.run_s)
    for k in ks:
        if n == 0:
            out.append({"pool_time_to_recipe_s": 0.0, "pool_cost_usd": 0.0})
            continue
        k = min(int(k), n)
        sch = pool_schedule(option.run_s, k, option.schedule.startup_s)
        order = np.argsort(sch.start_s, kind="stable")
        start, end = sch.start_s[order], sch.end_s[order]
        if stop_at_target:
            started = np.maximum(np.searchsorted(start, end, side="left"), np.arange(1, n + 1))
            last = np.maximum.accumulate(end)[started - 1]
            cost = k * (last + POOL_TEARDOWN_S) * option.usd_per_s
        else:
            cost = np.full(n, sch.worker_s * option.usd_per_s)
        out.append({"pool_time_to_recipe_s": round(float(end.mean()), 6), "pool_cost_usd": round(float(cost.mean()), 6)})
    return out


def pool_section(option: PoolOption | None, *, mode: str, used: bool, reason: str, sweep: str,
                 per_trial_usd: float, per_trial_makespan_s: float) -> PoolPlan:
    """Returns the plan's `pool` section (seconds and US dollars; `workers`, `worker` the offer)."""
    from gpuledger.plan.sections import PoolAssignment, PoolPlan, PoolWorker

    base = {"mode": mode, "used": used, "reason": reason, "name": pool_name(sweep),
            "per_trial_jobs_usd": round(per_trial_usd, 6), "per_trial_jobs_makespan_s": round(per_trial_makespan_s, 3)}
    if option is None:
        return PoolPlan(**base)
    sch = option.schedule
    per_s = option.usd_per_s
    assignments = tuple(PoolAssignment(worker=w + 1, trials=tuple(option.trial_ids[i] for i in np.flatnonzero(sch.worker == w)),
                                       busy_s=round(float(sch.busy_s[w]), 3),
                                       idle_tail_s=round(float(sch.end_pool_s - sch.startup_s - sch.busy_s[w]), 3))
                        for w in range(sch.workers))
    return PoolPlan(
        **base,
        workers=sch.workers,
        worker=PoolWorker.from_offer(option.offer),
        startup_s_per_worker=round(sch.startup_s, 3),
        startup_usd_per_worker=round(sch.startup_s * per_s, 6),
        startup_usd=round(sch.workers * sch.startup_s * per_s, 6),
        job_start_s=POOL_JOB_START_S,
        teardown_s=POOL_TEARDOWN_S,
        busy_s=round(float(sch.busy_s.sum()), 3),
        idle_tail_s=round(sch.idle_tail_s, 3),
        idle_tail_usd=round(sch.idle_tail_s * per_s, 6),
        worker_s=round(sch.worker_s, 3),
        cost_usd=round(option.cost_usd, 6),
        makespan_s=round(sch.makespan_s, 3),
        makespan_at_confidence_s=round(option.makespan_conf_s, 3),
        deadline_ok=option.deadline_ok,
        saving_usd=round(per_trial_usd - option.cost_usd, 6),
        saving_pct=round(100 * (per_trial_usd - option.cost_usd) / per_trial_usd, 2) if per_trial_usd else None,
        assignments=assignments,
    )


def scored_per_trial(estimates: pl.DataFrame, offers: pl.DataFrame, accel: pl.DataFrame, times: pl.DataFrame | None,
                     s: PlanSettings) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Returns (candidates with `cand`, per trial × fitting candidate: trial_id, cand, gpus, sharding,
    compute_s, est_memory_gib, usable_memory_gib), from the plan's own steps (`candidate_offers`,
    `scored_candidates`)."""
    from gpuledger.plan.candidates import candidate_offers
    from gpuledger.plan.estimates import compute_times
    from gpuledger.plan.scoring import KEY_COLS, scored_candidates

    est = estimates if "precision" in estimates.columns else estimates.with_columns(precision=pl.lit(s.precision))
    est = est.with_columns(pl.col("gpus").cast(pl.Int64), pl.col("est_memory_gib").cast(pl.Float64),
                           pl.col("flops_total").cast(pl.Float64))
    if "basis" not in accel.columns:
        accel = accel.with_columns(basis=pl.lit("estimate"))
    candidates = candidate_offers(offers, est["gpus"].unique().to_list(), s).with_row_index("cand")
    if times is None:
        times = compute_times(est, accel["accelerator"].unique().to_list())
    keys = est.filter(pl.col("est_memory_gib").is_not_null()).select(KEY_COLS).unique().with_row_index("key")
    scored = scored_candidates(keys, candidates, accel, times, s)
    per = (est.join(keys, on=KEY_COLS, how="inner").select("trial_id", "key", "sharding")
           .join(scored.select("key", "cand", "gpus", "compute_s", "est_memory_gib", "usable_memory_gib"), on="key"))
    return candidates, per.drop("key")


def with_pool(plan, estimates: pl.DataFrame, offers: pl.DataFrame, accel: pl.DataFrame, s: PlanSettings, *,
              mode: str = "auto", shared_setup: bool = True, times: pl.DataFrame | None = None,
              refused: str | None = None):
    """Returns the plan with its `pool` section; with a pool chosen (mode `always`, or `auto` when it meets
    the deadline first and costs less), the trials placed on the pool's workers: est_wall_s = the run on
    a worker, est_cost_usd = the run plus the worker's start-up share, start_s/slot from the pool's
    schedule, the total = every worker billed to the teardown (idle tail included), what-if pool columns.

    `shared_setup`: False when the trials' rendered set-ups differ (a pool's workers share one set-up).
    `times`: the plan's compute times (`estimates.compute_times`; default: computed again). `refused`: why no
    pool can serve these trials (an RL trial's rollout instance of its own: a worker is one instance)."""
    from dataclasses import replace

    from gpuledger.plan.formats import fmt_duration, fmt_usd
    from gpuledger.plan.whatif import WHAT_IF_KS

    if plan.launcher == "local" or mode not in ("auto", "always") or refused:
        why = refused or ("resources.pool: never" if mode == "never" else "launcher local")
        return replace(plan, pool=pool_section(None, mode=mode, used=False, reason=why, sweep=plan.sweep,
                                               per_trial_usd=plan.total_est_cost_usd,
                                               per_trial_makespan_s=plan.makespan_s))
    options: list[PoolOption] = []
    per_ok = s.deadline_s is None or plan.makespan_s <= s.deadline_s
    if shared_setup:
        candidates, per = scored_per_trial(estimates, offers, accel, times, s)
        bound = plan.makespan_s if per_ok else s.deadline_s
        options = pool_options(plan.trials_frame, per, candidates, s, plan.launch_order, bound)
    best = options[0] if options else None
    if best is None:
        why = ("the trials' set-ups differ (a pool's workers share one set-up)" if not shared_setup
               else "no single worker offer fits every feasible trial")
        used = False
    elif mode == "always":
        used, why = True, "resources.pool: always"
    elif best.deadline_ok and (not per_ok or best.cost_usd < plan.total_est_cost_usd):
        used = True
        why = (f"cheaper: {fmt_usd(best.cost_usd)} against {fmt_usd(plan.total_est_cost_usd)} as per-trial jobs"
               if per_ok else "per-trial jobs miss the deadline; the pool meets it")
    else:
        used = False
        why = (f"the pool misses the deadline ({fmt_duration(best.makespan_conf_s)})" if not best.deadline_ok
               else f"per-trial jobs are cheaper: {fmt_usd(plan.total_est_cost_usd)} against {fmt_usd(best.cost_usd)}")
    section = pool_section(best, mode=mode, used=used, reason=why, sweep=plan.sweep,
                           per_trial_usd=plan.total_est_cost_usd, per_trial_makespan_s=plan.makespan_s)
    notes = [pool_assumption(section)] if best is not None else [f"pool: not used ({why})"]
    target = any(a.startswith("what-if: the sweep stops") for a in plan.assumptions)
    what_if = plan.what_if
    if best is not None:
        extra = pool_what_if(best, [w["parallel"] for w in what_if] or WHAT_IF_KS, stop_at_target=target)
        what_if = [{**w, **p} for w, p in zip(what_if, extra, strict=True)]
    if not used:
        return replace(plan, pool=section, what_if=what_if, assumptions=plan.assumptions + notes)
    frame = _pool_rows(plan.trials_frame, best, per, accel, plan.sweep)
    return replace(plan, pool=section, what_if=what_if, assumptions=plan.assumptions + notes, trials_frame=frame,
                   total_est_cost_usd=best.cost_usd, makespan_s=best.schedule.makespan_s,
                   max_parallel=best.schedule.workers, within_budget=best.cost_usd <= s.budget_usd)


def _pool_rows(table: pl.DataFrame, option: PoolOption, per: pl.DataFrame, accel: pl.DataFrame,
               sweep: str) -> pl.DataFrame:
    """Returns the plan's trial rows with the feasible ones placed on the pool's workers (`pool`: its
    name, `pool_workers`: its size)."""
    o, sch = option.offer, option.schedule
    costs = option.trial_cost_usd()
    basis = dict(zip(accel["accelerator"].to_list(), accel["basis"].to_list(), strict=True)) if "basis" in accel.columns else {}
    placed = pl.DataFrame({
        "trial_id": option.trial_ids, "_compute_s": option.compute_s, "_wall_s": option.run_s, "_cost": costs,
        "_start": sch.start_s, "_slot": sch.worker.astype(np.int64),
    }).join(per.filter(pl.col("cand") == o["cand"]).sort("compute_s", "sharding").unique("trial_id", keep="first")
            .select("trial_id", pl.col("sharding").alias("_sh"), pl.col("est_memory_gib").alias("_mem"),
                    pl.col("usable_memory_gib").alias("_usable")), on="trial_id", how="left")
    t = table.join(placed, on="trial_id", how="left")
    hit = pl.col("_wall_s").is_not_null()
    rate_h = float(o.get("preemptions_per_hour") or 0.0) if o["spot"] else 0.0
    same = (pl.col("accelerator") == o["accelerator"]) & (pl.col("gpus") == o["gpus"])
    values = {
        "accelerator": pl.lit(o["accelerator"]), "gpus": pl.lit(o["gpus"], dtype=pl.Int64), "cloud": pl.lit(o["cloud"]),
        "region": pl.lit(o["region"]), "instance_type": pl.lit(o["instance_type"]), "spot": pl.lit(o["spot"]),
        "usd_per_hour": pl.lit(o["usd_per_hour"]), "on_demand_usd_per_hour": pl.lit(o["on_demand_usd_per_hour"]),
        "preemptions_per_hour": pl.lit(rate_h), "expected_preemptions": pl.col("_wall_s") * rate_h / S_PER_H,
        "price_source": pl.lit(o["price_source"]), "price_as_of": pl.lit(o["price_as_of"]),
        "price_basis": pl.lit(o.get("price_basis"), dtype=pl.String),
        # the pool's compute is the planned one on the planned accelerator and GPU count (`pool_options`),
        # else the fastest fitting workload's: the sharding and memory of that same row
        "sharding": pl.when(same).then(pl.col("sharding")).otherwise(pl.col("_sh")),
        "est_memory_gib": pl.when(same).then(pl.col("est_memory_gib")).otherwise(pl.col("_mem")),
        "usable_memory_gib": pl.when(same).then(pl.col("usable_memory_gib")).otherwise(pl.col("_usable")),
        "compute_s": pl.col("_compute_s"), "est_wall_s": pl.col("_wall_s"), "est_cost_usd": pl.col("_cost"),
        "start_s": pl.col("_start"), "slot": pl.col("_slot"), "deadline_ok": pl.lit(option.deadline_ok),
        "est_basis": pl.when(same).then(pl.col("est_basis")).otherwise(pl.lit(basis.get(o["accelerator"], "estimate"))),
        "reason": pl.lit(None, dtype=pl.String),
    }
    cols = [pl.when(hit).then(v).otherwise(pl.col(c)).alias(c) for c, v in values.items() if c in table.columns]
    # the launcher reads these from the row (gpuledger/runtime/requests.py): which pool, of how many workers
    cols += [pl.when(hit).then(pl.lit(pool_name(sweep))).otherwise(None).alias("pool"),
             pl.when(hit).then(pl.lit(sch.workers)).otherwise(None).alias("pool_workers")]
    rounded = {"compute_s": 3, "est_wall_s": 3, "est_cost_usd": 6, "start_s": 3, "expected_preemptions": 4}
    return (t.with_columns(cols).with_columns([pl.col(c).round(n) for c, n in rounded.items() if c in table.columns])
            .drop("_compute_s", "_wall_s", "_cost", "_start", "_slot", "_sh", "_mem", "_usable"))


def pool_assumption(section: PoolPlan) -> str:
    """Returns the plan's one-sentence statement of the pool it priced (a `pool_section` with workers)."""
    from gpuledger.plan.formats import fmt_duration, fmt_usd

    w = section.worker
    head = "pool: used" if section.used else "pool: priced, not used"
    return (f"{head} ({section.reason}): {section.workers} worker(s) of {w.gpus}x {w.accelerator} "
            f"({w.cloud}/{w.region} {w.instance_type}{', spot' if w.spot else ''}), each paying start-up "
            f"{fmt_duration(section.startup_s_per_worker)} once; trials queued in launch order, "
            f"{fmt_duration(POOL_JOB_START_S)} per trial to start on a worker; workers billed until teardown "
            f"{fmt_duration(POOL_TEARDOWN_S)} after the last trial (idle tail {fmt_duration(section.idle_tail_s)}, "
            f"{fmt_usd(section.idle_tail_usd)}); {fmt_usd(section.cost_usd)} in all against "
            f"{fmt_usd(section.per_trial_jobs_usd)} as per-trial managed jobs")

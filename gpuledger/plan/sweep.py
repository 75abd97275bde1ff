"""`plan_sweep(spec, ...)`: every step of the plan for one sweep spec (pure: reads the bundled
catalog; what the outside world measured — this machine's speed, spot preemptions, past runs —
is passed in by the caller)."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl

from gpuledger.errors import UserError
from gpuledger.plan.assumptions import lengths_unstated, sample_lengths_notes, stack_notes
from gpuledger.plan.choice import plan_from_estimates
from gpuledger.plan.estimates import trial_estimates
from gpuledger.plan.formats import fmt_duration
from gpuledger.plan.model import Plan, PlanningInputs
from gpuledger.plan.settings import (
    CLOUD_PROVISIONING_S,
    CLOUD_SETUP_S,
    LOCAL_MEMORY_FRACTION,
    LOCAL_PROVISIONING_S,
    LOCAL_SETUP_S,
    PlanSettings,
)


def settings_for(spec, *, max_parallel: int | None = None, launcher: str | None = None,
                 measured_preemption: dict | None = None, billed_rates=None, band_table=None) -> PlanSettings:
    """Returns the PlanSettings a sweep spec implies (launcher and max_parallel overridable)."""
    from gpuledger.plan.bands import confidence_of, deadline_factor
    from gpuledger.spec import sweep_id_for

    r = spec.resources
    launcher = launcher or spec.launcher
    local = launcher == "local"
    confidence = confidence_of(spec)
    train = getattr(spec, "train", None)
    framework = getattr(train, "framework", None) or "hf"
    return PlanSettings(
        sweep=sweep_id_for(spec),
        method=spec.method,
        precision=spec.precision,
        launcher=launcher,
        spot="never" if local else r.spot,
        deadline_s=float(spec.budget.deadline_s) if spec.budget.deadline_s else None,
        deadline_confidence=r.deadline_confidence,
        max_parallel=max_parallel or r.max_parallel,
        budget_usd=spec.budget.max_usd,
        provisioning_s=LOCAL_PROVISIONING_S if local else CLOUD_PROVISIONING_S,
        setup_s=LOCAL_SETUP_S if local else CLOUD_SETUP_S,
        preemption_per_hour=r.preemption_per_hour,
        measured_preemption=measured_preemption,
        billed_rates=billed_rates,
        target=spec.search.objective.target,
        confidence=confidence,
        band_table=band_table,
        deadline_factor=deadline_factor(framework, spec.method, confidence, band_table,
                                        getattr(train, "stack", None), spec.model),
        lengths_unstated=lengths_unstated(spec),
        nodes=getattr(train, "nodes", None),
    )


def _trials_meta(trials) -> pl.DataFrame:
    return pl.DataFrame(
        {"trial_id": [t.trial_id for t in trials], "params": [json.dumps(t.params, default=str) for t in trials]},
        schema={"trial_id": pl.String, "params": pl.String},
    )


def search_notes(spec, trials) -> list[str]:
    """Returns what the plan assumes about which points run (tpe/asha with a range: drawn points)."""
    from gpuledger.spec.expand import has_ranges

    s = spec.search
    if s.strategy not in ("tpe", "asha") or not has_ranges(spec):
        return []
    ranges = ", ".join(name for name, v in s.params.items() if not isinstance(v, list))
    drawn = (f"{len(trials)} points drawn from the ranges ({ranges}) with seed {s.seed} by Optuna's RandomSampler "
             "(gpuledger.search.space.sample_points)")
    if s.strategy == "asha":
        return [f"search asha over ranges: the plan prices the {drawn}; asha runs exactly these points, in the "
                "order drawn (pruned ones cost less)"]
    return [f"search tpe over ranges: the plan and budget guard price {drawn} as representatives of the "
            f"{s.n_trials} trials TPE will ask; each asked point is planned alone, with these settings, "
            "and registered before it launches"]


def _filtered_offers(spec, offers: pl.DataFrame | None, accelerators: list[str] | None = None) -> pl.DataFrame:
    """The offers of the spec's clouds, regions and accelerators (`accelerators`: these kinds instead, e.g. an RL
    spec's `train.rollout_gpu`, whose instance is priced apart from the trainer's)."""
    from gpuledger.catalog.pricing import load_offers

    r = spec.resources
    kinds = accelerators or r.accelerators
    if offers is None:
        return load_offers(clouds=r.clouds, accelerators=kinds or None, regions=r.regions, usable_only=False)
    if r.clouds:
        offers = offers.filter(pl.col("cloud").is_in(r.clouds))
    if kinds:
        offers = offers.filter(pl.col("accelerator").is_in(kinds))
    if r.regions:
        offers = offers.filter(pl.col("region").is_in(r.regions))
    return offers


def plan_sweep(
    spec,
    trials=None,
    *,
    offers: pl.DataFrame | None = None,
    max_parallel: int | None = None,
    launcher: str | None = None,
    measured_preemption: dict[tuple[str, str], tuple[float, float]] | None = None,
    machine=None,
    measurements: pl.DataFrame | None = None,
    curves: dict | None = None,
    billed_rates=None,
    probes: pl.DataFrame | None = None,
    inputs: PlanningInputs | None = None,
    band_table=None,
) -> Plan:
    """Returns the Plan of a sweep spec (pure: reads the bundled catalog; writes nothing, launches
    nothing, measures nothing).

    `offers`: a `load_offers` frame (default: `load_offers` filtered by the spec's clouds,
    accelerators and regions). `measured_preemption`: {(cloud, accelerator): (spot_hours,
    preemptions)} from the warehouse; used where spot_hours >= MEASURED_MIN_SPOT_HOURS.
    `machine`: this machine's stored speed (`gpuledger.inputs.machine.local_machine()`), required for
    `launcher: local`. `measurements`: measured runs of this model and method (the warehouse's
    `plan_measurements` named query; see gpuledger/plan/throughput_calibration.py): a trial measured on the
    chosen accelerator takes its measured wall-clock, the others a rate calibrated on them.
    `curves`: {params key: learning curve} of earlier runs of the same model, method, objective and
    train settings (`gpuledger.inputs.ledger`), for the expected spend under pruning (gpuledger/plan/pruning.py).
    `billed_rates`: rates learned from the FOCUS bill (`gpuledger.catalog.pricing.BilledRates`, from
    `gpuledger.inputs.ledger`): an offer backed by enough billed GPU-hours is priced at its billed rate.
    `probes`: usable probes of this model and method (the warehouse's `plan_probes` named query): a
    trial placed where a probe of its shape ran is extrapolated from it (gpuledger/plan/probes.py).
    `inputs`: all of these at once (`PlanningInputs`, what `gpuledger.inputs.ledger.planning_inputs`
    returns); given, it replaces them. `band_table`: the bands' table (`gpuledger.estimate.bands`:
    `table_with_runs(runs)`; default the public rows; `inputs.band_runs` when given).
    """
    if inputs is not None:
        machine, measured_preemption, measurements = inputs.machine, inputs.measured_preemption, inputs.measurements
        curves, billed_rates, probes = inputs.curves, inputs.billed_rates, inputs.probes
        runs = getattr(inputs, "band_runs", None)
        if band_table is None and runs:
            from gpuledger.estimate.bands import table_with_runs

            band_table = table_with_runs(runs)
    from gpuledger.spec import SweepSpec, expand_trials

    if not isinstance(spec, SweepSpec):
        raise UserError(f"{spec.name} is a capacity spec; plan it with `gpuledger capacity SPEC`")
    if trials is None:
        trials = expand_trials(spec)
    if max_parallel is None and spec.resources.max_parallel == "auto":
        from gpuledger.plan.parallel import choose_parallel

        n = min(spec.search.n_trials or len(trials), len(trials)) if spec.search.strategy != "tpe" else len(trials)
        return choose_parallel(spec, n, lambda k: plan_sweep(
            spec, trials, offers=offers, max_parallel=k, launcher=launcher, measured_preemption=measured_preemption,
            machine=machine, measurements=measurements, curves=curves, billed_rates=billed_rates, probes=probes,
            band_table=band_table))
    s = settings_for(spec, max_parallel=max_parallel, launcher=launcher, measured_preemption=measured_preemption,
                     billed_rates=billed_rates, band_table=band_table)
    meta = _trials_meta(trials)
    if s.launcher == "local":
        if machine is None:
            raise ValueError("plan_sweep(launcher local) needs machine=gpuledger.inputs.machine.local_machine()")
        plan = _plan_local(spec, trials, s, meta, machine, measurements, probes)
    else:
        plan = _plan_cloud(spec, trials, s, meta, offers, measurements, probes)
    from gpuledger.plan.bands import at_confidence

    plan = at_confidence(_with_pruning(plan, spec, s, curves), s.confidence)
    if s.launcher != "local" and getattr(spec.train, "rollout_gpu", None):
        from gpuledger.plan.rl_roles import placement_note
        from gpuledger.spec import expand_trials

        # the same sweep colocated and split on one node, for comparison (docs/rl.md)
        note = placement_note(plan, spec, lambda v: plan_sweep(
            v, expand_trials(v), offers=offers, max_parallel=plan.max_parallel, launcher=launcher,
            measured_preemption=measured_preemption, machine=machine, measurements=measurements, curves=curves,
            billed_rates=billed_rates, probes=probes, band_table=band_table))
        if note:
            plan = replace(plan, assumptions=[*plan.assumptions, note])
    return plan


def _with_probe_notes(plan: Plan, probed: pl.DataFrame | None, s: PlanSettings) -> Plan:
    from gpuledger.plan.probes import probe_notes

    notes = probe_notes(probed, plan.trials, s)
    return replace(plan, assumptions=[*plan.assumptions, *notes]) if notes else plan


def _with_pruning(plan: Plan, spec, s: PlanSettings, curves: dict | None) -> Plan:
    """A sweep that prunes: the expected spend under pruning beside the full one; the budget guard
    decides on it when known (gpuledger/plan/pruning.py)."""
    from gpuledger.plan.pools import POOL_JOB_START_S
    from gpuledger.plan.pruning import pruned_spend

    # on a pool a trial's own overhead is the job's start on a worker (start-up is the worker's)
    overhead_s = POOL_JOB_START_S if plan.pool is not None and plan.pool.used else s.overhead_s
    spend = pruned_spend(plan.trials, spec, max_parallel=plan.max_parallel, overhead_s=overhead_s, curves=curves)
    if spend is None:
        return plan
    per_trial = {tid: round(v, 6) for tid, v in spend.per_trial_usd.items()}
    frame = plan.trials_frame.with_columns(
        est_pruned_cost_usd=pl.col("trial_id").replace_strict(per_trial, default=None, return_dtype=pl.Float64))
    pruned = replace(plan, trials_frame=frame, pruning=spend)
    return replace(pruned, within_budget=pruned.decided_usd <= s.budget_usd)


def _plan_cloud(spec, trials, s: PlanSettings, meta: pl.DataFrame, offers: pl.DataFrame | None,
                measurements: pl.DataFrame | None, probes: pl.DataFrame | None) -> Plan:
    from gpuledger.plan.estimates import accelerator_table, compute_times
    from gpuledger.plan.probes import plausible_probes, probes_for_trials
    from gpuledger.plan.throughput_calibration import calibrate

    r = spec.resources
    raw_offers, offers = offers, _filtered_offers(spec, offers)
    est = trial_estimates(spec, trials)  # first: it refuses a spec's located problems (an unknown rollout_gpu)
    rollout_offers = offers
    if getattr(spec.train, "rollout_gpu", None):  # the rollouts' instance of its own kind (docs/rl.md)
        from gpuledger.catalog import normalize_accelerator

        rollout_offers = _filtered_offers(spec, raw_offers, [normalize_accelerator(spec.train.rollout_gpu)])
    notes = []
    if offers.is_empty():
        notes.append(f"no offers for accelerators {r.accelerators or 'any'} in clouds {r.clouds}"
                     + (f" regions {r.regions}" if r.regions else ""))
    accel = accelerator_table(offers["accelerator"].unique().to_list(), est["precision"].unique().to_list(), s.method)
    times = compute_times(est, accel["accelerator"].unique().to_list(), band_table=s.band_table)
    accel, measured, cal_notes = calibrate(accel, est, times, measurements, s, model=spec.model)
    probed, probe_refusals = plausible_probes(probes_for_trials(spec, trials, probes), est, spec.precision)
    plan = plan_from_estimates(est, offers, s, trials_meta=meta, accel=accel, times=times, measured=measured,
                               probed=probed, rollout_offers=rollout_offers,
                               extra_assumptions=notes + cal_notes + search_notes(spec, trials)
                               + sample_lengths_notes(spec) + stack_notes(spec) + probe_refusals)
    plan = _with_probe_notes(plan, probed, s)
    from gpuledger.plan.prices import unpriced_kinds, with_unpriced

    plan = with_unpriced(plan, unpriced_kinds(r.accelerators, raw_offers), list(r.accelerators))
    from gpuledger.plan.nodes import trial_nodes, with_nodes
    from gpuledger.plan.pools import with_pool

    plan = with_nodes(plan, offers, s.nodes, list(r.accelerators))
    own = getattr(spec.train, "rollout_gpu", None)
    spans = max((trial_nodes(g, s.nodes) for g in est["gpus"].to_list()), default=1)
    refused = (f"train.rollout_gpu {own}: each trial holds two instances (trainer and rollout), a pool worker is one"
               if own else f"a trial spans {spans} nodes (a cluster of {spans} instances), a pool worker is one"
               if spans > 1 else None)
    plan = with_pool(plan, est, offers, accel, s, mode=r.pool, shared_setup=len({t.setup for t in trials}) <= 1,
                     times=times, refused=refused)
    plan = _with_bands(plan, est, s, probed)
    from gpuledger.plan.packing import packing_options

    packing = packing_options(plan.trials, overhead_s=s.overhead_s, max_parallel=plan.max_parallel,
                              precision=spec.precision)
    if packing:
        plan = replace(plan, packing=packing)
    from gpuledger.plan.rl_roles import is_rl, trial_roles

    return replace(plan, roles=trial_roles(plan, est, probed, rollout_offers, s)) if is_rl(spec.method) else plan


def _with_bands(plan: Plan, est: pl.DataFrame, s: PlanSettings, probed: pl.DataFrame | None) -> Plan:
    from gpuledger.plan.bands import with_bands
    from gpuledger.plan.pools import POOL_JOB_START_S

    overhead_s = POOL_JOB_START_S if plan.pool is not None and plan.pool.used else s.overhead_s
    return with_bands(plan, est, s, table=s.band_table, probed=probed, overhead_s=overhead_s)


def _plan_local(spec, trials, s: PlanSettings, meta: pl.DataFrame, machine, measurements: pl.DataFrame | None,
                probes: pl.DataFrame | None) -> Plan:
    from gpuledger.plan.local import local_accel, local_cpu_share, local_offers, local_times, local_usable_gib
    from gpuledger.plan.prices import local_rate
    from gpuledger.plan.probes import plausible_probes, probes_for_trials
    from gpuledger.plan.throughput_calibration import calibrate

    rate = local_rate(spec, machine)
    offers = local_offers(machine, rate.usd_per_hour, rate.source, rate.as_of)
    est = trial_estimates(spec, trials, gpu_counts=(1,), device="cpu")
    accel = local_accel(machine, est["precision"].unique().to_list())
    usable = local_usable_gib(machine)
    max_mem = est["est_memory_gib"].drop_nulls().max() if est.height else None
    cap_mem = int(usable // max_mem) if max_mem else s.max_parallel
    cap = max(1, min(s.max_parallel, machine.cores, max(cap_mem, 1)))
    # the trials share the machine with whatever else runs on it now: the first plan on a busy machine
    # plans for it (measured at every plan; measured runs and probes carry their own load)
    at_once = max(1, min(cap, len(trials)))
    share = local_cpu_share(machine, at_once)
    times = local_times(est, machine, share)
    accel, measured, cal_notes = calibrate(accel, est, times, measurements, s, model=spec.model, hostname=machine.hostname)
    load_note = [machine.load.describe(at_once)] if getattr(machine, "load", None) is not None else []
    notes = [
        f"launcher local: the one offer is this machine ({machine.describe()}); trials may use "
        f"{LOCAL_MEMORY_FRACTION:.0%} of its RAM ({usable:.1f} GiB)",
        f"local rate {rate.usd_per_hour:g} $/h per trial: {rate.label}",
        f"CPU time = FLOPs / (one core's stored matmul rate {machine.matmul_gflops_one_core:.1f} GFLOP/s × efficiency), "
        f"one core per trial; set-up {fmt_duration(s.setup_s)} per trial",
        *load_note,
        f"max_parallel {s.max_parallel} capped at {cap} (cores {machine.cores}, memory fits "
        f"{cap_mem if max_mem else 'any'} trial(s) of {max_mem or 0:.2f} GiB)",
        *cal_notes,
        *search_notes(spec, trials),
        *stack_notes(spec),
    ]
    s = replace(s, max_parallel=cap, spot="never")
    probed, probe_refusals = plausible_probes(probes_for_trials(spec, trials, probes, hostname=machine.hostname), est,
                                              spec.precision, machine=machine)
    plan = plan_from_estimates(est, offers, s, trials_meta=meta, accel=accel, times=times, measured=measured,
                               probed=probed, extra_assumptions=notes + probe_refusals,
                               what_if_shared_cores=machine.cores)
    plan = _with_bands(_with_probe_notes(plan, probed, s), est, s, probed)
    if getattr(machine, "load", None) is not None:
        plan.machine_load = machine.load.to_json(at_once)
    return with_cloud_equivalent(plan, spec, trials, measurements)


def with_cloud_equivalent(plan: Plan, spec, trials, measurements=None) -> Plan:
    """Returns `plan` with `cloud_equivalent`: per trial, what the same trial would cost on the
    cloud GPU a `launcher: skypilot` plan of the same spec picks (accelerator, GPUs, cloud, region,
    instance type, spot, wall_s, usd; from the bundled catalog, with the same formulas)."""
    try:
        cloud = plan_sweep(spec, trials, launcher="skypilot", measurements=measurements,
                           max_parallel=plan.max_parallel)
    except UserError as err:  # the local plan stands without it, and says why
        plan.assumptions.append(f"cloud equivalent not computed: {err}")
        return plan
    from gpuledger.plan.sections import CloudEquivalent

    plan.cloud_equivalent = {
        t["trial_id"]: CloudEquivalent(
            accelerator=t["accelerator"], gpus=t["gpus"], cloud=t["cloud"], region=t["region"],
            instance_type=t["instance_type"], spot=t["spot"], wall_s=t["est_wall_s"], usd=t["est_cost_usd"],
            usd_per_hour=t["usd_per_hour"], price_source=t["price_source"], price_as_of=t["price_as_of"],
            price_snapshot=cloud.price_snapshot)
        for t in cloud.trials if t["feasible"]
    }
    return plan

"""The sweep report's RL cost by role (issue 40; docs/rl.md): per trial run and billing role (trainer,
rollout, reward, ref: gpuledger.vocabulary.BILLING_ROLES), what the plan estimated with its spread, what
the launcher recorded (its billing lines: price x hours) and what the cloud billed (FOCUS line items
attributed to the run, `gpuledger billing ingest`).

Roles come from the run's billing lines (named query `report_sweep_rl_cost`). A run whose roles ran on
instances of their own (a SkyPilot job group: the trainer's and the rollouts' instance) has one line per
role, each its instance's price x hours, and the bill's line items by their `gpuledger-role` label. A run
on one instance (colocated, or split on one node) has one line for every role: it is split by the share
of its logged step time each role took (the trainer's `rl_*_s`, gpuledger/integrations/trl.py: rollout,
log-probs -> ref, reward, train + sync -> trainer), or shown whole ("all roles") when its trainer logged
none. The plan's dollars by role (the stored plan's `roles`, gpuledger/plan/rl_roles.py) are folded into
the same roles (rollout and rollout_idle -> rollout, reference and old_logprob -> ref, reward -> reward,
train, critic, sync and trainer_idle -> trainer; a role the run has no line of goes to trainer, whose
instance ran it), and their spread is the trial's cost band (P10-P90 of `est_cost_usd`, gpuledger/plan/
bands.py) applied to each role: the band is the trial's, not fitted per role.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpuledger.report.common import usd
from gpuledger.report.document import Note, Table

#: the plan's roles (gpuledger.estimate.rl.role_costs) -> the billing role whose instance holds them
PLAN_ROLE = {"rollout": "rollout", "rollout_idle": "rollout", "reference": "ref", "old_logprob": "ref",
             "reward": "reward", "critic": "trainer", "train": "trainer", "sync": "trainer", "trainer_idle": "trainer"}
#: the trainer's measured roles (columns of `report_sweep_rl_roles`) -> billing role
MEASURED_ROLE = {"rollout_s": "rollout", "logprob_s": "ref", "reward_s": "reward", "train_s": "trainer",
                 "sync_s": "trainer"}
#: the order roles are shown in; "all roles": a run's one line no measured split applies to
ORDER = ("trainer", "rollout", "ref", "reward", "all roles")


def planned_by_role(roles: dict[str, dict], shown: set[str]) -> dict[str, float]:
    """Returns the plan's dollars of one trial folded into the billing roles `shown` (see the module)."""
    out: dict[str, float] = {}
    for name, v in (roles or {}).items():
        if v.get("usd") is None:
            continue
        role = PLAN_ROLE.get(name, "trainer")
        role = "all roles" if "all roles" in shown else (role if role in shown else "trainer")
        out[role] = out.get(role, 0.0) + float(v["usd"])
    return out


def _measured_shares(row: dict[str, Any] | None) -> dict[str, float]:
    """Returns {billing role: share of the logged step time} of one run's measured roles; {} without them."""
    step = float((row or {}).get("step_s") or 0.0)
    if step <= 0:
        return {}
    out: dict[str, float] = {}
    for col, role in MEASURED_ROLE.items():
        out[role] = out.get(role, 0.0) + float(row.get(col) or 0.0) / step
    return {k: v for k, v in out.items() if v > 0}


def run_roles(lines: list[dict[str, Any]], measured: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Returns one run's rows by role: {role, where, recorded_usd, billed_usd, basis} (see the module)."""
    roled = [r for r in lines if r.get("role")]
    whole = [r for r in lines if not r.get("role")]
    out = [{"role": r["role"], "where": _where(r), "recorded_usd": r.get("recorded_usd"),
            "billed_usd": r.get("billed_usd"), "basis": "its own billing line"} for r in roled]
    if not whole:
        return out
    rec = _sum(r.get("recorded_usd") for r in whole)
    billed = _sum(r.get("billed_usd") for r in whole)
    shares = _measured_shares(measured) if not roled else {}
    if not shares:
        return out + [{"role": "unlabelled" if roled else "all roles", "where": _where(whole[0]),
                       "recorded_usd": rec, "billed_usd": billed,
                       "basis": "bill items without a role label" if roled else "one instance, no roles logged"}]
    return out + [{"role": role, "where": _where(whole[0]),
                   "recorded_usd": None if rec is None else rec * share,
                   "billed_usd": None if billed is None else billed * share,
                   "basis": f"one instance, {share:.0%} of the logged step time"}
                  for role, share in sorted(shares.items(), key=lambda kv: ORDER.index(kv[0]))]


def _sum(values) -> float | None:
    got = [float(v) for v in values if v is not None]
    return sum(got) if got else None


def _where(r: dict[str, Any]) -> str:
    gpus, acc, inst = r.get("gpus"), r.get("accelerator"), r.get("instance_type")
    kind = f"{gpus}x {acc}" if acc else "CPU"
    return f"{kind} ({inst})" if inst else kind


def _spread(p50: float | None, band: dict[str, Any]) -> str:
    if p50 is None:
        return "-"
    cost, lo, hi = band.get("est_cost_usd"), band.get("est_cost_usd_p10"), band.get("est_cost_usd_p90")
    if not cost or lo is None or hi is None:
        return f"{usd(p50)} (no band)"
    return f"{usd(p50)} ({usd(p50 * lo / cost)}-{usd(p50 * hi / cost)})"


def cost_rows(planned: dict[str, dict], cost: pl.DataFrame | None, measured: pl.DataFrame | None,
              bands: dict[str, Any], index: dict[str, Any]) -> list[list[Any]]:
    """Returns the table's rows: per trial run and role, planned (P10-P90), recorded, billed and what the
    recorded dollars are over the planned ones; a planned trial without runs gets its planned roles."""
    lines = cost.to_dicts() if cost is not None and cost.height else []
    by_run: dict[str, list[dict]] = {}
    for r in lines:
        by_run.setdefault(r["run_id"], []).append(r)
    meas = {r["run_id"]: r for r in (measured.to_dicts() if measured is not None and measured.height else [])}
    trial_of = {run: rows[0]["trial_id"] for run, rows in by_run.items()}
    trials = sorted(set(planned) | set(trial_of.values()),
                    key=lambda t: (index.get(t) is None, index.get(t) or 0, t))
    out: list[list[Any]] = []
    for tid in trials:
        band = ((bands or {}).get("trials") or {}).get(tid) or {}
        runs = [run for run, t in trial_of.items() if t == tid]
        if not runs:
            plan = planned_by_role((planned.get(tid) or {}).get("roles") or {}, set(PLAN_ROLE.values()))
            out += [[index.get(tid, tid), "not run", role, "-", _spread(v, band), "-", "-", "-", "-"]
                    for role, v in sorted(plan.items(), key=lambda kv: ORDER.index(kv[0]))]
            continue
        for run in sorted(runs):
            rows = run_roles(by_run[run], meas.get(run))
            plan = planned_by_role((planned.get(tid) or {}).get("roles") or {}, {r["role"] for r in rows})
            for r in rows:
                p50 = plan.get(r["role"])
                ratio = f"{r['recorded_usd'] / p50:.2f}x" if p50 and r["recorded_usd"] is not None else "-"
                out.append([index.get(tid, tid), run, r["role"], r["where"], _spread(p50, band),
                            usd(r["recorded_usd"]) if r["recorded_usd"] is not None else "-",
                            usd(r["billed_usd"]) if r["billed_usd"] is not None else "not billed yet",
                            ratio, r["basis"]])
    return out


def cost_blocks(planned: dict[str, dict], cost: pl.DataFrame | None, measured: pl.DataFrame | None,
                bands: dict[str, Any], index: dict[str, Any]) -> list[Any]:
    """Returns the blocks (a note and a table) of the RL cost by role; [] when there is nothing to show."""
    rows = cost_rows(planned, cost, measured, bands, index)
    if not rows:
        return []
    note = ("Cost by role: planned (the plan's dollars by role, P50 with the trial's P10-P90 cost band), recorded "
            "(the launcher's billing lines: price x hours; a job group's instances one line each) and billed "
            "(the cloud's FOCUS line items attributed to the run, by their gpuledger-role label; `gpuledger billing "
            "ingest`). A run on one instance is split by each role's share of its logged step time. "
            "recorded/planned: the recorded dollars over the planned P50.")
    return [Note(note, "small"),
            Table(["trial", "run", "role", "instance", "planned P50 (P10-P90)", "recorded", "billed",
                   "recorded/planned", "basis"], rows, max_rows=400, markdown_columns=9)]

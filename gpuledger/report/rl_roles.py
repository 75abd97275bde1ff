"""The sweep report's RL roles (GRPO/PPO sweeps, docs/rl.md): per trial, the placement the plan chose
(colocated or split, each GPU group) with its planned time and dollars by role (the stored plan's
`roles`, gpuledger/plan/rl_roles.py), and what the trial's trainer measured by role (named query
`report_sweep_rl_roles`: the seconds gpuledger/integrations/trl.py logged per role, summed over the
run's steps) with the run's cost split by each role's share of its logged step time.

The measured split is of the trainer's process (the roles of one rank; rollout GPUs of their own are
billed in the same run): a role's dollars are the run's cost x its seconds / the steps' seconds, so
they add up to the part of the run's cost its logged steps took (start-up and the rest stay apart).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from gpuledger.report.common import duration, usd
from gpuledger.report.document import Note, Section, Table

#: measured columns of `report_sweep_rl_roles` (seconds summed over the run's steps), in the report's order
MEASURED = (("rollout", "rollout_s"), ("log-probs", "logprob_s"), ("reward", "reward_s"), ("train", "train_s"),
            ("sync", "sync_s"))


def plan_roles(rows: list[dict[str, Any]]) -> dict[str, dict]:
    """Returns {trial_id: roles} of the stored plan (`report_sweep_plan`); {} when it has none."""
    text = rows[0].get("plan_json") if rows else None
    try:
        plan = json.loads(text) if isinstance(text, str) else (text or {})
    except ValueError:
        return {}
    if not isinstance(plan, dict):
        return {}
    return {t["trial_id"]: t["roles"] for t in plan.get("trials") or []
            if isinstance(t, dict) and t.get("trial_id") and isinstance(t.get("roles"), dict)}


def measured_roles(row: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Returns {role: {seconds, usd}} of one measured run (see the module)."""
    step = float(row.get("step_s") or 0.0)
    cost = row.get("cost_usd")
    out = {}
    for name, col in MEASURED:
        sec = float(row.get(col) or 0.0)
        out[name] = {"seconds": sec,
                     "usd": (float(cost) * sec / step) if cost is not None and step > 0 else None}
    return out


def _groups(r: dict) -> str:
    return ", ".join(f"{name} {g['gpus']}x {g['accelerator']}" for name, g in (r.get("groups") or {}).items())


def _role_text(roles: dict[str, dict]) -> str:
    return "; ".join(f"{name} {duration(v.get('seconds'))} {usd(v.get('usd'))}" for name, v in roles.items()
                     if (v.get("seconds") or 0) > 0)


def rl_roles_section(planned: dict[str, dict], measured: pl.DataFrame | None,
                     index: dict[str, Any] | None = None, cost: pl.DataFrame | None = None,
                     bands: dict[str, Any] | None = None) -> Section | None:
    """Returns the section of an RL sweep's roles, or None when neither the plan nor the runs have roles.
    `index`: trial_id -> its index in the sweep (for the table's first column); `cost`: the runs' cost by
    billing role (`report_sweep_rl_cost`) and `bands` the stored plan's bands, for the cost by role
    (gpuledger/report/rl_cost.py)."""
    from gpuledger.report.rl_cost import cost_blocks

    runs = measured.to_dicts() if measured is not None and measured.height else []
    if not planned and not runs:
        return None
    index = index or {}
    by_trial: dict[str, list[dict]] = {}
    for r in runs:
        by_trial.setdefault(r["trial_id"], []).append(r)
    rows = []
    for tid in sorted(set(planned) | set(by_trial), key=lambda t: (index.get(t) is None, index.get(t) or 0, t)):
        p = planned.get(tid) or {}
        placement = f"{p.get('placement')} ({_groups(p)}; {p.get('engine')})" if p else "-"
        plan_text = _role_text(p.get("roles") or {}) if p else "-"
        for r in by_trial.get(tid) or [None]:
            got = _role_text(measured_roles(r)) if r else "not measured (the trainer logged no roles)"
            steps = int(r["steps"]) if r else None
            rows.append([index.get(tid, tid), placement, plan_text, steps if steps is not None else "-", got,
                         usd(r.get("cost_usd")) if r else "-"])
    note = ("Each trial's placement as the plan chose it (colocated: rollouts and training on the same GPUs; split: "
            "vLLM on GPUs of their own) with its planned time and dollars by role (the idle rows: what a GPU group "
            "waits while the other works, billed all the same), and what its trainer measured by role "
            "(gpuledger.integrations.trl.track_roles; log-probs: the reference and old-policy forwards), the "
            "run's cost split by each role's share of its logged step time.")
    return Section("RL roles: time and dollars by role", [
        Note(note, "small"),
        Table(["trial", "placement", "planned by role", "steps measured", "measured by role", "run cost"], rows,
              numeric=[3, 5], max_rows=200, markdown_columns=6),
        *cost_blocks(planned, cost, measured, bands or {}, index)])

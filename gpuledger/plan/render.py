"""The plan as text (`render_plan`) and the budget guard's refusal (`budget_guard`).

Durations are seconds inside; they are converted for display only, by `gpuledger.plan.formats`
(`fmt_duration`, `fmt_usd`)."""

from __future__ import annotations

import math

from gpuledger.errors import BudgetExceeded
from gpuledger.plan.formats import fmt_duration, fmt_usd
from gpuledger.plan.model import Plan


def budget_guard(plan: Plan, *, probes_usd: float = 0.0) -> None:
    """Raises BudgetExceeded (exit 3) when the plan's spend (the expected spend under pruning when the
    plan has one, else its total) plus what the sweep's probes already spent is over its budget; the
    message gives the estimate, the budget, the top cost drivers, and what would fit.

    `probes_usd`: the sweep's probe spend so far (runs with purpose 'probe': `gpuledger probe`, or
    `search.probe: auto` in `gpuledger sweep` just before this check), money the plan's trials do not
    include (docs/probes.md)."""
    budget = plan.budget_usd or 0.0
    total = plan.total_est_cost_usd
    probes_usd = max(0.0, float(probes_usd))
    pr = plan.pruning
    decided = plan.decided_usd
    if plan.within_budget and (probes_usd == 0 or decided + probes_usd <= budget + 1e-9):
        return
    from gpuledger.plan.sections import BudgetAlternatives

    alt = plan.alternatives or BudgetAlternatives()
    probes = f" + {fmt_usd(probes_usd)} the sweep's probes spent" if probes_usd > 0 else ""
    q, at = confidence_words(plan)
    if plan.pruned_expected_usd is not None:
        lines = [f"expected spend under pruning{at} {fmt_usd(decided)}{q} ({pr.source}: {pr.basis}){probes} exceeds "
                 f"the budget {fmt_usd(budget)} (by {fmt_usd(decided + probes_usd - budget)}); the full, unpruned spend of "
                 f"the {len(plan.feasible_trials)} trial(s) of sweep {plan.sweep} is {fmt_usd(total)} at P50; nothing was "
                 "launched."]
    else:
        lines = [f"estimated cost{at} {fmt_usd(decided)}{q}{probes} exceeds the budget {fmt_usd(budget)} "
                 f"(by {fmt_usd(decided + probes_usd - budget)}) for {len(plan.feasible_trials)} trial(s) of sweep {plan.sweep}; "
                 "nothing was launched."]
        if pr is not None:
            lines.append(f"spend under pruning: {pr.basis}")
    total = decided
    lines.append("top cost drivers:")
    for d in alt.top_cost_drivers:
        lines.append(
            f"  {d.trials} trial(s) on {d.gpus}x {d.accelerator} {'spot' if d.spot else 'on-demand'} "
            f"({d.instance_type}): {fmt_usd(d.cost_usd)} ({d.share:.0%}), {fmt_duration(d.wall_s)} of instance time"
        )
    lines.append("what would fit:")
    lines.append(f"  {alt.trials_within_budget} of {alt.trials_feasible} trial(s) fit the budget (cheapest first): "
                 "shrink the grid (fewer values, search.exclude, or strategy: random with n_trials)")
    for key, label in (("all_spot_usd", "spot for every trial (resources.spot: always)"),
                       ("cheapest_ignoring_deadline_usd", "the cheapest choice per trial, ignoring the deadline")):
        v = getattr(alt, key)
        if v is not None and v.total_usd < total - 1e-9:
            fits = "fits" if v.total_usd + probes_usd <= budget else "still over"
            lines.append(f"  {label}: {fmt_usd(v.total_usd)} ({fits})")
    cheaper = sorted(
        ((a, v) for a, v in (alt.by_accelerator or {}).items() if v.trials == v.of and v.total_usd < total - 1e-9),
        key=lambda kv: kv[1].total_usd,
    )
    for acc, v in cheaper[:2]:
        fits = "fits" if v.total_usd + probes_usd <= budget else "still over"
        lines.append(f"  every trial on {acc} (resources.accelerators: [{acc}]): {fmt_usd(v.total_usd)} ({fits})")
    lines.append(f"raise budget.max_usd to at least {fmt_usd(math.ceil((total + probes_usd) * 100) / 100)}, change the spec as above, "
                 "or force the sweep (`gpuledger sweep --force`, `Ledger.run(spec, force=True)`; recorded in the warehouse).")
    raise BudgetExceeded("\n".join(lines))


def confidence_words(plan: Plan) -> tuple[str, str]:
    """Returns (' (P50 $X beside; budget.confidence p90)', ' at P90') for the spend a decision compared
    (empty strings for a plan without bands)."""
    if plan.bands is None or not plan.bands.confidence:
        return "", ""
    if plan.bands.confidence == "p90":
        return f" (P50 {fmt_usd(plan.spend_at('p50'))} beside; budget.confidence p90)", " at P90"
    return f" (P90 {fmt_usd(plan.spend_at('p90'))} beside; budget.confidence p50)", " at P50"


def render_plan(plan: Plan, *, max_rows: int = 60, width: int = 160) -> str:
    """Returns the plan as text: a table of trials, then totals, the cloud equivalent of a local
    plan, the what-if curve and the assumptions."""
    import io

    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=False, color_system=None, no_color=True)
    t = Table(title=f"plan for {plan.sweep} ({len(plan.trials)} trials, launcher {plan.launcher})", show_lines=False)
    for col, just in (("#", "right"), ("trial", "left"), ("params", "left"), ("GPU", "left"), ("where", "left"),
                      ("spot", "left"), ("mem GiB", "right"), ("usable", "right"), ("time", "right"), ("P10-P90", "right"),
                      ("basis", "left"), ("cost", "right"), ("P90 $", "right"), ("note", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for r in plan.trials[:max_rows]:
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        if r["feasible"]:
            t.add_row(str(r["trial_index"]), r["trial_id"], params, f"{r['gpus']}x {r['accelerator']} ({r['sharding']})",
                      f"{r['cloud']}/{r['region']} {r['instance_type']}", "yes" if r["spot"] else "no",
                      f"{r['est_memory_gib']:.2f}", f"{r['usable_memory_gib']:.2f}", fmt_duration(r["est_wall_s"]),
                      _span(r), r.get("est_basis") or "estimate", fmt_usd(r["est_cost_usd"]),
                      fmt_usd(r["est_cost_usd_p90"]) if r.get("est_cost_usd_p90") is not None else "-",
                      "; ".join(x for x in (r["reason"], r.get("memory_note")) if x))
        else:
            mem = r.get("est_memory_gib")
            t.add_row(str(r["trial_index"]), r["trial_id"], params, "-", "-", "-",
                      f"{mem:.2f}" if mem is not None else "-", "-", "-", "-", "-", "-", "-", f"INFEASIBLE: {r['reason']}")
    con.print(t)
    if len(plan.trials) > max_rows:
        con.print(f"... {len(plan.trials) - max_rows} more trials (use --json for all)")
    infeasible = len(plan.trials) - len(plan.feasible_trials)
    budget = plan.budget_usd if plan.budget_usd is not None and math.isfinite(plan.budget_usd) else None
    b = plan.bands
    band = f" (P10 {fmt_usd(b.total_cost_usd_p10)} - P90 {fmt_usd(b.total_cost_usd_p90)})" if b is not None else ""
    q, at = confidence_words(plan)
    what = "expected spend under pruning" if plan.pruned_expected_usd is not None else "spend"
    decided = f": {what}{at} {fmt_usd(plan.decided_usd)}{q}" if b is not None and b.confidence else ""
    span = f" (P90 {fmt_duration(b.makespan_s_p90)})" if b is not None else ""
    con.print(
        f"total {fmt_usd(plan.total_est_cost_usd)}{band}"
        + (f" of budget {fmt_usd(budget)} ({'within' if plan.within_budget else 'OVER'} budget{at}{decided})"
           if budget is not None else "")
        + f"; makespan {fmt_duration(plan.makespan_s)}{span} on {plan.max_parallel} slot(s)"
        + (f"; deadline {fmt_duration(plan.deadline_s)}" if plan.deadline_s else "")
        + f"; {len(plan.feasible_trials)} feasible, {infeasible} infeasible; prices {plan.price_snapshot}"
    )
    if plan.pruning is not None:
        pr = plan.pruning
        if pr.expected_usd is not None:
            q, at = confidence_words(plan)
            con.print(f"expected spend under pruning {fmt_usd(pr.expected_usd)} at P50 (the budget guard compares it"
                      f"{at or ' at P50'}: {fmt_usd(plan.decided_usd)}; full, unpruned {fmt_usd(pr.full_usd)}); "
                      f"source {pr.source}: {pr.basis}", soft_wrap=True)
        else:
            con.print(f"expected spend under pruning: {pr.basis}", soft_wrap=True)
        if pr.settings:
            con.print(f"pruning settings ({pr.settings['source']}): {pr.settings['why']}", soft_wrap=True)
        if pr.warning:
            con.print(pr.warning, soft_wrap=True)
    if plan.parallel is not None:
        par = plan.parallel
        con.print(par.why, soft_wrap=True)
        con.print("  slots  makespan  expected cost  meets deadline", soft_wrap=True)
        for r in par.curve:
            con.print(f"  {r.slots:>5}  {fmt_duration(r.makespan_s):>8}  {fmt_usd(r.cost_usd):>13}  "
                      f"{'yes' if r.meets_deadline else 'no':>14}{'  <- chosen' if r.chosen else ''}", soft_wrap=True)
    if plan.packing is not None:
        pk = plan.packing
        if pk.options:
            con.print(f"packed trials (k per GPU, one job, k agents; {pk.why}):", soft_wrap=True)
        if pk.chosen is not None:  # what the sweep runs (resources.trials_per_gpu)
            con.print(f"  runs {pk.chosen} trial(s) per slot: {pk.chosen_why}", soft_wrap=True)
        for o in pk.options:
            if o.fits:
                con.print(f"  k={o.k:>2}: {o.groups} job(s), makespan {fmt_duration(o.makespan_s)}, "
                          f"{fmt_usd(o.cost_usd)}{'  <- cheapest no slower than one per GPU' if o.k == pk.recommended else ''}",
                          soft_wrap=True)
            else:
                con.print(f"  k={o.k:>2}: does not fit ({o.reason})", soft_wrap=True)
    if plan.roles:
        from gpuledger.plan.rl_roles import roles_line

        for r in plan.trials[:max_rows]:
            if r["trial_id"] in plan.roles:
                con.print(roles_line(r["trial_id"], plan.roles[r["trial_id"]]), soft_wrap=True, markup=False)
    if plan.pool is not None and plan.pool.workers:
        from gpuledger.plan.pools import pool_assumption

        con.print(pool_assumption(plan.pool), soft_wrap=True)
    if plan.cloud_equivalent:
        eq = list(plan.cloud_equivalent.values())
        accs = sorted({f"{e.gpus}x {e.accelerator} ({e.cloud} {e.instance_type}{', spot' if e.spot else ''})" for e in eq})
        con.print(f"cloud equivalent: the same {len(eq)} trial(s) on {', '.join(accs)} would take "
                  f"{fmt_duration(sum(e.wall_s for e in eq))} of instance time and cost "
                  f"{fmt_usd(sum(e.usd for e in eq))} (what a cloud plan of this spec picks)")
    w = Table(title="what-if: parallel slots vs expected time-to-recipe and cost")
    pooled = bool(plan.what_if) and "pool_cost_usd" in plan.what_if[0]
    for col in ("parallel", "time-to-recipe", "cost") + (("pool: time-to-recipe", "pool: cost") if pooled else ()):
        w.add_column(col, justify="right")
    for p in plan.what_if:
        pool_cells = (fmt_duration(p["pool_time_to_recipe_s"]), fmt_usd(p["pool_cost_usd"])) if pooled else ()
        w.add_row(str(p["parallel"]), fmt_duration(p["time_to_recipe_s"]), fmt_usd(p["cost_usd"]), *pool_cells)
    con.print(w)
    bands_said = sorted({r["est_band"] for r in plan.feasible_trials if r.get("est_band")})
    for said in bands_said[:6]:
        con.print(f"band: {said}", soft_wrap=True, markup=False)
    con.print("assumptions:")
    for a in plan.assumptions:
        con.print(f"  - {a}", soft_wrap=True, markup=False)
    return buf.getvalue()


def _span(r: dict) -> str:
    lo, hi = r.get("est_wall_s_p10"), r.get("est_wall_s_p90")
    return f"{fmt_duration(lo)}-{fmt_duration(hi)}" if lo is not None and hi is not None else "-"

"""The adaptive sweep's sections of the ROI report (strategy tpe or asha; grid and random sweeps have
none): progress with every trial's end (pruned ones visible), what the full grid would have cost
(estimated and measured), the money pruning saved, and for asha the parallelism what-if simulated from
the measured learning curves. Data and numbers: `gpuledger.report.adaptive_data`.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpuledger.report import charts
from gpuledger.report.adaptive_data import (
    AdaptiveData,
    asha_what_if,
    est_basis_text,
    full_grid,
    grid_replay,
    point_key,
    pruning_savings,
)
from gpuledger.report.common import duration, num, pct, usd
from gpuledger.report.document import Card, Cards, Columns, Figure, Note, Section, Table
from gpuledger.report.sweep_data import SweepData, params_text, trial_label

#: how a trial's end is drawn on the progress charts: (legend, colour, marker) by its trial status
END_STYLES = {
    "succeeded": ("ran to its end", charts.TEAL, "o"),
    "pruned": ("pruned", charts.ORANGE, "x"),
    "other": ("failed", charts.GREY, "s"),
}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _idx(data: SweepData) -> dict[str, Any]:
    t = data.trials
    return dict(zip(t["trial_id"].to_list(), t["trial_index"].to_list(), strict=True)) if t.height else {}


# ------------------------------------------------------------------------------------------ progress


def progress_section(data: SweepData, ad: AdaptiveData, s: dict[str, Any], div: float, unit: str) -> Section:
    """Returns the progress section of an adaptive sweep: best-so-far against elapsed time and against
    dollars spent, with each trial's end as a point (pruned trials at the last value they reported)."""
    metric = ad.metric
    hline = (float(s["target"]), f"target {num(s['target'], 5)}") if s["target"] is not None else None
    best_t, best_c = [], []
    groups_t: dict[str, list[tuple[float, float]]] = {k: [] for k in END_STYLES}
    groups_c: dict[str, list[tuple[float, float]]] = {k: [] for k in END_STYLES}
    for r in ad.ends.to_dicts():
        x_t, x_c = float(r["end_offset_s"]) / div, float(r["cumulative_cost_usd"] or 0.0)
        if r["best_so_far"] is not None:
            best_t.append((x_t, float(r["best_so_far"])))
            best_c.append((x_c, float(r["best_so_far"])))
        if r["run_status"] == "succeeded":
            kind, y = "succeeded", r["metric_value"]
        else:
            kind = "pruned" if r["trial_status"] == "pruned" else "other"
            y = r["last_value"]
        if y is not None:
            groups_t[kind].append((x_t, float(y)))
            groups_c[kind].append((x_c, float(y)))

    def figure(best, groups, title, x_label) -> str:
        return charts.progress_chart(best, [(*END_STYLES[k], pts) for k, pts in groups.items() if pts],
                                     title=title, x_label=x_label, y_label=metric, hline=hline)

    c = charts.colour_name
    caption = (f"Each point is a run's end: {c(charts.TEAL)} = ran to its end, at its final {metric}; "
               f"{c(charts.ORANGE)} ✕ = pruned by the search, at the last {metric} it reported (an earlier "
               f"step's value, so not comparable with the final ones); {c(charts.GREY)} = failed or stopped. "
               f"The {c(charts.BLUE)} step is the best final {metric} so far (measured).")
    return Section("Progress: best metric over time and money", [Columns([
        Figure(figure(best_t, groups_t, f"best {metric} so far vs elapsed time", f"time since sweep start ({unit})"),
               caption),
        Figure(figure(best_c, groups_c, f"best {metric} so far vs dollars spent", "cumulative spend (USD)"),
               "The same runs against the cumulative spend when each ended (Σ cost of the runs ended by then; "
               f"{s['price_source']}).")])])


# ------------------------------------------------------------------------------------------ full grid


def grid_section(data: SweepData, ad: AdaptiveData, s: dict[str, Any]) -> Section:
    """Returns 'What the full grid would have cost': the plan's estimate of every candidate point, the
    measured cost of a grid sweep of the same experiment when one ran, and this sweep's cost."""
    g = full_grid(data.trials, ad)
    metric = ad.metric
    money = s["price_source"]
    cards = []
    rep, _why = grid_replay(ad, data.sweep.get("max_parallel"))
    if rep is not None:
        lo, hi = rep["cost_vs_grid_range"]
        kept = round(rep["recipe_kept"] * rep["replays"])
        cards.append(Card(f"cost vs the grid, over {rep['orders']} orders", pct(100.0 * rep["cost_vs_grid"]),
                          f"simulated: this sweep's settings (min_steps {ad.min_steps}, reduction_factor "
                          f"{ad.reduction_factor}{', cost-aware stopping' if ad.stopping == 'cost' else ''}) replayed "
                          f"over {rep['orders']} arrival orders of grid sweep {g['grid_sweep_id']}'s measured curves "
                          f"at {rep['slots']} slot(s): median of its dollars, range {pct(100.0 * lo)}–{pct(100.0 * hi)} "
                          "(gpuledger.search.replay)"))
        cards.append(Card(f"recipe kept, over {rep['orders']} orders", f"{kept} of {rep['replays']}",
                          f"simulated: replays whose best {metric} is within 2% of the grid's; trial-seconds median "
                          f"{pct(100.0 * rep['trial_s_vs_grid'])} of the grid's"))
    if g["grid_cost_usd"] is not None:
        cards.append(Card("saved vs the grid (measured)", usd(g["saved_vs_grid_usd"]),
                          f"measured, this sweep's one arrival order: grid sweep {g['grid_sweep_id']} cost "
                          f"{usd(g['grid_cost_usd'])}, this sweep {usd(g['cost_usd'])} "
                          f"({pct(g['saved_vs_grid_pct'])} less)"))
        cards.append(Card("trial-seconds vs the grid", pct(g["trial_s_vs_grid_pct"]),
                          f"measured: {duration(g['trial_s'])} here vs {duration(g['grid_trial_s'])} in grid sweep "
                          f"{g['grid_sweep_id']} (Σ run wall-clock, pruned runs included)"))
        if g["best_value"] is not None and g["grid_best_value"]:
            cards.append(Card(f"best {metric} vs the grid", pct(100.0 * (g["best_value"] / g["grid_best_value"] - 1), True),
                              f"measured: {num(g['best_value'], 5)} here vs {num(g['grid_best_value'], 5)} in grid "
                              f"sweep {g['grid_sweep_id']}"))
    if g["saved_vs_est_usd"] is not None:
        cards.append(Card("saved vs the grid (estimated)", usd(g["saved_vs_est_usd"]),
                          f"plan estimate of all {g['est_points']} points {usd(g['est_cost_usd'])} − this sweep's "
                          f"measured {usd(g['cost_usd'])}"))
    what = "every planned point" if ad.ranges else "full grid"
    rows = [[f"{what}: plan estimate", usd(g["est_cost_usd"]) if g["est_points"] else "—",
             duration(g["est_trial_s"]) if g["est_points"] else "—", f"{g['est_points']} of {g['points']}", "—",
             f"estimate: Σ of this sweep's plan rows, one per candidate point ({est_basis_text(ad)})"]]
    if g["grid_sweep_id"] is not None:
        rows.append([f"full grid: measured ({g['grid_sweep_id']})", usd(g["grid_cost_usd"]), duration(g["grid_trial_s"]),
                     f"{g['grid_succeeded']} of {g['points']}", num(g["grid_best_value"], 5),
                     f"measured: Σ of every run of grid sweep {g['grid_sweep_id']} ({g['grid_sweep_name']})"])
    rows.append([f"this sweep ({ad.strategy})", usd(g["cost_usd"]), duration(g["trial_s"]),
                 f"{g['ran']} of {g['points']} ({g['pruned']} pruned)", num(g["best_value"], 5),
                 "measured: Σ of every run of this sweep, pruned runs included"])
    blocks: list = [Cards(cards), Table(["what", "cost", "trial-seconds", "points run", f"best {metric}", "source"],
                                        rows, numeric=[1, 2, 4], highlight=[len(rows) - 1])]
    if g["grid_sweep_id"] is None:
        examined = (f"{_n(ad.twin_candidates, 'grid sweep')} of the same model, "
                    f"method, objective and training settings, none with the same {g['points']} points"
                    if ad.twin_candidates else "no grid sweep of the same model, method, objective and training settings")
        blocks.append(Note(f"No measured grid: this warehouse holds {examined}. Run the spec with "
                           f"`strategy: grid` to measure it.", "small"))
    else:
        blocks.append(Note(f"Measured grid: sweep {g['grid_sweep_id']}, the newest grid sweep with the same model, "
                           f"method, objective ({metric}, {ad.goal}), training settings and the same "
                           f"{g['points']} points; {g['grid_succeeded']} of them ran to their end there.", "small"))
    blocks.append(Note(f"Money: {money}. Trial-seconds: Σ wall-clock of every run (attempt).", "small"))
    if ad.ranges:
        blocks.insert(0, Note(f"The search space has a range, so there is no grid: the {g['points']} planned points "
                              f"are the ones the search drew, and 'every planned point' is what running each of them "
                              f"to its end would cost.", "small"))
    return Section("What the full grid would have cost", blocks)


# ------------------------------------------------------------------------------------------ pruning


def pruning_section(data: SweepData, ad: AdaptiveData, s: dict[str, Any]) -> Section:
    """Returns 'Money saved by pruning': per pruned trial its full-run cost minus what it cost; the total."""
    rows, total = pruning_savings(data.trials, ad)
    if not rows:
        why = ("the search prunes nothing without `search.pruning`" if ad.min_steps is None
               else f"every trial went on at every rung (min_steps {ad.min_steps}, reduction_factor "
                    f"{ad.reduction_factor})")
        return Section("Money saved by pruning", [Note(f"No trial was pruned: {why}.")])
    twin = ad.twin.sweep_id if ad.twin else None
    parts = []
    if total["from_grid"]:
        parts.append(f"{total['from_grid']} measured in grid sweep {twin}")
    if total["from_plan"]:
        parts.append(f"{total['from_plan']} from the plan's estimate ({est_basis_text(ad)})")
    if total["unknown"]:
        parts.append(f"{total['unknown']} with neither, left out")
    src = f"Σ over {_n(total['pruned'], 'pruned trial')} of full-run cost − what each cost; full-run costs: {'; '.join(parts)}"
    cards = [Card("saved by pruning", usd(total["saved_usd"]), src),
             Card("trial-seconds saved", duration(total["saved_s"]),
                  "the same, in wall-clock: full-run time − the time each pruned trial ran"),
             Card("pruned trials cost", usd(total["cost_usd"]),
                  f"measured: Σ of their runs (billed for what they ran); {_n(total['pruned'], 'trial')}")]
    idx = _idx(data)
    basis = {"grid": f"measured (grid {twin})", "plan": "plan estimate", None: "—"}
    table = Table(
        ["trial", "params", "values reported", "ran", "cost", "full run", "full-run cost", "saved", "full-run source"],
        [[trial_label(r["trial_id"], idx.get(r["trial_id"])), params_text(r["params"]), r["values_reported"],
          duration(r["wall_s"]), usd(r["cost_usd"]), duration(r["full_wall_s"]), usd(r["full_cost_usd"]),
          usd(r["saved_usd"]), basis[r["basis"]]] for r in rows],
        numeric=[2, 3, 4, 5, 6, 7], max_rows=200, markdown_columns=8)
    note = Note(f"Full-run cost of a pruned trial: what the same point cost where it ran to its end in a grid of "
                f"the same experiment (measured), else this sweep's plan estimate of the trial. Money: "
                f"{s['price_source']}.", "small")
    return Section("Money saved by pruning", [Cards(cards), table, note])


# ------------------------------------------------------------------------------------------ what-if


def _in_unit(seconds: float | None, div: float) -> str:
    if seconds is None:
        return "—"
    v = seconds / div
    digits = 2 if div >= 3600 else 1
    return f"{v:,.{digits}f}"


def what_if_section(data: SweepData, ad: AdaptiveData, s: dict[str, Any], div: float, unit: str) -> Section:
    """Returns the parallelism what-if under ASHA: the sweep's measured learning curves replayed at
    1, 2, 4, ... slots (trial-seconds, makespan, cost, best found, time to best per slot count)."""
    actual = data.sweep.get("max_parallel")
    rows, basis, why = asha_what_if(data.trials, ad, actual)
    title = "Parallelism what-if under ASHA (replayed from the measured learning curves)"
    if not rows:
        return Section(title, [Note(f"No what-if: {why}.", "small")])
    metric = ad.metric
    best = s["best_metric"]
    worse = [r for r in rows if r["best_value"] is None or (best is not None and abs(r["best_value"] - best) > 1e-12
                                                             and (r["best_value"] > best) == (ad.goal == "minimize"))]
    colours = {"actual": charts.RED, "same": charts.BLUE, "worse": charts.ORANGE}
    groups: list[list[dict[str, Any]]] = []  # consecutive Ks at the same point share one label
    for r in rows:
        if r["time_to_best_s"] is None:
            continue
        if groups and (groups[-1][0]["time_to_best_s"], groups[-1][0]["cost_usd"]) == (r["time_to_best_s"], r["cost_usd"]):
            groups[-1].append(r)
        else:
            groups.append([r])
    pts = []
    for grp in groups:
        ks = [r["slots"] for r in grp]
        actual = any(r["actual"] for r in grp)
        kind = "actual" if actual else ("worse" if grp[0] in worse else "same")
        pts.append(charts.Point(grp[0]["time_to_best_s"] / div, grp[0]["cost_usd"],
                                f"K={ks[0]}" if len(ks) == 1 else f"K={ks[0]}–{ks[-1]}", highlight=actual,
                                colour=colours[kind]))
    c = charts.colour_name
    fig = Figure(charts.scatter_chart(
        pts, title="ASHA what-if: time to best vs cost", x_label=f"time to best ({unit})", y_label="cost (USD)",
        connect=True, label_all=True, x_zero=True, y_zero=True, width_in=charts.FULL_IN,
        legend=[("this sweep's K", colours["actual"]), ("same best", colours["same"]),
                ("worse best found", colours["worse"])]),
        f"Each point is K parallel slots: when the replay's best trial ended, and what every trial of the replay "
        f"cost. {c(colours['worse'])} = the replay at that K ends with a worse best {metric} than this sweep "
        f"found (more slots promote more trials before the best is known, and prune differently).")
    table = Table(
        ["K (slots)", f"trial-seconds ({unit})", f"makespan ({unit})", "cost", "pruned", "ran to end", "extrapolated",
         f"best {metric}", f"time to best ({unit})", "actual"],
        [[r["slots"], _in_unit(r["trial_seconds"], div), _in_unit(r["makespan_s"], div), usd(r["cost_usd"]),
          r["pruned"], r["completed"], r["extrapolated"], num(r["best_value"], 5), _in_unit(r["time_to_best_s"], div),
          "← this sweep" if r["actual"] else ""] for r in rows],
        numeric=[0, 1, 2, 3, 4, 5, 6, 7, 8], highlight=[i for i, r in enumerate(rows) if r["actual"]])
    notes = [Note(
        f"Simulated, not measured: ASHA (min_steps {ad.min_steps}, reduction_factor {ad.reduction_factor}, Optuna's "
        f"SuccessiveHalvingPruner as the sweep ran it) replayed by gpuledger.search.asha_replay over the "
        f"{basis['curves']} learning curves this sweep measured ({metric} and its time, warehouse `metrics`), the "
        f"trials in the order this sweep launched them. Cost = trial-seconds × this sweep's measured "
        f"{usd(basis['usd_per_trial_s'] * 3600)} per trial-hour ({usd(basis['measured_cost_usd'])} over "
        f"{duration(basis['measured_trial_s'])} of runs; {s['price_source']}). Extrapolated: trials the replay "
        f"promoted past where their real run was pruned, their curve held at its last value (their final {metric} "
        f"is the last one measured, likely worse than a full run would reach). The replay has no launch overhead between "
        f"trials, so its makespan is shorter than the sweep's.", "small")]
    mine = next((r for r in rows if r["actual"]), None)
    if mine is not None:
        notes.append(Note(f"Check at this sweep's K={mine['slots']}: the replay spends "
                          f"{duration(mine['trial_seconds'])} of trial time and prunes {_n(mine['pruned'], 'trial')}; "
                          f"measured: {duration(basis['measured_trial_s'])} and "
                          f"{data.trials.filter(pl.col('status') == 'pruned').height} pruned.", "small"))
    return Section(title, [fig, table, *notes])  # the table is too wide to sit beside the chart


# ------------------------------------------------------------------------------------------ all

#: the adaptive sections' definitions (added to "How to read this"; for asha the what-if one replaces
#: the definition of the what-if from measured durations)
HOW_TO_READ = [
    ("Full grid (estimated)", "Σ of the sweep's own plan rows (trials.est_cost_usd, est_wall_s): one per point "
                              "of the search's lists, whether the search ran it or not."),
    ("Full grid (measured)", "Σ cost and wall-clock of every run of a grid sweep in the warehouse with the same "
                             "model, method, objective, training settings and set of points (the newest with the "
                             "most points run to their end; its id is named)."),
    ("Cost vs the grid, over N orders", "Simulated: this sweep's pruning settings replayed over 40 seeded arrival "
                                        "orders (launch order shuffled, each trial's times × exp(N(0, 0.25))) of the "
                                        "measured grid's learning curves (gpuledger.search.replay): the median and "
                                        "range of the replays' dollars over the grid's, and how many kept the "
                                        "grid's best within 2%. The measured comparison is one arrival order."),
    ("Saved by pruning", "Per pruned trial: its full-run cost (the measured grid's run of the same point when it "
                         "ran to its end there, else the plan estimate) − what its runs cost; summed."),
    ("ASHA what-if", "Simulated: the sweep's measured learning curves replayed through Optuna's "
                     "SuccessiveHalvingPruner with the sweep's settings at K slots (gpuledger.search.asha_replay), "
                     "priced at the sweep's measured USD per trial-second. Time to best: when the replay's best "
                     "trial ended."),
]


def how_to_read(data: SweepData, base: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Returns the report's definitions: `base` plus the adaptive ones (asha: the ASHA what-if instead of
    the what-if from measured durations; tpe: without it); `base` unchanged for grid and random sweeps."""
    ad = data.adaptive
    if ad is None:
        return base
    if ad.strategy == "asha":
        return [d for d in base if d[0] != "Parallelism what-if"] + HOW_TO_READ
    return base + [d for d in HOW_TO_READ if d[0] not in ("ASHA what-if", "Cost vs the grid, over N orders")]



def adaptive_sections(data: SweepData, s: dict[str, Any]) -> list[Section]:
    """Returns the adaptive sections that follow the progress section (none for grid/random sweeps)."""
    ad = data.adaptive
    if ad is None:
        return []
    return [grid_section(data, ad, s), pruning_section(data, ad, s)]


def adaptive_tables(data: SweepData) -> dict[str, pl.DataFrame]:
    """Returns the adaptive sections' tables for CSV export (raw values, units in column names)."""
    ad = data.adaptive
    if ad is None:
        return {}
    g = full_grid(data.trials, ad)
    rows, _ = pruning_savings(data.trials, ad)
    sim, _basis, _why = asha_what_if(data.trials, ad, data.sweep.get("max_parallel"))
    pruned = pl.DataFrame([{**r, "params": point_key(r["params"])} for r in rows]) if rows else \
        pl.DataFrame(schema={"trial_id": pl.String, "saved_usd": pl.Float64})
    tables = {"full-grid": pl.DataFrame([g]), "pruning-savings": pruned}
    if sim:
        tables["asha-what-if"] = pl.DataFrame(sim)
    return tables


__all__ = ["END_STYLES", "HOW_TO_READ", "adaptive_sections", "how_to_read", "adaptive_tables", "grid_section", "progress_section",
           "pruning_section", "what_if_section"]

"""The sweep report's learning curves and hyper-parameter view (issue 38 item 7).

- Learning curves: every trial's objective metric against its training step, one line per run as the
  warehouse's `metrics` hold them (named query `learning_curves`), coloured by how the run ended; the
  best trial thick and on top. A pruned or failed run's line stops where it stopped.
- Objective over the hyper-parameters: per searched parameter, each trial's final objective
  (v_trial_results.metric_value) against its value: numbers on a log axis when they span more than
  10x and are positive, else linear; anything else (strings, booleans, lists) as categories.
Both are measured values only; nothing is interpolated or fitted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from gpuledger.report import charts
from gpuledger.report.document import Figure, Note, Section

#: how each run's line is coloured, by how it ended (the best trial is blue)
CURVE_COLOURS = {"succeeded": charts.TEAL, "pruned": charts.GREY, "failed": charts.RED, "oom": charts.RED,
                 "preempted": charts.ORANGE, "cancelled": charts.GREY, "running": charts.CYAN}
#: learning curves drawn at most (the first runs by start; the section says how many were left out)
MAX_CURVES = 60


def _params(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def curve_series(rows: list[dict[str, Any]], best_trial: str | None) -> list[dict[str, Any]]:
    """Returns one curve per run of the `learning_curves` rows: run_id, trial_id, status, points [(step, value)]
    (step: the logged step, else the point's order), best (the run of the best trial that succeeded)."""
    runs: dict[str, dict[str, Any]] = {}
    for r in rows:
        run = runs.setdefault(r["run_id"], {"run_id": r["run_id"], "trial_id": r["trial_id"], "status": r["status"],
                                            "points": []})
        if r.get("seq") is None or r.get("value") is None or not math.isfinite(float(r["value"])):
            continue
        step = r["step"] if r.get("step") is not None else r["seq"]
        run["points"].append((float(step), float(r["value"])))
    for run in runs.values():
        run["points"].sort()
        run["best"] = run["trial_id"] == best_trial and run["status"] == "succeeded"
    return list(runs.values())


def param_panels(trials: list[dict[str, Any]], best_trial: str | None,
                 last_values: dict[str, float] | None = None) -> list[tuple[str, str, list]]:
    """Returns (parameter, scale, [(value, objective, colour)]) for each parameter that takes more than one
    value among the trials with an objective value (see the module doc for the scale); a pruned trial
    without a final value stands at the last value it reported (`last_values`), in its own colour."""
    last_values = last_values or {}
    trials = [t if t.get("metric_value") is not None or t["trial_id"] not in last_values
              or t.get("status") != "pruned" else {**t, "metric_value": last_values[t["trial_id"]]} for t in trials]
    have = [t for t in trials if t.get("metric_value") is not None and math.isfinite(float(t["metric_value"]))]
    names: dict[str, None] = {}
    for t in have:
        names.update(dict.fromkeys(_params(t.get("params"))))
    panels = []
    for name in names:
        values = [_params(t.get("params")).get(name) for t in have]
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) < 2:
            continue
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
        if numeric:
            low, high = min(values), max(values)
            scale = "log" if low > 0 and high / low > 10 else "linear"
            xs: list[Any] = [float(v) for v in values]
        else:
            scale, xs = "category", [json.dumps(v, default=str) if not isinstance(v, str) else v for v in values]
        pts = [(x, float(t["metric_value"]), charts.BLUE if t["trial_id"] == best_trial
                else CURVE_COLOURS.get(str(t.get("status")), charts.GREY)) for x, t in zip(xs, have, strict=True)]
        if scale == "category":
            order = sorted(set(xs), key=lambda c: next(i for i, x in enumerate(xs) if x == c))
            pts.sort(key=lambda p: order.index(p[0]))
        panels.append((name, scale, pts))
    return panels


def _legend(statuses: set[str], best: bool) -> list[tuple[str, str]]:
    out = [("best trial", charts.BLUE)] if best else []
    seen: set[str] = set()
    for status, colour in CURVE_COLOURS.items():
        if status in statuses and colour not in seen:
            names = [s for s, c in CURVE_COLOURS.items() if c == colour and s in statuses]
            out.append(("/".join(names), colour))
            seen.add(colour)
    return out


def curves_section(rows: list[dict[str, Any]], trials: list[dict[str, Any]], s: dict[str, Any],
                   label: Any) -> Section:
    """Returns the section "Learning curves and hyper-parameters" of the sweep report: `rows` of the named
    query `learning_curves`, `trials` of v_trial_results, `s` the sweep summary (metric_name, best_trial_id,
    goal), `label(trial_id) -> str` the trials' names as the rest of the report writes them."""
    metric = s.get("metric_name") or "metric"
    best = s.get("best_trial_id")
    trial_status = {t["trial_id"]: t.get("status") for t in trials}
    # a pruned trial's run ends `cancelled`; the curve says what the search did: pruned
    rows = [{**r, "status": "pruned"} if trial_status.get(r["trial_id"]) == "pruned" else r for r in rows]
    curves = curve_series(rows, best)
    drawn = [c for c in curves if c["points"]]
    left_out = max(0, len(drawn) - MAX_CURVES)
    drawn = sorted(drawn[:MAX_CURVES], key=lambda c: not c["best"])  # the best kept even past the cap
    series = [(label(c["trial_id"]), charts.BLUE if c["best"] else CURVE_COLOURS.get(str(c["status"]), charts.GREY),
               c["points"], c["best"]) for c in drawn]
    legend = _legend({str(c["status"]) for c in drawn}, any(c["best"] for c in drawn))

    def curve_svg() -> str:  # drawn only for the HTML page (`Figure`)
        return charts.lines_chart(series, title=f"{metric} per trial over training steps", x_label="training step",
                                  y_label=metric, legend=legend)
    caption = (f"One line per run: the {metric} it logged at each of its training steps (warehouse `metrics`; a "
               f"larger micro-batch takes fewer steps for the same tokens); a pruned or failed run stops where it "
               f"stopped. Names are placed where they fit.")
    if left_out:
        caption += f" The first {MAX_CURVES} runs with points are drawn, {left_out} more are not."
    blocks: list = [Figure(curve_svg, caption)]
    last = {c["trial_id"]: c["points"][-1][1] for c in curves if c["points"]}
    panels = param_panels(trials, best, last)
    best_value = next((float(t["metric_value"]) for t in trials if t["trial_id"] == best
                       and t.get("metric_value") is not None), None)
    if panels:
        statuses = {str(t.get("status")) for t in trials if t.get("metric_value") is not None or t["trial_id"] in last}

        def params_svg() -> str:
            return charts.params_chart(
                panels, title=f"final {metric} by hyper-parameter", y_label=f"final {metric}",
                best=(f"best {metric}", best_value) if best_value is not None else None,
                legend=_legend(statuses, best is not None))
        scales = ", ".join(f"{n} ({'log axis' if sc == 'log' else 'categories' if sc == 'category' else 'linear'})"
                           for n, sc, _ in panels[:6])
        blocks.append(Figure(params_svg, f"Each trial's final {metric} (v_trial_results.metric_value) against the "
                                         f"value of each parameter searched: {scales}. A pruned trial stands at the "
                                         f"last value it reported (grey); failed and running trials are not shown."))
    else:
        blocks.append(Note("No hyper-parameter view: fewer than two trials with an objective value differ in a "
                           "parameter.", "small"))
    if not drawn:
        blocks.insert(0, Note(f"No run of this sweep logged {metric} during training yet (only final values).",
                              "small"))
    return Section("Learning curves and hyper-parameters", blocks)

"""`gpuledger capacity SPEC [--json]`: GPUs and $/month to serve a traffic level within an SLO.

`--json` prints the plan of `gpuledger.capacity.plan_capacity` as one JSON object (each option with
its operating point, latency–throughput curve and load check); the human form is a table of the
options (concurrency chosen per replica, p95 latencies there), the best one, and why each option
chose its operating point or fails.
"""

from __future__ import annotations

import json
import sys


def _money(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _num(x, fmt: str = "{:,.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def render(result: dict, file=None) -> None:
    """Prints the human form of a capacity plan (rich table + best + reasons)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=180)
    s = result["spec"]
    console.print(
        f"[bold]{s['name']}[/bold]: {s['model']} at {s['precision']} on {s.get('engine_version') or s.get('engine')} — "
        f"{s['qps']:g} req/s × "
        f"{s['prompt_tokens']:,} prompt + {s['output_tokens']:,} output tokens, p95 TTFT {s['p95_ttft_ms']:g} ms, "
        f"p95 TPOT {s['p95_tpot_ms']:g} ms, headroom {s['headroom']:.0%} → "
        f"{s['demand_output_tokens_per_s']:,.0f} output tokens/s to serve"
    )
    table = Table(show_lines=False)
    for col, justify in [("accelerator", "left"), ("ok", "center"), ("GPUs", "right"), ("TP", "right"),
                         ("conc.", "right"), ("tok/s/GPU", "right"), ("src", "left"), ("p95 TTFT ms", "right"),
                         ("p95 TPOT ms", "right"), ("$/GPU-h", "right"), ("$/hour", "right"),
                         ("$/month", "right"), ("auto $/mo", "right"), ("spot $/mo", "right"),
                         ("$/1M out", "right"), ("cloud", "left")]:
        table.add_column(col, justify=justify, no_wrap=True)
    best = result.get("best")
    for o in result["options"]:
        is_best = best is not None and o["accelerator"] == best["accelerator"]
        table.add_row(
            ("★ " if is_best else "") + o["accelerator"],
            "yes" if o["feasible"] else "no",
            _num(o["gpus"]),
            _num(o["gpus_per_replica"]),
            _num(o["max_batch"]),
            _num(o["tokens_per_s_per_gpu"], "{:,.1f}"),
            o["throughput_source"][:4],
            _num(o["ttft_ms"], "{:,.0f}"),
            _num(o["tpot_ms"], "{:,.1f}"),
            _money(o["price_per_gpu_hour_on_demand"]),
            _money(o["usd_per_hour_on_demand"]),
            _money(o["usd_per_month_on_demand"]),
            _money(o.get("usd_per_month_autoscaled")),
            _money(o["usd_per_month_spot"]),
            _num(o.get("usd_per_1m_output_tokens"), "${:,.3f}"),
            o["cloud"] or "-",
        )
    console.print(table)
    if best:
        console.print(
            f"[bold green]best:[/bold green] {best['gpus']} × {best['accelerator']} "
            f"({best.get('replicas_sized') or best.get('replicas')} replica(s) of {best['gpus_per_replica']}) on {best['cloud']} {best['instance_type']}: "
            f"{_money(best['usd_per_hour_on_demand'])}/hour, {_money(best['usd_per_day_on_demand'])}/day, "
            f"{_money(best['usd_per_month_on_demand'])}/month on demand"
            + (f" ({_money(best['usd_per_month_spot'])}/month on spot)" if best["usd_per_month_spot"] else "")
        )
        for line in economy_lines(best, result.get("compare")) + fleet_lines(result):
            console.print(line, highlight=False, markup=False)
    else:
        console.print("[bold red]no feasible option[/bold red]")
    console.print("[bold]why[/bold]:")
    for o in result["options"]:
        mark = "ok " if o["feasible"] else "NO "
        console.print(f"  {mark}{o['accelerator']}: {o['reason']}", highlight=False, markup=False)
        if o.get("floor_tpot_ms") is not None:
            console.print(f"      physical floors: TTFT ≥ {o['floor_ttft_ms']:,.2f} ms, TPOT ≥ {o['floor_tpot_ms']:,.3f} ms",
                          highlight=False, markup=False)
        if o["price_source"]:
            console.print(f"      price: {o['price_source']}", highlight=False, markup=False)


def economy_lines(best: dict, compare: dict | None) -> list[str]:
    """Returns the best option's elastic fleet, environments, commitments and the API comparison as
    lines of text."""
    lines = []
    if best.get("autoscale"):
        lines.append(f"  autoscaled: {_money(best['usd_per_month_autoscaled'])}/month beside "
                     f"{_money(best['usd_per_month_on_demand'])} fixed at peak; {best['autoscale']['why']}")
    spot = best.get("spot")
    if spot:
        lines.append(f"  spot: {spot['spot_share']:.0%} of replica-hours can run on spot ({_money(spot['usd_per_month_with_spot'])}"
                     f"/month), {spot['preemptions_per_month']:g} preemptions a month expected "
                     f"({spot['replica_minutes_down_per_month']:g} replica-minutes down)")
    for env, e in (best.get("environments") or {}).items():
        lines.append(f"  {env}: {e['replicas']} replica(s), {e['gpus']} GPU(s), {_money(e['usd_per_month'])}/month")
    for term, c in (best.get("committed") or {}).items():
        lines.append(f"  committed {term} ({c['discount_pct']:g}% off): pays above {c['break_even_utilisation']:.0%} "
                     f"utilisation; {c['committed_replicas']} replica(s) committed → {_money(c['usd_per_month'])}/month")
    if best.get("usd_per_1m_output_tokens") is not None:
        lines.append(f"  at the planned load: ${best['usd_per_1m_output_tokens']:,.4f} per 1M output tokens, "
                     f"${best['usd_per_request']:,.6f} per request")
    if compare:
        if compare.get("api_usd_per_month") is not None:
            be = compare.get("break_even") or {}
            lines.append(f"  self-hosted: {_money(compare['self_usd_per_month'])}/month = "
                         f"{' + '.join(compare.get('self_includes') or ['production'])}")
            lines.append(f"  API for the same traffic: {_money(compare['api_usd_per_month'])}/month "
                         f"(${compare['api_usd_per_1m_output_tokens']:,.4f} per 1M output tokens, input included); "
                         f"break-even: {be.get('why', '-')}")
        pay = compare.get("payback") or {}
        if compare.get("fine_tune_usd") is not None or pay.get("payback_months") is not None:
            lines.append(f"  fine-tune payback: {pay.get('why', '-')}")
    return lines


def fleet_lines(result: dict) -> list[str]:
    """Returns the bands, mixed-fleet and rent/buy/API lines of a plan's human form."""
    lines = []
    best = result.get("best") or {}
    if best.get("max_tokens_per_s_per_replica"):
        m, tt, tp, r = (best.get(k) or {} for k in ("max_tokens_per_s_per_replica", "ttft_ms_p95", "tpot_ms_p95", "replicas"))
        lines.append(f"  bands P10/P50/P90 ({(best.get('bands') or {}).get('confidence', 'p90')} sizing): max "
                     f"{m.get('p10', 0):,.0f}/{m.get('p50', 0):,.0f}/{m.get('p90', 0):,.0f} output tokens/s per replica; "
                     f"p95 TTFT {tt.get('p10', 0):,.0f}/{tt.get('p50', 0):,.0f}/{tt.get('p90', 0):,.0f} ms; p95 TPOT "
                     f"{tp.get('p10', 0):,.1f}/{tp.get('p50', 0):,.1f}/{tp.get('p90', 0):,.1f} ms; replicas "
                     f"{r.get('p10')}/{r.get('p50')}/{r.get('p90')} (sized: {best.get('replicas_sized')})")
    mix = result.get("mixed_fleet")
    if mix:
        lines.append(f"  mixed fleet: {mix['why']}")
    own = result.get("ownership")
    if own:
        paths = ", ".join(f"{k} {_money(v)}" for k, v in own["usd_per_month"].items() if v is not None)
        lines.append(f"  rent vs buy vs API ({own['accelerator']}, {own['includes']}): {paths}/month; cheapest now: "
                     f"{own['cheapest_now']}")
        if (own.get("buy") or {}).get("payback"):
            lines.append(f"  buying pays back: {own['buy']['payback']}")
        for c in own.get("cheapest") or []:
            lines.append(f"    {c['path']} is cheapest from {c['from_requests_per_month']:,} to "
                         f"{c['to_requests_per_month']:,} requests/month")
    return lines


def run(args) -> int:
    from gpuledger.api import Ledger

    result = Ledger().capacity(args.spec)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        render(result)
        if result.get("measured_from"):  # measured: {from_sweep: NAME}: what the sweep's points said
            label = result["measured_from"]["label"]
            for note in (a for a in result["assumptions"] if a.startswith(label)):
                print(note)
    return 0

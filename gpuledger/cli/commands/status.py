"""`gpuledger status [SWEEP] [--json]`: each sweep's state (running, awaiting_approval, ...) and its spend so
far (`accrued_usd`: measured runs + running trials' price x elapsed), and the envelopes' money. A sweep that
ended (`sweep_states.finished`) states its final numbers instead: when it ended, its total spend and runs.

A sweep waiting for approval names who must approve and the command (gpuledger/runtime/sweep_states.py,
docs/budgets.md). Reads the warehouse only; never imports Prefect.
"""

from __future__ import annotations

import json


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def run(args) -> int:
    from gpuledger.api import Ledger
    from gpuledger.runtime.envelopes import usd
    from gpuledger.runtime.sweep_states import finished

    ledger = Ledger()
    sweeps = ledger.sweep_states(args.sweep)
    envelopes = ledger.envelopes()
    if args.json:
        print(json.dumps({"sweeps": sweeps, "envelopes": envelopes}, indent=2, default=str))
        return 0
    if not sweeps:
        print("no sweep yet" if args.sweep is None else f"no sweep {args.sweep}")
    for s in sweeps:
        if finished(s):  # its spend is final: the measured cost of its stored runs
            ended = f", ended {str(s['ended_at'])[:16].replace('T', ' ')} UTC" if s.get("ended_at") else ""
            line = (f"{s['sweep_id']}: {s['state']}{ended}; spent ${s['measured_usd']:.4f} in total (measured, "
                    f"{s['runs']} run{'' if s['runs'] == 1 else 's'})")
        else:
            line = (f"{s['sweep_id']}: {s['state']}, spent so far ${s['accrued_usd']:.4f} (measured "
                    f"${s['measured_usd']:.4f} + {s['running_trials']} running trial(s) "
                    f"${s['running_accrued_usd']:.4f} at ${s['usd_per_hour']:.2f}/h)")
        if s.get("planned_usd") is not None:
            line += f" of ${s['planned_usd']:.4f} planned"
        if s["over_estimate_trials"]:
            line += f"; {s['over_estimate_trials']} trial(s) past their estimate"
        print(line)
        if s.get("trials"):
            print("  trials: " + ", ".join(f"{n} {state}" for state, n in sorted(s["trials"].items())))
        if s.get("eta_s") is not None:
            print(f"  ETA: about {_duration(s['eta_s'])} left ({s['eta_basis']})")
        w = s.get("awaiting_approval")
        if w:
            print(f"  waits for approval by {w['who']}: {w['reason']}")
            print(f"  {w['approve']}   (or {w['reject']})")
    for e in envelopes:
        print(f"envelope {e['budget']} ({e['scope']}, {e['window']} from {e['window_start'][:10]}): used "
              f"{usd(e['used_usd'])} (spent {usd(e['spent_usd'])}, reserved {usd(e['reserved_usd'])}) of "
              f"{usd(e['limit_usd'])}, {usd(e['remaining_usd'])} left"
              + (f"; approval past {usd(e['soft_usd'])}" if e["soft_usd"] is not None else ""))
    return 0

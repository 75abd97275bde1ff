"""How the adaptive search's decisions become trial statuses in the warehouse: stopped (`pruned` by rung or
curve), suspended at an undecided rung, dropped while suspended, left suspended, never asked.

Suspension at undecided rungs (`gpuledger.search.suspension`: the rule, shared with the replay;
`gpuledger.search.study.AdaptiveSearch`: the study's side).

A trial the study suspends is cancelled through its launcher like a pruned one (its slot is freed at once:
on SkyPilot its job, on the local launcher its process; the GPU is no longer paid for), its attempt's record
says `cancelled` and is billed for what it ran, and the trial is marked `cancelled` with the reason until its
rung is decided; the study then hands it out again (`AdaptiveSearch.ask`) as a new attempt of the same trial
id (the launchers number attempts), started from its first step, or drops it (`pruned`, stop rule `rung`).
Prefect's `suspend_flow_run` / `pause_flow_run` are not used: they stop a whole flow run (the sweep, every
trial of it), and a trial here is a launcher job of that flow run, not a flow run of its own.
"""

from __future__ import annotations

from typing import Any

from gpuledger import vocabulary


def mark_stopped(search: Any, writer: Any, stopped: dict[str, str]) -> None:
    """Marks the trials the search stopped ({trial_id: why}, after their records are queued): `pruned` with
    the rule that stopped them (rung | curve), or `cancelled` when suspended at a rung (no stop rule)."""
    for trial_id, why in stopped.items():
        rule = search.why.get(trial_id, ("rung", ""))[0] if search is not None else None
        held = rule == "suspend"
        writer.mark([trial_id], vocabulary.CANCELLED if held else vocabulary.PRUNED, why,
                    stop_rule=None if held else rule)


def mark_dropped(search: Any, writer: Any, summary: Any, pruned_ids: set[str], log: Any) -> None:
    """Marks `pruned` (stop rule rung) the suspended trials whose rung dropped them since the last call."""
    for trial_id, why in search.take_dropped():
        summary.pruned += 1
        pruned_ids.add(trial_id)
        writer.mark([trial_id], vocabulary.PRUNED, why, stop_rule="rung")
        log.info("Trial %s %s", trial_id, why)


def mark_left_suspended(search: Any, writer: Any, summary: Any, log: Any) -> None:
    """At the end of a run: the trials still suspended (the budget stop or an interruption ended it before
    their rung was decided) keep their `cancelled` attempt, with why they were not relaunched."""
    left = list(search.suspended) if search is not None else []
    if not left:
        return
    why = ("interrupted" if summary.interrupted else "the budget stop" if summary.budget_stopped
           else "the search ended")
    writer.mark(left, vocabulary.CANCELLED, f"suspended at an undecided rung and not relaunched: {why} came first "
                "(a later run of this sweep relaunches it)")
    log.info("%d trial(s) left suspended at an undecided rung (%s): %s", len(left), why, ", ".join(left[:10]))


def mark_unasked(search: Any, strategy: str, todo: list[Any], writer: Any, hooks: Any, summary: Any) -> None:
    """The candidates the search never asked for are not left `pending` as if still to run (they keep
    their plan rows: the full grid's estimate): `skipped-budget` when the budget stop ended the
    search (a later run may ask for them), else `not-asked` (n_trials were asked)."""
    ids = [t.trial_id for t in todo if t.trial_id not in search.asked and t.trial_id not in search.live]
    if not ids:
        return
    if summary.budget_stopped:
        writer.mark(ids, vocabulary.SKIPPED_BUDGET, "the budget stop ended the search before it asked for this point")
        summary.skipped_budget += len(ids)
        status = vocabulary.SKIPPED_BUDGET
    else:
        writer.mark(ids, vocabulary.NOT_ASKED, f"the {strategy} search asked for its {search.n_trials} trial(s) "
                    "without this point")
        summary.not_asked = len(ids)
        status = vocabulary.NOT_ASKED
    hooks.log.info("%d candidate point(s) the search did not ask for: marked %s.", len(ids), status)

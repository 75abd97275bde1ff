"""Packed trials run for real (resources.trials_per_gpu): the local launcher runs a slot as one job of k
agents (k trial subprocesses side by side), each measured on its own and billed its share of the job
(price x the job's wall-clock x share), so a slot's shares sum to the slot's cost; a packed run of small
trials that leave their slot mostly idle (as a LoRA of a 1B model leaves an H100) costs less than one
per slot; and a sweep stores the packing on its runs (v_runs.pack_*) and shows it in its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.sweep_specs import write_spec

from gpuledger.launch.base import LaunchRequest
from gpuledger.launch.local import LocalLauncher

REPO = Path(__file__).resolve().parents[2]
RATE = 3.6  # $/h of the slot
# a small trial: start-up and a second of waiting on its device (its slot is mostly idle)
SMALL = "python -c 'import time; time.sleep(1.0)'"


def _req(i: int, weight: float | None) -> LaunchRequest:
    return LaunchRequest(sweep_id="sw-pack", sweep_name="pack", trial_id=f"t{i}", params={"i": i}, run=SMALL,
                         workdir=REPO, usd_per_hour=RATE, price_description=f"slot at ${RATE}/h", pack_weight=weight)


def _overlap(records) -> int:
    events = sorted([(r.started_at.timestamp(), 1) for r in records] + [(r.ended_at.timestamp(), -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    run = peak = 0
    for _, d in events:
        run += d
        peak = max(peak, run)
    return peak


def test_a_packed_slot_is_one_job_of_k_agents_billed_by_share(tmp_path):
    weights = [1.0, 1.0, 2.0, 4.0]  # the planner's compute seconds of each trial's work
    with LocalLauncher(max_parallel=1, pack=4, landing_dir=tmp_path / "packed") as launcher:
        packed = launcher.run_all([_req(i, w) for i, w in enumerate(weights)])
    with LocalLauncher(max_parallel=1, landing_dir=tmp_path / "alone") as launcher:
        alone = launcher.run_all([_req(i, w) for i, w in enumerate(weights)])
    assert all(r.status == "succeeded" for r in packed + alone)
    assert _overlap(packed) == 4 and _overlap(alone) == 1  # k processes side by side on the one slot
    assert len({r.pack_slot for r in packed}) == 1 and {r.pack_k for r in packed} == {4}
    assert [r.pack_share for r in packed] == pytest.approx([w / sum(weights) for w in weights])
    job_wall = max(r.ended_at for r in packed) - min(r.started_at for r in packed)
    wall = packed[0].pack_wall_s
    assert {r.pack_wall_s for r in packed} == {wall} and wall >= max(r.wall_s for r in packed)
    assert wall == pytest.approx(job_wall.total_seconds(), abs=1.0)  # the launcher's clock, about the agents'
    for r in packed:  # each billed its share: price x the job's wall-clock x share, stated on its line
        (line,) = r.billing
        assert line.cost_usd == pytest.approx(RATE * wall / 3600 * r.pack_share, rel=1e-6)
        assert "packed slot" in line.description and "by planned compute seconds" in line.description
        assert r.wall_s > 0.9  # measured on its own by its agent
    assert sum(r.cost_usd for r in packed) == pytest.approx(RATE * wall / 3600, rel=1e-6)  # shares = the slot
    assert all(r.pack_slot is None and r.pack_share is None for r in alone)
    assert sum(r.cost_usd for r in packed) < 0.6 * sum(r.cost_usd for r in alone)
    # the landing file says the same (what the warehouse ingests)
    landed = json.loads((tmp_path / "packed" / f"{packed[0].run_id}.json").read_text())
    assert landed["pack_slot"] == packed[0].pack_slot and landed["pack_share"] == packed[0].pack_share


def test_without_weights_the_share_is_equal_and_slots_refill(tmp_path):
    with LocalLauncher(max_parallel=1, pack=2, landing_dir=tmp_path) as launcher:
        recs = launcher.run_all([_req(i, None) for i in range(3)])
    slots = {}
    for r in recs:
        slots.setdefault(r.pack_slot, []).append(r)
    assert sorted(len(v) for v in slots.values()) == [1, 2]  # 2 side by side, then the third in a new job
    for rs in slots.values():
        assert all(r.pack_share == pytest.approx(1 / len(rs)) for r in rs)
        assert sum(r.cost_usd for r in rs) == pytest.approx(RATE * rs[0].pack_wall_s / 3600, rel=1e-6)
    first, second = sorted(slots.values(), key=lambda rs: min(r.started_at for r in rs))
    assert min(r.started_at for r in second) >= max(r.ended_at for r in first) - _tolerance()  # one slot at a time
    with pytest.raises(ValueError, match="at least 1"):
        LocalLauncher(pack=0, landing_dir=tmp_path)


def _tolerance():
    from datetime import timedelta

    return timedelta(seconds=0.2)


def test_a_packed_sweep_stores_its_slots_and_reports_them(tmp_path):
    from gpuledger.report.sweep import write_sweep_report
    from gpuledger.runtime.accepted import prepare
    from gpuledger.runtime.engine import SweepRun, execute
    from gpuledger.warehouse import Warehouse

    path = write_spec(tmp_path, name="tiny-packed", xs=(0.1, 0.2, 0.3, 0.4), sleep=0.2, max_parallel=1,
                      usd_per_hour=RATE)
    path.write_text(path.read_text().replace("resources: {max_parallel: 1}",
                                             "resources: {max_parallel: 1, trials_per_gpu: 2}"))
    accepted = prepare(path, launcher="local")
    assert accepted.pack == 2 and accepted.plan.packing.chosen == 2
    assert accepted.plan.to_json()["packing"]["chosen"] == 2 and "trials_per_gpu 2" in accepted.plan.packing.chosen_why
    summary = execute(SweepRun(accepted, summary=accepted.new_summary()))
    assert summary.succeeded == 4
    with Warehouse.open(read_only=True) as wh:
        runs = wh.query("SELECT trial_id, pack_slot, pack_share, pack_k, pack_wall_s, cost_usd FROM v_runs "
                        "WHERE sweep_id = $1", [accepted.sweep_id]).to_dicts()
        out = write_sweep_report(wh, sweep_id=accepted.sweep_id)
    assert len(runs) == 4 and all(r["pack_slot"] and r["pack_k"] == 2 for r in runs)
    by_slot: dict[str, list[dict]] = {}
    for r in runs:
        by_slot.setdefault(r["pack_slot"], []).append(r)
    assert len(by_slot) == 2
    for rs in by_slot.values():
        assert sum(r["pack_share"] for r in rs) == pytest.approx(1.0)
        assert sum(r["cost_usd"] for r in rs) == pytest.approx(RATE * rs[0]["pack_wall_s"] / 3600, rel=1e-6)
    md = out.markdown.read_text()
    assert "Packed trials" in md and next(iter(by_slot)) in md and "Packed trials" in out.html.read_text()

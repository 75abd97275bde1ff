"""Spending envelopes (gpuledger/runtime/envelopes.py, money.py; warehouse budget_ledger): windows, scopes,
the refusal's numbers, and the ledger's reserve / commit / release adding up to the measured spend."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest
from helpers.warehouse_template import fresh_warehouse

from gpuledger.errors import BudgetExceeded, UserError
from gpuledger.runtime import money
from gpuledger.runtime.envelopes import (
    Envelope,
    EnvelopeUse,
    Spender,
    configured_envelopes,
    decide,
    parse_envelope,
    plan_reservation_usd,
    window_bounds,
)
from gpuledger.settings import load_settings
from gpuledger.warehouse import Warehouse


@pytest.fixture(autouse=True)
def _migrated(_isolated_warehouse):
    fresh_warehouse(_isolated_warehouse)  # the migrated template, not a migration per test


def test_windows_are_utc_day_iso_week_month_and_inclusive_ranges():
    at = datetime(2026, 12, 3, 15, 30)  # a Thursday
    assert window_bounds("day", at) == (datetime(2026, 12, 3), datetime(2026, 12, 4))
    assert window_bounds("week", at) == (datetime(2026, 11, 30), datetime(2026, 12, 7))
    assert window_bounds("month", datetime(2026, 12, 31, 23)) == (datetime(2026, 12, 1), datetime(2027, 1, 1))
    assert window_bounds("2026-12-01..2026-12-31", at) == (datetime(2026, 12, 1), datetime(2027, 1, 1))


@pytest.mark.parametrize("row, words", [
    ({"name": "x", "scope": "team:a", "limit_usd": 1}, "scope must be"),
    ({"name": "x", "window": "fortnight", "limit_usd": 1}, "window must be"),
    ({"name": "x"}, "limit_usd is required"),
    ({"name": "x", "limit_usd": 5, "soft_usd": 9}, "above limit_usd"),
    ({"name": "x", "limit_usd": float("nan")}, "finite number"),
    ({"name": "x", "limit_usd": 5, "colour": "red"}, "unknown key"),
    ({"name": "x", "limit_usd": 5, "window": "2026-12-31..2026-12-01"}, "ends before"),
])
def test_a_bad_budget_row_is_one_line_naming_the_file_and_row(row, words):
    with pytest.raises(UserError, match=words) as err:
        parse_envelope({**row, "_where": "/p/gpuledger.toml"})
    assert "/p/gpuledger.toml: [[budgets]]" in str(err.value)


def test_scopes_match_the_observed_owner_not_the_claim():
    alice = Spender(project="research", owner="alice", owner_claimed="bob")
    assert parse_envelope({"name": "a", "scope": "owner:alice", "limit_usd": 1}).applies(alice)
    assert not parse_envelope({"name": "b", "scope": "owner:bob", "limit_usd": 1}).applies(alice)
    assert parse_envelope({"name": "p", "scope": "project:research", "limit_usd": 1}).applies(alice)
    assert not parse_envelope({"name": "g", "scope": "agent", "limit_usd": 1}).applies(alice)
    assert parse_envelope({"name": "g", "scope": "agent", "limit_usd": 1}).applies(
        Spender(project="research", owner="alice", agent=True))


def test_user_file_and_project_rows_both_count(tmp_path, monkeypatch):
    user = tmp_path / "user.toml"
    user.write_text('[[budgets]]\nname = "me"\nscope = "owner:alice"\nwindow = "week"\nlimit_usd = 300\n')
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "gpuledger.toml").write_text('[[budgets]]\nname = "team"\nwindow = "month"\nlimit_usd = 5000\n'
                                         'soft_usd = 200\n[agent]\nbudget_usd = 10\n')
    monkeypatch.setenv("GPULEDGER_CONFIG", str(user))
    s = load_settings(cwd=proj, environ={})
    envs = configured_envelopes(s.get("budgets"), s.get("agent.budget_usd"))
    assert [(e.name, e.scope, e.window, e.limit_usd) for e in envs] == [
        ("me", "owner:alice", "week", 300.0), ("team", "all", "month", 5000.0), ("agent", "agent", "all", 10.0)]


def test_the_decision_names_the_envelope_spent_reserved_plan_and_what_fits():
    env = Envelope("research-weekly", "project:research", "week", 500.0, 200.0)
    use = EnvelopeUse(env, datetime(2026, 11, 30), datetime(2026, 12, 7), spent_usd=120.0, reserved_usd=300.0,
                      used_usd=420.0)
    d = decide(150.0, "plan P90", [use])
    assert d.refused and not d.needs_approval
    text = d.refusal("sweep b-1")
    for words in ("research-weekly", "limit $500.00", "spent $120.00", "reserved $300.00", "this plan $150.00",
                  "over by $70.00", "what would fit: $80.00"):
        assert words in text, (words, text)
    soft = decide(50.0, "plan P90", [use])
    assert not soft.refused and soft.needs_approval and "soft threshold $200.00" in soft.approval_words()


def test_reservation_uses_the_p90_total_when_the_plan_has_one():
    assert plan_reservation_usd({"total_est_cost_usd": 6.0, "total_cost_usd_p90": 9.0}) == (9.0, "plan P90")
    assert plan_reservation_usd({"total_est_cost_usd": 6.0})[0] == 6.0
    assert plan_reservation_usd({"total_est_cost_usd": 6.0, "pruning": {"expected_usd": 2.5}})[0] == 2.5


def _register(sweep_id: str) -> None:
    with Warehouse.open() as wh:
        wh.register_sweep(sweep_id=sweep_id, name=sweep_id, project="research", owner="ci", kind="sweep",
                          method="lora", model="m", launcher="fake", budget_usd=100.0, spec_json={}, plan_json={})


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_reserve_commit_release_add_up_to_the_measured_spend():
    env = Envelope("weekly", "all", "week", 10.0, None)
    spender = Spender(project="research", owner="alice", owner_claimed="ci")
    money.reserve("s-1", "sweep s-1", {"total_est_cost_usd": 4.0}, spender, envelopes=[env])
    _register("s-1")
    with Warehouse.open() as wh:
        wh.commit_budget_runs("s-1", [("r1", 1.5), ("r2", 1.0)])
        wh.commit_budget_runs("s-1", [("r1", 1.5)])  # the same run again: not counted twice
        mid = wh.query("select * from v_budgets").to_dicts()[0]
        assert mid["spent_usd"] == pytest.approx(2.5) and mid["reserved_usd"] == pytest.approx(1.5)
        assert mid["remaining_usd"] == pytest.approx(6.0)
    assert money.release("s-1", "ended") == pytest.approx(1.5)
    with Warehouse.open(read_only=True) as wh:
        row = wh.query("select * from v_budgets").to_dicts()[0]
        ledger = wh.query("select kind, owner, owner_claimed, sum(spent_usd) as spent, sum(reserved_usd) as held "
                          "from budget_ledger group by all order by kind").to_dicts()
    assert row["spent_usd"] == pytest.approx(2.5) and row["reserved_usd"] == pytest.approx(0.0)
    assert {r["kind"] for r in ledger} == {"reserve", "commit", "release"}
    assert sum(r["spent"] for r in ledger) == pytest.approx(2.5)  # the rows add up to the measured spend
    assert sum(r["held"] for r in ledger) == pytest.approx(0.0)
    assert all(r["owner"] == "alice" and r["owner_claimed"] == "ci" for r in ledger)


def test_a_reservation_that_would_cross_is_refused_and_writes_nothing():
    env = Envelope("weekly", "all", "week", 10.0, None)
    spender = Spender(project="research", owner="alice")
    money.reserve("s-1", "sweep s-1", {"total_est_cost_usd": 7.0}, spender, envelopes=[env])
    with pytest.raises(BudgetExceeded, match="what would fit: \\$3.00"):
        money.reserve("s-2", "sweep s-2", {"total_est_cost_usd": 4.0}, spender, envelopes=[env])
    with Warehouse.open(read_only=True) as wh:
        assert wh.query("select distinct sweep_id from budget_ledger")["sweep_id"].to_list() == ["s-1"]


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_concurrent_reservations_cannot_both_take_the_last_dollar():
    env = Envelope("agent", "agent", "all", 10.0, None)
    spender = Spender(project="research", owner="alice", agent=True)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def one(i: int) -> None:
        barrier.wait()
        try:
            money.reserve(f"s-{i}", f"sweep s-{i}", {"total_est_cost_usd": 6.12}, spender, envelopes=[env])
            outcomes.append("launched")
        except BudgetExceeded:
            outcomes.append("refused")
        except UserError as err:  # a busy warehouse would be a failure of this test too
            outcomes.append(f"error: {err}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["launched", "refused", "refused", "refused"]


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_status_reads_a_running_trials_spend_up_to_now(monkeypatch, tmp_path):
    from datetime import timedelta

    from gpuledger.runtime.envelopes import now_utc
    from gpuledger.runtime.sweep_states import sweep_states

    _register("s-run")
    with Warehouse.open() as wh:
        wh.write_accruals([{"sweep_id": "s-run", "trial_id": "t1", "launch_no": 1, "started_at": now_utc(),
                            "usd_per_hour": 36.0, "elapsed_s": 0.0, "accrued_usd": 0.0, "est_cost_usd": 1.0,
                            "est_basis": "P90", "over_estimate": False, "running": True}])
        wh.execute("update trial_accruals set updated_at = $t", {"t": now_utc() - timedelta(seconds=30)})
    state = sweep_states("s-run")[0]
    assert state["running_trials"] == 1 and state["usd_per_hour"] == 36.0
    assert 0.29 < state["accrued_usd"] < 0.35  # 30 s at $36/h since the last write (the interval is a minute)
    with Warehouse.open() as wh:
        wh.execute("update trial_accruals set updated_at = $t", {"t": now_utc() - timedelta(hours=5)})
    assert sweep_states("s-run")[0]["accrued_usd"] == pytest.approx(1.8, abs=0.01)  # a dead writer: 180 s at most


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_second_run_of_a_running_sweep_that_cannot_start_gives_back_only_its_own_reservation():
    from gpuledger.runtime.envelopes import now_utc
    from gpuledger.warehouse import SweepBusy

    env = Envelope("monthly", "all", "month", 10.0, None)
    spender = Spender(project="research", owner="alice")
    money.reserve("s-1", "sweep s-1", {"total_est_cost_usd": 3.0}, spender, envelopes=[env])  # the run that runs
    _register("s-1")
    with Warehouse.open() as wh:
        wh.write_accruals([{"sweep_id": "s-1", "trial_id": "t1", "launch_no": 1, "started_at": now_utc(),
                            "usd_per_hour": 36.0, "elapsed_s": 60.0, "accrued_usd": 0.6, "est_cost_usd": 1.0,
                            "est_basis": "P90", "over_estimate": False, "running": True}])
    money.reserve("s-1", "sweep s-1", {"total_est_cost_usd": 3.0}, spender, envelopes=[env])  # `gpuledger sweep` again
    busy = SweepBusy("sweep s-1 is already running", holder="h", pid=1, host="vm", since=now_utc())
    assert money.release_unstarted("s-1", 3.0, busy, "sweep did not run") == pytest.approx(3.0)
    with Warehouse.open(read_only=True) as wh:
        row = wh.query("select * from v_budgets").to_dicts()[0]
    assert row["reserved_usd"] == pytest.approx(3.0)  # the running run's reservation still counts
    assert row["accrued_usd"] == pytest.approx(0.6)  # and its running trial still accrues
    # a launch that failed for any other reason: nothing of the sweep runs, all it holds goes back
    assert money.release_unstarted("s-1", 3.0, UserError("no launcher"), "sweep did not run") == pytest.approx(3.0)
    with Warehouse.open(read_only=True) as wh:
        assert wh.query("select reserved_usd from v_budgets")["reserved_usd"].to_list() == [pytest.approx(0.0)]


def _planned_busy_spec(tmp_path, monkeypatch, window: str) -> tuple:
    """A project with one $100 `team` envelope of `window` and a planned two-trial spec; returns (spec, sweep_id)."""
    from helpers.sweep_specs import write_spec

    from gpuledger.api import Ledger

    (tmp_path / "gpuledger.toml").write_text(f'[[budgets]]\nname = "team"\nwindow = "{window}"\nlimit_usd = 100\n')
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "user.toml"))
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, "busy", xs=(0.1, 0.2), usd_per_hour=36.0)
    return spec, Ledger(tmp_path).plan(spec).sweep_id


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_ledger_run_of_a_sweep_another_run_holds_leaves_that_runs_reservation(tmp_path, monkeypatch):
    from gpuledger.api import Ledger
    from gpuledger.warehouse import SweepBusy

    spec, sweep_id = _planned_busy_spec(tmp_path, monkeypatch, "month")
    env = Envelope("team", "all", "month", 100.0, None)
    money.reserve(sweep_id, f"sweep {sweep_id}", {"total_est_cost_usd": 5.0}, Spender(project="tests", owner="bob"),
                  envelopes=[env])  # the run that holds the lease and runs now
    with Warehouse.open() as wh:
        wh.acquire_lease(sweep_id, "another run", 60)
    with pytest.raises(SweepBusy):
        Ledger(tmp_path).run(spec, report=False)
    with Warehouse.open(read_only=True) as wh:
        assert wh.query("select reserved_usd from v_budgets")["reserved_usd"].to_list() == [pytest.approx(5.0)]
        wh_kinds = wh.query("select kind from budget_ledger order by recorded_at")["kind"].to_list()
    assert wh_kinds == ["reserve", "reserve", "release"]  # this launch's own reservation went back, only it


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_a_second_run_that_cannot_start_leaves_the_running_runs_hold_of_an_earlier_window(tmp_path, monkeypatch):
    # the running run reserved $5 in yesterday's window of a daily envelope; a second `Ledger.run` today reserved
    # its plan in today's window only, got SweepBusy and released "at most its reservation in each window", so
    # yesterday's $5, which the running run still holds, went back too
    from datetime import timedelta

    from gpuledger.api import Ledger
    from gpuledger.runtime.envelopes import now_utc
    from gpuledger.warehouse import SweepBusy

    spec, sweep_id = _planned_busy_spec(tmp_path, monkeypatch, "day")
    yesterday = now_utc() - timedelta(days=1)
    with monkeypatch.context() as m:
        m.setattr(money, "now_utc", lambda: yesterday)
        money.reserve(sweep_id, f"sweep {sweep_id}", {"total_est_cost_usd": 5.0},
                      Spender(project="tests", owner="bob"),
                      envelopes=[Envelope("team", "all", "day", 100.0, None)])  # the run that holds the lease
    with Warehouse.open() as wh:
        wh.acquire_lease(sweep_id, "another run", 60)
    with pytest.raises(SweepBusy):
        Ledger(tmp_path).run(spec, report=False)
    with Warehouse.open(read_only=True) as wh:
        held = {h["window_start"].date(): h["held_usd"] for h in wh.budget_holds(sweep_id)}
    assert held == {yesterday.date(): pytest.approx(5.0), now_utc().date(): pytest.approx(0.0)}

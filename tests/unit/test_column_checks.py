"""The column tests views.yml declares (gpuledger.warehouse.column_checks) pass on a demo-shaped
warehouse, and fail, naming the view, column and an offending value, on a broken one."""

from __future__ import annotations

import shutil

import pytest
from helpers.demo_warehouse import build_demo_warehouse

from gpuledger.warehouse import Warehouse
from gpuledger.warehouse.column_checks import ColumnCheck, column_checks, run_column_checks


@pytest.fixture(scope="module")
def demo_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "ledger.duckdb"
    build_demo_warehouse(path)
    return path


@pytest.fixture
def broken(demo_path, tmp_path):
    """A copy of the demo warehouse, open for writing (a test may break it)."""
    path = tmp_path / "broken.duckdb"
    shutil.copy(demo_path, path)
    with Warehouse.open(path) as wh:
        yield wh


def _failures(wh, **match):
    """The failing results among the declared checks whose fields equal `match` (only those run)."""
    checks = [c for c in column_checks() if all(getattr(c, k) == v for k, v in match.items())]
    assert checks, match
    return [r for r in run_column_checks(wh, checks) if not r.passed]


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_every_column_test_passes_on_the_demo_warehouse_and_every_tested_view_has_rows(demo_path):
    checks = column_checks()
    assert {c.kind for c in checks} == {"unique", "not_null", "accepted_values", "relationships", "unique_combination"}
    with Warehouse.open(demo_path, read_only=True) as wh:
        results = run_column_checks(wh, checks)
        empty = [v for v in sorted({c.view for c in checks}) if wh.scalar(f'select count(*) from "{v}"') == 0]
    assert [r.line() for r in results if not r.passed] == []
    assert empty == []  # no test passes for want of rows
    assert len(results) == len(checks) >= 60


def test_accepted_values_come_from_the_vocabulary():
    from gpuledger import vocabulary

    status = next(c for c in column_checks() if (c.view, c.column, c.kind) == ("v_runs", "status", "accepted_values"))
    assert set(status.values) == set(vocabulary.RUN_STATUSES) and status.source == "vocabulary.RUN_STATUSES"


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_an_unknown_status_fails_the_accepted_values_check(broken):
    broken.execute("update runs set status = 'exploded' where run_id = 'r0'")
    failed = _failures(broken, kind="accepted_values")
    assert {(r.check.view, r.check.column) for r in failed} >= {("v_runs", "status"), ("v_run_facts", "status")}
    assert all(r.example == "exploded" and r.failing == 1 for r in failed if r.check.column == "status")
    assert "v_runs.status accepted_values in vocabulary.RUN_STATUSES: 1 failing row(s), e.g. 'exploded'" in [
        r.line() for r in failed]


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_an_unregistered_sweep_fails_relationships_and_not_null(broken):
    broken.execute("update trials set sweep_id = 'ghost-sweep' where trial_id = 'e0'")
    rel = _failures(broken, kind="relationships")
    assert [(r.check.name, r.example) for r in rel] == [
        ("v_trial_results.sweep_id relationships -> v_sweep_roi.sweep_id", "ghost-sweep")]
    broken.execute("update runs set sweep_id = 'no-such-sweep' where run_id = 'r0'")
    assert [r.line() for r in _failures(broken, kind="not_null")] == ["v_sweep_roi.sweep_name not_null: 1 failing row(s)"]


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
def test_a_repeated_key_fails_unique_and_unique_combination(broken):
    broken.execute("update runs set trial_id = 'bbbb11111111' where run_id = 'r0'")  # r1: attempt 1 of that trial
    (combo,) = run_column_checks(broken, [ColumnCheck("v_run_facts", "unique_combination",
                                                      columns=("sweep_id", "trial_id", "attempt"))])
    assert combo.failing == 1 and "bbbb11111111" in combo.example
    (trial,) = run_column_checks(broken, [ColumnCheck("v_runs", "unique", "trial_id")])  # a trial's two attempts
    assert trial.failing >= 2 and {"bbbb11111111", "a00000000000"} >= {trial.example}


@pytest.mark.parametrize("doc, message", [
    ({"views": {"v_runs": {"columns": [{"name": "status", "tests": ["uniqe"]}]}}}, "v_runs.status: unknown test 'uniqe'"),
    ({"views": {"v_runs": {"columns": [{"name": "status", "tests": [{"accepted_values": {"vocabulary": "NOPE"}}]}]}}},
     "gpuledger.vocabulary has no value group 'NOPE'"),
    ({"views": {"v_runs": {"columns": [{"name": "sweep_id", "tests": [{"relationships": {"to": "v_sweep_roi"}}]}]}}},
     "relationships: give to: VIEW and field: COLUMN"),
    ({"views": {"v_runs": {"tests": ["unique"], "columns": []}}}, "v_runs: unknown view test 'unique'"),
])
def test_a_malformed_test_is_named(doc, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        column_checks(doc)

"""The Python API (`gpuledger.api.Ledger`, docs/api.md): `import gpuledger` stays cheap, the Ledger's
verbs return typed values, and the decided spend is the one `gpuledger plan --json` decides on."""

from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest

import gpuledger
from gpuledger.api import Ledger, PlanVerdict, SpecCheck
from gpuledger.cli import main
from gpuledger.errors import BudgetExceeded, UserError

CLOUD_SPEC = "specs/llama3-8b-lora-cloud.yaml"


def test_import_gpuledger_does_not_import_the_application_layer():
    code = ("import sys, gpuledger; assert 'gpuledger.api' not in sys.modules, 'eager'; "
            "L = gpuledger.Ledger; import gpuledger.api; assert L is gpuledger.api.Ledger; "
            "assert 'polars' not in sys.modules, 'a Ledger imports nothing heavy'; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    with pytest.raises(AttributeError):
        gpuledger.NoSuchThing  # noqa: B018


def test_plan_verdict_decides_what_plan_json_decides(repo_root, monkeypatch, capsys):
    monkeypatch.chdir(repo_root)
    verdict = Ledger().plan(CLOUD_SPEC)
    assert isinstance(verdict, PlanVerdict)
    assert verdict.decided_usd == verdict.plan.decided_usd
    code = main(["plan", CLOUD_SPEC, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == verdict.exit_code
    assert data["decided_usd"] == pytest.approx(verdict.decided_usd, abs=1e-4)
    assert data["within_budget"] == verdict.accepted == (verdict.refusal is None)
    assert verdict.to_json()["decided_usd"] == data["decided_usd"]
    assert "<table>" in verdict._repr_html_()


def test_a_refused_plan_is_a_verdict_not_an_exception(repo_root, tmp_path, monkeypatch):
    text = (repo_root / CLOUD_SPEC).read_text(encoding="utf-8")
    spec = tmp_path / "poor.yaml"
    spec.write_text(text.replace("max_usd: 300", "max_usd: 0.01"), encoding="utf-8")
    verdict = Ledger().plan(spec)
    assert not verdict.accepted and verdict.exit_code == 3 and "exceeds the budget" in verdict.refusal
    assert verdict.decided_usd > 0.01
    with pytest.raises(BudgetExceeded):
        verdict.raise_if_refused()


def test_validate_returns_the_problems_of_a_bad_spec(repo_root, tmp_path):
    good = Ledger().validate(repo_root / CLOUD_SPEC)
    assert isinstance(good, SpecCheck) and good.ok and good.kind == "sweep" and good.trials
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: sweep\nname: x\n", encoding="utf-8")
    check = Ledger().validate(bad)
    assert not check.ok and check.problems and all(str(bad) in p for p in check.problems)


def test_estimate_takes_the_estimators_fields():
    est = Ledger().estimate("gpuledger/demo-char-gpt", method="lora", precision="fp32", seq_len=64)
    assert est.params_total > 0 and est.memory_gib["allocated"] > 0
    assert "<table>" in est._repr_html_() and f"{est.params_total:,}" in est._repr_html_()
    from gpuledger.runtime.summary import SweepSummary

    assert "sweep s-1" in SweepSummary(sweep_id="s-1", name="s", spent_usd=1.5)._repr_html_()
    with pytest.raises(UserError, match="micro_batch"):
        Ledger().estimate("gpuledger/demo-char-gpt", micro_batch=0)


def test_reading_verbs_on_a_fresh_ledger(tmp_path):
    ledger = Ledger()
    assert ledger.status() == []
    from gpuledger.warehouse import Warehouse

    with Warehouse.open():  # a writer creates and migrates the (empty) warehouse
        pass
    frame = ledger.runs()
    assert isinstance(frame, pl.DataFrame) and frame.height == 0 and "run_id" in frame.columns
    assert ledger.sql("select 42 as answer")["answer"].to_list() == [42]
    with pytest.raises(UserError, match="refusing"):
        ledger.sql("create table t (x int)")


@pytest.mark.parametrize("timeout_s", [-1, 0, float("nan")])  # "soon": tests/unit/test_api_arguments.py
def test_a_query_limit_that_is_no_number_of_seconds_is_refused_not_said_to_have_run_out(tmp_path, timeout_s):
    from gpuledger.warehouse import Warehouse

    with Warehouse.open():
        pass
    ledger = Ledger()
    for ask in (ledger.sql, ledger.agent_sql):
        with pytest.raises(UserError, match=r"^timeout_s is .*; give a number of seconds > 0$"):
            ask("select 1", timeout_s=timeout_s)


def test_a_ledger_of_another_project_reads_its_settings(tmp_path, monkeypatch):
    (tmp_path / "gpuledger.toml").write_text("[sql]\ntimeout_s = 7\n", encoding="utf-8")
    monkeypatch.delenv("GPULEDGER_WAREHOUSE")
    ledger = Ledger(tmp_path)
    assert ledger.settings.project_root == tmp_path.resolve()
    assert ledger.settings.get("sql.timeout_s") == 7
    assert "GPULEDGER_PROJECT" not in __import__("os").environ


def test_a_ledger_of_a_folder_without_a_project_says_so_naming_the_argument(tmp_path):
    with pytest.raises(UserError, match=r"^Ledger\(project='.*nowhere'\): there is no gpuledger.toml in ") as err:
        Ledger(tmp_path / "nowhere")
    assert "GPULEDGER_PROJECT" not in str(err.value)



def test_refusals_reached_from_the_api_name_its_keyword_not_only_a_cli_option(repo_root, tmp_path):
    text = (repo_root / CLOUD_SPEC).read_text(encoding="utf-8")
    spec = tmp_path / "poor.yaml"
    spec.write_text(text.replace("max_usd: 300", "max_usd: 0.01"), encoding="utf-8")
    assert "Ledger.run(spec, force=True)" in Ledger().plan(spec).refusal
    from gpuledger.warehouse import Warehouse

    with Warehouse.open():
        pass
    with pytest.raises(UserError, match=r"Ledger\.report_sweep\(None, sweep_id=ID\)"):
        Ledger().report_sweep(None)

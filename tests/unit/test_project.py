"""A project of one's own: `gpuledger init` (idempotent, never overwrites), the run-time paths the
settings give from any subfolder, and the one line outside a project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuledger import settings
from gpuledger.cli import main
from gpuledger.scaffold import GITIGNORE_LINE, init_project, scaffold_files


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """A folder in no project, with no explicit warehouse, run-time folder or reports folder."""
    for var in ("GPULEDGER_WAREHOUSE", "GPULEDGER_DATA_DIR", "GPULEDGER_REPORTS_DIR", "PREFECT_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "no-user-config.toml"))
    folder = tmp_path / "far" / "away"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    return folder


def test_init_writes_the_scaffold_and_a_gitignore_then_keeps_everything(outside, capsys):
    assert main(["init", "proj"]) == 0
    root = outside / "proj"
    shipped = [rel for rel, _ in scaffold_files()]
    assert {"gpuledger.toml", "prefect.yaml", "prefect.toml", "specs/lora-grid.yaml", "specs/lora-asha.yaml",
            "specs/gpuledger.schema.json", "trainers/peft_lora.py"} <= set(shipped)
    assert not any(Path(rel).name == "__init__.py" or "__pycache__" in rel for rel in shipped)
    for rel in shipped:
        assert (root / rel).is_file(), rel
    assert (root / ".gitignore").read_text().splitlines()[-1] == GITIGNORE_LINE
    first = capsys.readouterr().out
    assert "wrote gpuledger.toml" in first and "kept" not in first

    (root / "specs" / "lora-grid.yaml").write_text("# mine\n")
    assert main(["init", str(root), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["written"] == [] and set(again["kept"]) == {*shipped, ".gitignore"}
    assert (root / "specs" / "lora-grid.yaml").read_text() == "# mine\n"  # never overwritten


def test_init_adds_the_run_time_folder_to_an_existing_gitignore_once(outside):
    (outside / ".gitignore").write_text("*.log")  # no final newline
    result = init_project(outside)
    assert (outside / ".gitignore").read_text() == f"*.log\n{GITIGNORE_LINE}\n"
    assert any(w.startswith(".gitignore") for w in result.written)
    assert ".gitignore" in init_project(outside).kept
    assert (outside / ".gitignore").read_text().count(GITIGNORE_LINE) == 1


def test_init_of_a_file_is_one_line(outside, capsys):
    (outside / "f").write_text("x")
    assert main(["init", "f"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpuledger init: ") and err.count("\n") == 1


def test_every_run_time_path_is_the_projects_from_any_subfolder(outside, monkeypatch):
    init_project(outside)
    deep = outside / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    s = settings.current()
    data = outside.resolve() / ".gpuledger"
    assert s.project_root == outside.resolve()
    assert Path(s.warehouse) == data / "ledger.duckdb" == settings.resolve_path()
    assert (s.landing_dir, s.studies_dir, s.prefect_home) == (data / "landing", data / "studies", data / "prefect")
    assert s.reports_dir == outside.resolve() / "reports"
    monkeypatch.setenv("PREFECT_HOME", "/elsewhere/prefect")  # Prefect's own variable wins
    assert settings.current().prefect_home == Path("/elsewhere/prefect")


def test_outside_a_project_with_an_explicit_warehouse_the_prefect_home_is_beside_it(outside, monkeypatch):
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(outside / "w" / "ledger.duckdb"))
    assert settings.current().prefect_home == outside / "w" / "prefect"


@pytest.mark.parametrize("argv", [["sql", "select 1"], ["report", "weekly"], ["ingest"], ["export", "--parquet", "x"]])
def test_a_command_that_needs_a_project_says_so_in_one_line(outside, capsys, argv):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"gpuledger {argv[0]}: this command needs a gpuledger project") and err.count("\n") == 1
    assert "gpuledger init" in err
    assert not (outside / ".gpuledger").exists() and not (outside / "reports").exists()


def test_schema_write_writes_into_the_project_not_the_package(outside, capsys):
    from gpuledger.cli.commands.schema import SCHEMA_FILE

    before = SCHEMA_FILE.stat().st_mtime_ns
    (outside / "gpuledger.toml").write_text("")
    (outside / "sub").mkdir()
    import os

    os.chdir(outside / "sub")
    assert main(["schema", "--write"]) == 0
    target = outside / "specs" / "gpuledger.schema.json"
    assert target.is_file() and str(target) in capsys.readouterr().out
    assert SCHEMA_FILE.stat().st_mtime_ns == before


@pytest.mark.slow  # over ~0.5 s alone (a report, warehouse, plan or subprocess): make test runs it, make test-fast does not
def test_commands_that_need_no_project_work_anywhere_and_write_nothing(outside, repo_root, capsys):
    cloud = str(repo_root / "specs" / "llama3-8b-lora-cloud.yaml")
    for argv in (["plan", cloud], ["validate", cloud], ["estimate", "llama-3.1-8b", "--accelerator", "A100"],
                 ["render-task", cloud], ["schema"]):
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    assert list(outside.iterdir()) == []


def test_the_demo_runs_in_the_project_or_in_a_new_one_it_makes(outside, monkeypatch):
    from gpuledger.cli.commands.demo import DEMO_FOLDER, demo_project, spec_paths
    from gpuledger.errors import UserError

    root, made = demo_project()
    assert made and root == (outside / DEMO_FOLDER).resolve() and (root / "gpuledger.toml").is_file()
    (root / "specs" / "lora-asha.yaml").unlink()  # a project without the demo specs gets the bundled ones
    monkeypatch.chdir(root / "specs")
    assert demo_project() == (root, False)
    assert [p.name for p in spec_paths(root)] == ["lora-grid.yaml", "lora-asha.yaml"]
    assert (root / "specs" / "lora-asha.yaml").read_bytes() == dict(scaffold_files())["specs/lora-asha.yaml"].read_bytes()

    elsewhere = outside / "other"
    (elsewhere / DEMO_FOLDER).mkdir(parents=True)
    (elsewhere / DEMO_FOLDER / "notes.txt").write_text("mine")
    monkeypatch.chdir(elsewhere)
    with pytest.raises(UserError, match="exists without a gpuledger.toml"):
        demo_project()

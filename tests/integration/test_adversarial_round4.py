"""Issue 43 (hardening round 4), the findings that need real files, mounts, owners and processes: a
full disk during `billing ingest` (a real tmpfs filled up), `ingest DIR` beside files that are not
gpuledger's, `init` beside a symlink that leaves the project, a project planted by another user. Each
hostile case beside its harmless control."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOCUS = REPO / "tests" / "data" / "focus" / "gpu_cloud_2026-02.csv"


def _gpuledger(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120):
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    base.update({"HOME": str(cwd / ".home"), "PYTHONPATH": str(REPO)})
    if "GPULEDGER_MACHINE_FILE" in os.environ:
        base["GPULEDGER_MACHINE_FILE"] = os.environ["GPULEDGER_MACHINE_FILE"]
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**base, **(env or {})})


def _bill(path: Path, rows: int) -> Path:
    lines = FOCUS.read_text(encoding="utf-8").splitlines()
    out = [lines[0]] + [lines[2].replace("i-0aaa", f"i-{i:06d}").replace("gl-lora-grid-aaaaaaaaaaaa", f"res-{i}")
                        for i in range(rows)]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.decode().strip()})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_during_billing_ingest_is_one_line_and_stores_nothing(tmp_path, tiny_disk, monkeypatch, capsys):
    from gpuledger.cli import main

    ledger = tiny_disk / "ledger.duckdb"
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(ledger))
    small = _bill(tmp_path / "small.csv", 3)
    # control: with room, the bill is stored
    assert main(["billing", "ingest", str(small)]) == 0, capsys.readouterr().err
    # the disk fills up: a few hundred KiB left for a bill of megabytes
    free_kib = shutil.disk_usage(tiny_disk).free // 1024
    with open(tiny_disk / "filler", "wb") as fh:
        fh.write(b"\0" * ((free_kib - 300) * 1024))
    big = _bill(tmp_path / "big.csv", 6000)
    capsys.readouterr()
    assert main(["billing", "ingest", str(big)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "ENOSPC" in err and "full" in err and str(ledger) in err
    (tiny_disk / "filler").unlink()
    assert main(["sql", "select count(*) as n from billing_files", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", "1"]  # only the small bill: the big one rolled back


# ---------------------------------------------------------------- item 8: only gpuledger's files moved or written

def _repo_like(root: Path) -> Path:
    """A repository as `ingest .` meets it: its own JSON files beside a result record."""
    import json

    from helpers.record_fixtures import example_record

    (root / "specs").mkdir(parents=True)
    (root / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0"}), encoding="utf-8")
    (root / "tsconfig.json").write_text('{ // comments: not JSON\n "compilerOptions": {} }\n', encoding="utf-8")
    shutil.copy(REPO / "gpuledger" / "scaffold" / "specs" / "gpuledger.schema.json", root / "specs")
    (root / "specs" / "lora-grid.yaml").write_text("kind: sweep\n", encoding="utf-8")
    (root / "r-good.json").write_text(json.dumps(example_record("r-good", "t1", sweep_id="s-1")), encoding="utf-8")
    (root / "r-cut.json").write_text('{"schema": "gpuledger.result/1", "run_id": ', encoding="utf-8")
    return root


def test_ingest_dir_moves_only_result_records(tmp_path, monkeypatch, capsys):
    from gpuledger.cli import main
    from gpuledger.warehouse import Warehouse

    ledger = tmp_path / "ledger.duckdb"
    with Warehouse.open(ledger) as wh:
        wh.register_sweep(sweep_id="s-1", name="s", project="p", owner="o", objective_metric="eval_loss")
        wh.upsert_trials("s-1", [{"trial_id": "t1"}])
    repo = _repo_like(tmp_path / "repo")
    theirs = {p: p.read_bytes() for p in (repo / "package.json", repo / "tsconfig.json",
                                          repo / "specs" / "gpuledger.schema.json", repo / "specs" / "lora-grid.yaml")}
    monkeypatch.setenv("GPULEDGER_WAREHOUSE", str(ledger))
    monkeypatch.chdir(repo)
    for folder in (".", "specs"):  # `gpuledger ingest .` and `gpuledger ingest specs`
        code = main(["ingest", folder])
        out, err = capsys.readouterr()
        assert "Traceback" not in err and "left in place" in out, out + err
    assert all(p.read_bytes() == data for p, data in theirs.items()), "a file that is not a record was moved"
    assert not (repo / "specs" / "rejected").exists() and not (repo / "specs" / "ingested").exists()
    # control: the record was stored and moved, the cut record refused (it carries a record's marks)
    assert (repo / "ingested" / "r-good.json").exists() and (repo / "rejected" / "r-cut.json").exists()
    assert sorted(p.name for p in (repo / "rejected").iterdir()) == ["r-cut.json", "r-cut.json.reason.txt"]
    assert code == 0  # specs/: nothing refused
    with Warehouse.open(ledger, read_only=True) as wh:
        assert wh.scalar("select count(*) from runs") == 1


def test_init_never_writes_through_a_symlink_that_leaves_the_project(tmp_path, capsys):
    from gpuledger.cli import main

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "global-ignore").write_text("*.log\n", encoding="utf-8")
    (elsewhere / "shared-specs").mkdir()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".gitignore").symlink_to(elsewhere / "global-ignore")
    (proj / "specs").symlink_to(elsewhere / "shared-specs")
    assert main(["init", str(proj)]) == 0
    out = capsys.readouterr().out
    assert (elsewhere / "global-ignore").read_text() == "*.log\n"  # untouched
    assert list((elsewhere / "shared-specs").iterdir()) == []  # nothing written through the link
    assert "NOT written .gitignore" in out and str(elsewhere / "global-ignore") in out
    assert "NOT written specs/lora-grid.yaml" in out
    assert (proj / "gpuledger.toml").is_file() and (proj / "trainers" / "peft_lora.py").is_file()
    # control: a symlink that stays inside the project is written through as before
    inside = tmp_path / "inside"
    (inside / "config").mkdir(parents=True)
    (inside / "config" / "ignore").write_text("build/\n", encoding="utf-8")
    (inside / ".gitignore").symlink_to(inside / "config" / "ignore")
    assert main(["init", str(inside)]) == 0
    assert (inside / "config" / "ignore").read_text() == "build/\n.gpuledger/\n"


# ---------------------------------------------------------------- items 2 and 7: the agent's SQL through the real MCP server

@pytest.mark.slow
def test_the_mcp_sql_tool_reads_the_ledger_only_and_stays_bounded(tmp_path):
    import asyncio

    import psutil
    from test_mcp import _client, _project, _text

    from gpuledger.warehouse import Warehouse

    proj = _project(tmp_path, budget_usd=1.0)
    with Warehouse.open(proj / ".gpuledger" / "ledger.duckdb"):
        pass
    creds = tmp_path / "home" / ".aws" / "credentials"  # the server's HOME (test_mcp._env)
    creds.parent.mkdir(parents=True)
    creds.write_text("[default]\naws_secret_access_key = AKIA-SERVER-SECRET\n", encoding="utf-8")

    def server_rss_mib() -> float:
        procs = [p for p in psutil.Process().children(recursive=True) if "mcp" in " ".join(p.cmdline())]
        return max((p.memory_info().rss for p in procs), default=0) / 2**20

    async def talk() -> None:
        async with _client(proj) as client:
            for query in (f"select content from read_text('{creds}')", "select * from read_text('~/.aws/credentials')",
                          f"select * from read_csv('{creds}')", f"copy sweeps to '{tmp_path}/out.csv'",
                          "install httpfs", "load httpfs", f"attach '{tmp_path}/x.duckdb'",
                          "select * from read_parquet('https://example.com/x.parquet')"):
                refused = await client.call_tool("sql", {"query": query})
                text = _text(refused)
                assert refused.is_error and "AKIA" not in text, (query, text)
                assert "ledger only" in text and "Traceback" not in text, (query, text)
            # control: the ledger itself
            ok = await client.call_tool("sql", {"query": "select count(*) as n from sweeps"})
            assert not ok.is_error and ok.structured_content["rows"] == [{"n": 0}]
            before = server_rss_mib()
            big = await client.call_tool("sql", {"query": "select i, repeat('x', 300) as pad from range(1000000) t(i)"})
            assert not big.is_error, _text(big)
            assert big.structured_content["row_count"] == 1000 and big.structured_content["truncated"]
            grew = server_rss_mib() - before
            assert grew < 300, f"one sql call grew the server by {grew:.0f} MiB"

    asyncio.run(talk())
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "x.duckdb").exists()

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

"""The PEFT trainer is for cloud GPUs: here it must compile and answer --help without torch & co."""

from __future__ import annotations

import py_compile
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINER = REPO / "gpuledger" / "scaffold" / "trainers" / "peft_lora.py"


def test_compiles():
    py_compile.compile(str(TRAINER), doraise=True)


def test_help_works_without_the_heavy_libraries():
    proc = subprocess.run([sys.executable, str(TRAINER), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for option in ("--model", "--dataset", "--lora-r", "--lora-alpha", "--lora-targets", "--lr",
                   "--micro-batch", "--seq-len", "--max-steps", "--bf16"):
        assert option in proc.stdout


def test_requirements_list_the_cloud_libraries():
    names = {line.split(">")[0].split("=")[0].split("<")[0].strip().lower()
             for line in (TRAINER.parent / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert {"torch", "transformers", "peft", "datasets", "psutil", "nvidia-ml-py"} <= names

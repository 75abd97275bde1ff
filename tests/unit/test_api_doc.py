"""docs/api.md's examples run: each ```python block, in order, in one namespace, in a fresh project
(`gpuledger init`); a block that imports Transformers is skipped where it is not installed."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from gpuledger.scaffold import init_project

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_doc_has_runnable_examples_of_every_verb_family():
    text = "\n".join(blocks())
    for verb in ("validate(", "estimate(", "plan(", "runs(", "sql(", "status(", "track.init(", "import_history("):
        assert verb in text, f"docs/api.md runs no example of {verb}"


@pytest.mark.slow  # a plan of the demo grid, an ad-hoc run and an import: beyond the edit loop's budget
def test_the_examples_of_docs_api_run(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    init_project(root)
    monkeypatch.chdir(root)
    monkeypatch.delenv("GPULEDGER_RUN_ID", raising=False)
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    namespace: dict = {}
    for i, code in enumerate(blocks()):
        if "transformers" in code and importlib.util.find_spec("transformers") is None:
            continue
        try:
            exec(compile(code, f"docs/api.md block {i + 1}", "exec"), namespace)  # noqa: S102 (the doc's own code)
        except Exception as err:
            pytest.fail(f"docs/api.md block {i + 1} failed: {type(err).__name__}: {err}\n{code}")
    out = capsys.readouterr().out
    assert "sweep lora-grid 12" in out

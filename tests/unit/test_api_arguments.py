"""A Ledger verb given an argument of the wrong type answers one UserError line naming the verb and the
argument (gpuledger/api/arguments.py), before anything opens a file or the warehouse."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from gpuledger.api import Ledger
from gpuledger.errors import UserError

CLOUD_SPEC = "specs/llama3-8b-lora-cloud.yaml"


@pytest.mark.parametrize(("call", "message"), [
    (lambda L: L.validate(123), r"Ledger.validate(spec=123): expected a path (a non-empty str or os.PathLike), got int"),
    (lambda L: L.plan(None), r"Ledger.plan(spec=None): expected a path (a non-empty str or os.PathLike)"),
    (lambda L: L.plan(""), r"Ledger.plan(spec=''): expected a path (a non-empty str or os.PathLike), got str"),
    (lambda L: L.run(b"specs/x.yaml"), r"Ledger.run(spec=b'specs/x.yaml'): expected a path "),
    (lambda L: L.capacity(["a.yaml"]), r"Ledger.capacity(spec=['a.yaml']): expected a path "),
    (lambda L: L.sql(123), r"Ledger.sql(query=123): expected a str, got int"),
    (lambda L: L.agent_sql(None), r"Ledger.agent_sql(query=None): expected a str"),
    (lambda L: L.sql("select 1", timeout_s="soon"), r"Ledger.sql(timeout_s='soon'): expected a number or None, got str"),
    (lambda L: L.sql("select 1", write="no"), r"Ledger.sql(write='no'): expected True or False, got str"),
    (lambda L: L.status(limit="5"), r"Ledger.status(limit='5'): expected a whole number (int), got str"),
    (lambda L: L.runs(limit=True), r"Ledger.runs(limit=True): expected a whole number (int), got bool"),
    (lambda L: L.status(123), r"Ledger.status(sweep=123): expected a str or None, got int"),
    (lambda L: L.estimate(123), r"Ledger.estimate(model=123): expected a str or a gpuledger.estimate.Workload"),
    (lambda L: L.gpu_options("Qwen/Qwen2.5-0.5B", 1e8), r"Ledger.gpu_options(workload='Qwen/Qwen2.5-0.5B'): expected a "
                                                        r"gpuledger.estimate.Workload, got str"),
    (lambda L: L.import_history("runs.jsonl"), r"Ledger.import_history(paths='runs.jsonl'): expected a list, each a path"),
    (lambda L: L.prices(gpu=["A100"]), r"Ledger.prices(gpu=['A100']): expected a str or None, got list"),
    (lambda L: L.plan(CLOUD_SPEC, no_such_option=1), r"Ledger.plan: got an unexpected keyword argument 'no_such_option'"),
    (lambda L: Ledger(project=123), r"Ledger(project=123): expected a path "),
    (lambda L: Ledger(warehouse="ledger\x00.duckdb"), r"Ledger(warehouse='ledger\x00.duckdb'): no such path (it holds "
                                                      r"a NUL character)"),
])
def test_a_wrong_argument_is_one_line_naming_the_verb_and_the_argument(call, message):
    with pytest.raises(UserError) as err:
        call(Ledger())
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_right_arguments_still_run(repo_root, monkeypatch):
    from gpuledger.warehouse import Warehouse

    monkeypatch.chdir(repo_root)
    with Warehouse.open():
        pass
    ledger = Ledger()
    assert ledger.validate(Path(CLOUD_SPEC)).ok and ledger.validate(CLOUD_SPEC).ok
    assert isinstance(ledger.status(limit=5), list)
    assert ledger.sql("select 42 as answer", timeout_s=30)["answer"].to_list() == [42]
    workload = ledger.workload("gpuledger/demo-char-gpt", method="lora", precision="fp32", seq_len=64)
    assert ledger.estimate(workload).params_total == ledger.estimate("gpuledger/demo-char-gpt", method="lora",
                                                                     precision="fp32", seq_len=64).params_total


def test_every_public_verb_checks_its_arguments():
    unchecked = [name for name, fn in vars(Ledger).items()
                 if inspect.isfunction(fn) and (not name.startswith("_") or name == "__init__")
                 and not hasattr(fn, "__wrapped__")]
    assert not unchecked, f"verbs that do not check their arguments: {unchecked}"

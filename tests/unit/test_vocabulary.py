"""The vocabulary is the one home of gpuledger's words: the SQL, the spec, the estimator and the
command line take them from `gpuledger.vocabulary`, and only tests know the fake launcher."""

from __future__ import annotations

import re
import typing
from importlib import resources

import pytest

from gpuledger import vocabulary

#: A status column (`status`, `r.status`, `last_status`, `run_status`, ...) compared with one quoted
#: literal or a list of them: `= 'x'`, `<> 'x'`, `!= 'x'`, `IN ('x', 'y')`, `NOT IN (...)`.
STATUS_COMPARISON = re.compile(
    r"\b(?:\w+\.)?(?P<column>\w*status\w*)\s*(?:=|<>|!=|\bNOT\s+IN\b|\bIN\b)\s*"
    r"(?P<value>'[^']*'|\(\s*'[^)]*\))",
    re.IGNORECASE,
)
#: The same written the other way round: `'x' = status`.
STATUS_COMPARISON_REVERSED = re.compile(
    r"(?P<value>'[^']*')\s*(?:=|<>|!=)\s*(?:\w+\.)?(?P<column>\w*status\w*)\b", re.IGNORECASE)


def _without_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def status_literals(sql: str) -> list[tuple[str, tuple[str, ...]]]:
    """Returns (column, literals) for every comparison of a status column with quoted literals."""
    text = _without_comments(sql)
    found = []
    for pattern in (STATUS_COMPARISON, STATUS_COMPARISON_REVERSED):
        for m in pattern.finditer(text):
            found.append((m.group("column"), tuple(re.findall(r"'([^']*)'", m.group("value")))))
    return found


def _sql_files():
    root = resources.files("gpuledger.warehouse") / "sql"
    out = []

    def walk(folder):
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry)
            elif entry.name.endswith(".sql"):
                out.append(entry)

    walk(root)
    return sorted(out, key=lambda e: str(e))


def test_every_status_literal_in_the_warehouse_sql_is_in_the_vocabulary():
    unknown, seen = [], 0
    for entry in _sql_files():
        for column, literals in status_literals(entry.read_text(encoding="utf-8")):
            seen += 1
            unknown += [f"{entry.name}: {column} compared with {lit!r}" for lit in literals
                        if lit not in vocabulary.ALL_STATUSES]
    assert seen >= 20, f"only {seen} status comparisons found: has the SQL or the pattern changed?"
    assert not unknown, "status words the vocabulary does not know (gpuledger/vocabulary.py):\n" + "\n".join(unknown)


def test_the_sql_wasted_list_is_the_vocabulary_group():
    """`v_run_facts.wasted` is the one SQL definition of waste: the same words as WASTED_RUN_STATUSES."""
    sql = (resources.files("gpuledger.warehouse") / "sql" / "views" / "v_run_facts.sql").read_text(encoding="utf-8")
    lists = [lits for column, lits in status_literals(sql) if len(lits) > 1]
    assert lists == [vocabulary.WASTED_RUN_STATUSES]


def test_the_finder_reads_each_way_of_writing_a_comparison_and_skips_comments():
    sql = """
    SELECT count(*) FILTER (WHERE r.status IN ('failed', 'oom')) AS bad,   -- status = 'ignored'
           bool_or(last_status <> 'cancelled'), 'pruned' = t.status
    FROM runs r WHERE run_status NOT IN ('pending','runing') AND kind = 'other'
    """
    assert sorted(status_literals(sql)) == sorted([
        ("status", ("failed", "oom")), ("last_status", ("cancelled",)), ("run_status", ("pending", "runing")),
        ("status", ("pruned",)),
    ])
    assert "runing" not in vocabulary.ALL_STATUSES


def test_status_groups_are_made_of_known_statuses():
    assert set(vocabulary.WASTED_RUN_STATUSES) <= set(vocabulary.RUN_STATUSES)
    assert vocabulary.SUCCEEDED not in vocabulary.WASTED_RUN_STATUSES
    assert set(vocabulary.TRIAL_TERMINAL) <= set(vocabulary.TRIAL_STATUSES)
    assert set(vocabulary.LAUNCH_STATUSES) >= vocabulary.LAUNCH_TERMINAL
    assert {vocabulary.launch_status_of(s) for s in vocabulary.RUN_STATUSES} <= vocabulary.LAUNCH_TERMINAL


@pytest.mark.parametrize(("literal_type", "words"), [
    ("Method", "METHODS"), ("Precision", "PRECISIONS"), ("Optimizer", "OPTIMIZERS"), ("Sharding", "SHARDINGS"),
    ("Framework", "FRAMEWORKS"), ("Launcher", "LAUNCHERS"), ("RunStatus", "RUN_STATUSES"),
    ("LaunchStatus", "LAUNCH_STATUSES"), ("PriceSource", "PRICE_SOURCES"),
])
def test_each_tuple_is_its_literal_type(literal_type, words):
    assert typing.get_args(getattr(vocabulary, literal_type)) == getattr(vocabulary, words)


def test_the_spec_the_estimator_and_the_cli_take_their_words_from_the_vocabulary():
    from gpuledger.cli import build_parser
    from gpuledger.estimate import Workload
    from gpuledger.spec.models import SweepSpec, Train

    assert SweepSpec.model_fields["method"].annotation is vocabulary.Method
    assert SweepSpec.model_fields["launcher"].annotation is vocabulary.Launcher
    assert Train.model_fields["sharding"].annotation is vocabulary.SpecSharding
    assert Train.model_fields["optimizer"].annotation is vocabulary.Optimizer
    for field, literal in (("method", vocabulary.Method), ("precision", vocabulary.Precision),
                           ("optimizer", vocabulary.Optimizer), ("sharding", vocabulary.Sharding),
                           ("framework", vocabulary.Framework), ("padding", vocabulary.Padding)):
        assert Workload.model_fields[field].annotation is literal, field
    estimate = next(a for a in build_parser()._subparsers._group_actions[0].choices["estimate"]._actions
                    if a.dest == "method")
    assert tuple(estimate.choices) == vocabulary.METHODS


def test_production_code_does_not_know_the_fake_launcher():
    """`fake` is the tests' launcher: not a file of the package, not a built-in name; the tests register
    it (tests/conftest.py), so `get_launcher` knows it here only through the registry."""
    from gpuledger.launch import get_launcher, known_launchers, plans_as, registered_launchers

    assert "fake" not in vocabulary.LAUNCHERS and "fake" in vocabulary.RECORD_LAUNCHERS
    assert not (resources.files("gpuledger.launch") / "fake.py").is_file()
    registered = registered_launchers()["fake"]
    assert registered.factory.__module__ == "helpers.fake_launcher" and plans_as("fake") == "local"
    assert known_launchers()[:2] == vocabulary.LAUNCHERS
    with pytest.raises(ValueError, match="unknown launcher 'nope': use local or skypilot"):
        get_launcher("nope")

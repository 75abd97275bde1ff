"""Column tests of the warehouse's views, declared in `gpuledger/warehouse/sql/views.yml` (dbt style)
and run against a warehouse:

    - {name: run_id, description: ..., tests: [unique, not_null]}
    - {name: status, description: ..., tests: [{accepted_values: {vocabulary: RUN_STATUSES}}]}
    - {name: goal, description: ..., tests: [{accepted_values: {values: [minimize, maximize]}}]}
    - {name: sweep_id, description: ..., tests: [{relationships: {to: v_sweep_roi, field: sweep_id}}]}

and per view `tests: [{unique_combination: [sweep_id, trial_id]}]`. `accepted_values: {vocabulary: NAME}`
takes the tuple NAME of `gpuledger.vocabulary`, so the allowed values live in one place.

    failures = [r for r in run_column_checks(wh) if not r.passed]

Each kind's SQL is a template in `gpuledger/warehouse/sql/column_checks/<kind>.sql` (identifiers from
views.yml quoted by `sqlfiles.ident`, values as parameters); this module only reads views.yml and
fills them in.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gpuledger.warehouse import sqlfiles

CHECKS_DIR = sqlfiles.SQL_ROOT / "column_checks"
#: the test kinds views.yml may name on a column, and on a view
COLUMN_KINDS = ("unique", "not_null", "accepted_values", "relationships")
VIEW_KINDS = ("unique_combination",)


@dataclass(frozen=True)
class ColumnCheck:
    """One declared test: `kind` on `view`.`column` (a view test: `columns`), with its arguments."""

    view: str
    kind: str
    column: str | None = None
    columns: tuple[str, ...] = ()
    values: tuple[str, ...] = ()  # accepted_values
    to: str | None = None  # relationships: the view and field the value must exist in
    to_field: str | None = None
    source: str = ""  # where the values come from (vocabulary name or "views.yml")

    @property
    def name(self) -> str:
        what = self.column or "(" + ", ".join(self.columns) + ")"
        extra = f" -> {self.to}.{self.to_field}" if self.kind == "relationships" else (
            f" in {self.source}" if self.kind == "accepted_values" else "")
        return f"{self.view}.{what} {self.kind}{extra}"

    def sql(self) -> str:
        return _template(self.kind).format(
            view=sqlfiles.ident(self.view), column=sqlfiles.ident(self.column or ""),
            columns=", ".join(sqlfiles.ident(c) for c in self.columns),
            to=sqlfiles.ident(self.to or ""), field=sqlfiles.ident(self.to_field or ""))


@dataclass(frozen=True)
class CheckResult:
    check: ColumnCheck
    failing: int
    example: str | None = None  # one offending value, as text

    @property
    def passed(self) -> bool:
        return self.failing == 0

    def line(self) -> str:
        return (f"{self.check.name}: " + ("ok" if self.passed else
                f"{self.failing} failing row(s)" + (f", e.g. {self.example!r}" if self.example is not None else "")))


@functools.cache
def _template(kind: str) -> str:
    return (CHECKS_DIR / f"{kind}.sql").read_text(encoding="utf-8").strip().rstrip(";")


def _values(view: str, column: str, spec: Any) -> tuple[tuple[str, ...], str]:
    import gpuledger.vocabulary as vocabulary

    where = f"views.yml {view}.{column} accepted_values"
    if not isinstance(spec, dict) or ("values" in spec) == ("vocabulary" in spec):
        raise ValueError(f"{where}: give either values: [...] or vocabulary: NAME")
    if "values" in spec:
        return tuple(str(v) for v in spec["values"]), "views.yml"
    name = str(spec["vocabulary"])
    found = getattr(vocabulary, name, None)
    if not isinstance(found, (tuple, frozenset)) or not name.isupper():
        raise ValueError(f"{where}: gpuledger.vocabulary has no value group {name!r}")
    return tuple(sorted(str(v) for v in found)), f"vocabulary.{name}"


def _column_check(view: str, column: str, test: Any) -> ColumnCheck:
    kind, arg = (test, None) if isinstance(test, str) else next(iter(test.items())) if (
        isinstance(test, dict) and len(test) == 1) else (None, None)
    if kind not in COLUMN_KINDS:
        raise ValueError(f"views.yml {view}.{column}: unknown test {test!r} (known: {', '.join(COLUMN_KINDS)})")
    if kind == "accepted_values":
        values, source = _values(view, column, arg)
        return ColumnCheck(view, kind, column, values=values, source=source)
    if kind == "relationships":
        if not isinstance(arg, dict) or not arg.get("to") or not arg.get("field"):
            raise ValueError(f"views.yml {view}.{column} relationships: give to: VIEW and field: COLUMN")
        return ColumnCheck(view, kind, column, to=str(arg["to"]), to_field=str(arg["field"]))
    return ColumnCheck(view, kind, column)


def column_checks(doc: dict[str, Any] | None = None) -> list[ColumnCheck]:
    """Returns every test views.yml declares (`doc`: its parsed text, default the package's file), in
    file order. A malformed test raises ValueError naming the view and column."""
    if doc is None:
        import yaml

        doc = yaml.safe_load(sqlfiles.VIEWS_DOC.read_text(encoding="utf-8")) or {}
    out: list[ColumnCheck] = []
    for view, v in (doc.get("views") or {}).items():
        for test in v.get("tests") or []:
            if not (isinstance(test, dict) and len(test) == 1 and next(iter(test)) in VIEW_KINDS):
                raise ValueError(f"views.yml {view}: unknown view test {test!r} (known: {', '.join(VIEW_KINDS)})")
            out.append(ColumnCheck(str(view), "unique_combination", columns=tuple(str(c) for c in test["unique_combination"])))
        for c in v.get("columns") or []:
            out.extend(_column_check(str(view), str(c["name"]), t) for t in c.get("tests") or [])
    return out


def run_column_checks(wh: Any, checks: list[ColumnCheck] | None = None) -> list[CheckResult]:
    """Runs `checks` (default: all of views.yml) on the open Warehouse `wh`; one result per check."""
    results = []
    for check in column_checks() if checks is None else checks:
        params = {"values": list(check.values)} if check.kind == "accepted_values" else None
        row = wh.query(check.sql(), params).row(0, named=True)
        results.append(CheckResult(check, int(row["failing"]), row["example"]))
    return results

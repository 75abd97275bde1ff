"""FOCUS billing line items into the warehouse: one file in one transaction, idempotent, restatements.

What identifies "the same export" is its export name (the file's name unless the caller gives one):
clouds re-deliver an export for a billing period under the same name when they restate it. A later
delivery of the same export with new content replaces the earlier delivery's rows for the billing
accounts and periods it covers; files with other names never replace anything (two scenario files of
one account and month both count). Rows with `ChargeClass = 'Correction'` are deltas that FOCUS
carries in a later billing period for an earlier one: they are stored as they come, never netted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gpuledger.warehouse.connect import now
from gpuledger.warehouse.lazy import polars as pl


@dataclass
class BillingIngestResult:
    """What `ingest_billing_file` did with one file."""

    path: str
    export_name: str
    sha256: str
    line_items: int
    already_ingested: bool
    replaced_files: list[str]
    replaced_line_items: int
    absent_columns: list[str]
    currency_assumed_rows: int
    billed_by_currency: dict[str, float]
    effective_assumed_rows: int = 0

    def summary(self) -> str:
        if self.already_ingested:
            return f"{self.path}: already ingested (same content, sha256 {self.sha256[:12]}); nothing changed"
        money = ", ".join(f"{v:,.2f} {c}" for c, v in sorted(self.billed_by_currency.items()))
        text = f"{self.path}: {self.line_items} line items stored (billed {money or '0'})"
        if self.replaced_line_items:
            text += (f"; restated: replaced {self.replaced_line_items} line items of an earlier delivery "
                     f"of export {self.export_name!r}")
        if self.currency_assumed_rows:
            text += f"; {self.currency_assumed_rows} rows have no BillingCurrency and are taken as USD"
        if self.effective_assumed_rows:
            text += (f"; {self.effective_assumed_rows} rows have no EffectiveCost and count at their BilledCost "
                     "as effective cost")
        return text


class BillingMixin:
    """`Warehouse` methods for FOCUS billing exports (see `gpuledger.billing`)."""

    _con: Any
    _require_writer: Any
    _run: Any
    _insert: Any
    transaction: Any

    def ingest_billing_file(self, focus_file: Any, *, export_name: str | None = None) -> BillingIngestResult:
        """Stores one validated `gpuledger.billing.FocusFile` whole, or nothing (one transaction)."""
        self._require_writer("ingest billing")
        ff = focus_file
        name = export_name or ff.path.name
        frame = ff.frame
        billed = {str(c): float(v or 0.0) for c, v in
                  frame.group_by("billing_currency").agg(pl.col("billed_cost").sum()).iter_rows()}
        result = BillingIngestResult(
            path=str(ff.path), export_name=name, sha256=ff.sha256, line_items=frame.height,
            already_ingested=False, replaced_files=[], replaced_line_items=0, absent_columns=list(ff.absent),
            currency_assumed_rows=ff.currency_assumed_rows, billed_by_currency=billed,
            effective_assumed_rows=int(frame["effective_cost"].null_count()))
        if self._run("billing_file_known", {"sha256": ff.sha256}):
            result.already_ingested = True
            return result
        scopes = frame.select("billing_account_id", "billing_period_start").unique()
        with self.transaction():
            for account, period in scopes.iter_rows():
                for sha, rows in self._run("billing_earlier_deliveries",
                                           {"export_name": name, "account": account, "period": period}):
                    self._run("billing_delete_delivery_scope",
                              {"sha256": sha, "account": account, "period": period})
                    self._run("billing_mark_replaced", {"sha256": sha, "by": ff.sha256})
                    result.replaced_files.append(sha)
                    result.replaced_line_items += int(rows)
            self._run("billing_file_insert", {
                "sha256": ff.sha256, "export_name": name, "path": str(ff.path), "line_items": frame.height,
                "absent": json.dumps(ff.absent), "extra": json.dumps(ff.extra_columns),
                "assumed": ff.currency_assumed_rows, "at": now()})
            self._insert("billing_line_items", frame.with_columns(
                file_sha256=pl.lit(ff.sha256)))
            self.reconcile_budget_with_bill()  # type: ignore[attr-defined]  (BudgetLedgerMixin: envelopes to the bill)
        return result

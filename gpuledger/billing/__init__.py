"""Billing from the bill: FOCUS exports read and validated (`focus`), checked by pandera (`schema`).

The warehouse stores them (`Warehouse.ingest_billing_file`, module `gpuledger.warehouse.billing`)
and its views attribute line items to runs (`v_billing_attribution`) and compare estimated, billed and
effective cost (`v_billed_spend`, `v_run_billed`, `v_sweep_billed`).
"""

from gpuledger.billing.focus import COLUMNS, REQUIRED, FocusError, FocusFile, read_focus

__all__ = ["COLUMNS", "REQUIRED", "FocusError", "FocusFile", "read_focus"]

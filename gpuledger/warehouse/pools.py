"""What a sweep's SkyPilot pools cost beyond their trials' records (table `sweep_pools`, migration 013;
named queries `sweep_pool_insert`, `report_sweep_pools`): the workers' start-up and idle tail, the
sweep's, and the saving against per-trial managed jobs (gpuledger/launch/skypilot_pool.py measures them)."""

from __future__ import annotations

from typing import Any

from gpuledger.warehouse.connect import now

#: The fields of one pool row (`gpuledger.launch.skypilot_pool.PoolUsage.to_json()` carries them as `name`...).
POOL_FIELDS = ("workers", "reused", "trials", "worker_s", "busy_s", "idle_s", "startup_s", "usd_per_hour",
               "pool_usd", "idle_usd", "per_trial_jobs_usd", "saving_usd")


class PoolsMixin:
    """`Warehouse` methods for the pools of sweeps (see `gpuledger.warehouse.core.WarehouseBase`)."""

    _require_writer: Any
    _run: Any
    query_named: Any
    transaction: Any

    def record_pool_usage(self, sweep_id: str, usage: dict[str, Any]) -> None:
        """Stores one torn-down pool of a run of `sweep_id` (`PoolUsage.to_json()`: name and POOL_FIELDS)."""
        self._require_writer("record_pool_usage")
        with self.transaction():
            self._run("sweep_pool_insert", {"sweep_id": sweep_id, "pool": usage["name"], "recorded_at": now(),
                                            **{k: usage.get(k) for k in POOL_FIELDS}})

    def sweep_pools(self, sweep_id: str) -> list[dict[str, Any]]:
        """Returns the sweep's pool rows, oldest first (empty: it ran as per-trial jobs)."""
        return self.query_named("report_sweep_pools", {"sweep_id": sweep_id}).to_dicts()

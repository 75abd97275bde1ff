"""Prometheus metrics of the ledger (`gpuledger serve --metrics-port PORT`, GET /metrics; docs/budgets.md).

Read from the warehouse at each scrape (read-only, a short lock wait; a busy or missing warehouse is
`gpuledger_warehouse_up 0`, never an error page):

    gpuledger_sweep_accrued_usd{sweep, name, state}     spend so far: measured runs + running trials' accrual
    gpuledger_sweep_running_usd_per_hour{sweep, name}   $/h of the sweep's running trials
    gpuledger_sweep_running_trials{sweep, name}
    gpuledger_running_usd_per_hour                      $/h of every running trial
    gpuledger_envelope_limit_usd{budget, scope, window}, _used_usd, _spent_usd, _reserved_usd, _remaining_usd
    gpuledger_trials{state}                             trials by status, every sweep
    gpuledger_warehouse_up

Served by prometheus_client (a dependency of Prefect) in a daemon thread.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import CollectorRegistry


class LedgerCollector:
    """Collects the ledger's money metrics at each scrape."""

    def collect(self) -> Any:
        from gpuledger.runtime.money import envelope_rows
        from gpuledger.runtime.sweep_states import sweep_states

        up = GaugeMetricFamily("gpuledger_warehouse_up", "1 when the warehouse could be read for this scrape")
        try:
            sweeps = sweep_states(limit=200)
            envelopes = envelope_rows()
            trials = _trials_by_state()
        except Exception:  # noqa: BLE001 - a busy or missing warehouse: say so, serve what there is
            up.add_metric([], 0.0)
            yield up
            return
        up.add_metric([], 1.0)
        yield up
        accrued = GaugeMetricFamily("gpuledger_sweep_accrued_usd", "Spend so far of a sweep: measured runs + "
                                    "running trials' price x elapsed (USD)", labels=["sweep", "name", "state"])
        rate = GaugeMetricFamily("gpuledger_sweep_running_usd_per_hour", "USD per hour of a sweep's running trials",
                                 labels=["sweep", "name"])
        running = GaugeMetricFamily("gpuledger_sweep_running_trials", "Running trials of a sweep",
                                    labels=["sweep", "name"])
        for s in sweeps:
            accrued.add_metric([s["sweep_id"], s["name"], s["state"]], float(s["accrued_usd"]))
            rate.add_metric([s["sweep_id"], s["name"]], float(s["usd_per_hour"]))
            running.add_metric([s["sweep_id"], s["name"]], float(s["running_trials"]))
        yield accrued
        yield rate
        yield running
        total = GaugeMetricFamily("gpuledger_running_usd_per_hour", "USD per hour of every running trial")
        total.add_metric([], float(sum(s["usd_per_hour"] for s in sweeps)))
        yield total
        labels = ["budget", "scope", "window", "window_start"]
        for key, what in (("limit_usd", "limit"), ("used_usd", "used: spent + held (reserved, or accrued where more)"),
                          ("spent_usd", "spent (committed runs)"), ("reserved_usd", "reserved and still held"),
                          ("remaining_usd", "remaining: limit - used")):
            fam = GaugeMetricFamily(f"gpuledger_envelope_{key}", f"Budget envelope's current window: {what} (USD)",
                                    labels=labels)
            for e in envelopes:
                fam.add_metric([e["budget"], e["scope"], e["window"], e["window_start"]], float(e[key]))
            yield fam
        by_state = GaugeMetricFamily("gpuledger_trials", "Trials by state, every sweep", labels=["state"])
        for state, n in trials:
            by_state.add_metric([state], float(n))
        yield by_state


def _trials_by_state() -> list[tuple[str, int]]:
    from gpuledger.settings import warehouse_if_any
    from gpuledger.warehouse import Warehouse

    target = warehouse_if_any()
    if target is None:
        return []
    with Warehouse.open(target, read_only=True, lock_timeout_s=2.0) as wh:
        return [(r["status"], int(r["trials"])) for r in wh.query_named("trials_by_status").to_dicts()]


def registry() -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LedgerCollector())
    return reg


def metrics_text() -> str:
    """The metrics as Prometheus text (what /metrics answers)."""
    from prometheus_client import generate_latest

    return generate_latest(registry()).decode("utf-8")


def serve_metrics(port: int, host: str = "127.0.0.1") -> Any:
    """Serves /metrics on `host:port` in a daemon thread; returns (server, thread). UserError when the port is taken."""
    from prometheus_client import start_http_server

    from gpuledger.errors import UserError

    try:
        return start_http_server(port, addr=host, registry=registry())
    except OSError as err:
        raise UserError(f"--metrics-port {port}: cannot listen on {host}:{port} ({err.strerror or err})") from None

"""`gpuledger serve`: local Prefect server + process worker + the deployments of prefect.yaml.

Starts (or reuses) the server on 127.0.0.1 (port of `prefect.toml`, or PREFECT_API_URL), keeps
its state in the project's Prefect home (`.gpuledger/prefect/`), creates the work pool `gpuledger-local`, runs `prefect deploy --all`,
and runs a worker until Ctrl-C, which stops the worker and then the server. `--metrics-port PORT` also serves
the ledger's Prometheus metrics at /metrics (gpuledger/runtime/metrics.py). `--worker-only`: one more worker on the pool of
the (team) server PREFECT_API_URL names. See gpuledger/flows/server.py.
"""

from __future__ import annotations


def run(args) -> int:
    from gpuledger.api import Ledger

    if getattr(args, "worker_only", False):
        return Ledger().serve_worker(limit=getattr(args, "worker_limit", None))
    return Ledger().serve(port=getattr(args, "port", None), metrics_port=getattr(args, "metrics_port", None))

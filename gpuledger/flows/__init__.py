"""Prefect flows of gpuledger: the only package that imports Prefect (tests/unit/test_layering.py holds it).

- `flows.sweep`: flow `sweep` (plan, guard, launch with a Prefect-native parallelism cap, ingest
  each result as it arrives, budget stop, ROI report and artifacts).
- `flows.cost_report`: flow `cost-report` (the weekly cost report).
- `flows.capacity`: flow `capacity` (GPUs and $/month to serve a traffic level).

Importing this package first turns Prefect's telemetry off (offline machines; no phoning home):
`DO_NOT_TRACK=1` (client side) and `PREFECT_SERVER_ANALYTICS_ENABLED=false` (server side), unless
the caller set them already.
"""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT", "false")

"""The shape of a capacity plan, named once: `plan_capacity` returns a `CapacityPlan`.

TypedDicts, not classes: the plan stays the JSON-ready dict the capacity command prints, the report
reads and the flow publishes (nothing to convert at those edges), and a type checker or a reader
sees every key with its type here. `tests/unit/test_capacity_types.py` holds `CapacityOption` to
`OPTION_KEYS` and `CapacityPlan` to what `plan_capacity` returns.
"""

from __future__ import annotations

from typing import Any, TypedDict


class CapacitySpecEcho(TypedDict):
    """What the plan was asked (`CapacityPlan.spec`): the spec's fields and the derived demand."""

    name: str
    project: str
    owner: str
    model: str
    precision: str
    engine: str
    engine_version: str
    engine_args: dict[str, Any]
    params_total: int
    weights_gib: float
    kv_bytes_per_token: int
    qps: float
    hourly_qps: list[float] | None
    mean_qps: float
    autoscale: dict[str, Any] | None
    prompt_tokens: int
    output_tokens: int
    prompt_tokens_mix: str | None
    output_tokens_mix: str | None
    p95_ttft_ms: float
    p95_tpot_ms: float
    headroom: float
    demand_output_tokens_per_s: float
    demand_prompt_tokens_per_s: float
    accelerators: list[str]
    clouds: list[str]
    regions: list[str] | None
    max_gpus_per_replica: int


class CapacityOption(TypedDict):
    """One accelerator's answer (`OPTION_KEYS`, in that order): its fleet at the operating point,
    latencies (ms, p95 unless named), the physical floors, the load check, the curve, prices (USD)
    and the economy (autoscaled month, $ per 1M output tokens and per request, spot, environments,
    committed use); `feasible` False with `reason` when it cannot meet the targets."""

    accelerator: str
    precision: str
    engine: str
    gpus: int | None
    gpus_per_replica: int | None
    replicas: dict[str, int] | None  # {p10, p50, p90}: the fleet at the throughput band's P90, P50, P10
    max_batch: int | None
    tokens_per_s_per_gpu: float | None
    max_tokens_per_s_per_replica: dict[str, float] | None  # {p10, p50, p90}
    throughput_source: str
    operating_point: dict[str, Any] | None
    ttft_ms: float | None
    tpot_ms: float | None
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    ttft_ms_p95: dict[str, float] | None  # {p10, p50, p90} of ttft_ms
    tpot_ms_p95: dict[str, float] | None  # {p10, p50, p90} of tpot_ms
    replicas_sized: int | None  # the fleet sized at slo.confidence (gpus / gpus_per_replica)
    bands: dict[str, Any] | None  # what each band rests on
    floor_ttft_ms: float | None
    floor_tpot_ms: float | None
    load_check: dict[str, Any] | None
    curve: list[dict[str, Any]] | None
    price_per_gpu_hour_on_demand: float | None
    usd_per_hour_on_demand: float | None
    usd_per_day_on_demand: float | None
    usd_per_month_on_demand: float | None
    usd_per_hour_spot: float | None
    usd_per_month_spot: float | None
    cloud: str | None
    instance_type: str | None
    price_source: str | None
    feasible: bool
    reason: str | None
    usd_per_month_autoscaled: float | None
    replicas_by_hour: list[int] | None
    usd_per_1m_output_tokens: float | None
    usd_per_request: float | None
    autoscale: dict[str, Any] | None
    spot: dict[str, Any] | None
    environments: dict[str, Any] | None
    committed: dict[str, Any] | None


class _CapacityPlanRequired(TypedDict):
    spec: CapacitySpecEcho
    options: list[CapacityOption]
    best: CapacityOption | None
    best_reason: str | None
    assumptions: list[str]
    compare: dict[str, Any] | None
    mixed_fleet: dict[str, Any] | None  # the cheapest mix of two GPU types beside the best single (capacity/mixed.py)
    ownership: dict[str, Any] | None  # rent vs buy vs API per month and the volumes where each wins (capacity/ownership.py)


class CapacityPlan(_CapacityPlanRequired, total=False):
    """`plan_capacity`'s result: the spec as asked, every option, the cheapest feasible priced one
    (`best`, or `best_reason` why none), the assumptions and the economy's comparison; `measured_from`
    when a serving sweep's measured points sized it (`gpuledger.serving.capacity_from_sweep`)."""

    measured_from: dict[str, Any]

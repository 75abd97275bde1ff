"""The pydantic models of `kind: capacity`: traffic (and its length mixes), latency targets, the
engine and its flags, measured operating points, autoscaling, environments, what serving is worth
and buying the GPUs (`gpuledger.capacity` plans them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from gpuledger.spec.base import _SpecBase, _Strict
from gpuledger.spec.types import (
    MAX_CONCURRENCY,
    MAX_LATENCY_MS,
    MAX_QPS,
    MAX_REQUEST_TOKENS,
    MAX_TOKENS_PER_S_PER_GPU,
    NAME_PATTERN,
    Accelerator,
    Cloud,
    Money,
)


class LengthDist(_Strict):
    """A distribution of request lengths: a mean with a spread, a histogram, or a named dataset."""

    mean: float | None = Field(None, ge=1, le=10_000_000, description="mean tokens per request")
    cv: float | None = Field(None, ge=0, le=4, description="spread: standard deviation / mean (log-normal draws)")
    histogram: list[tuple[Annotated[int, Field(ge=1, le=10_000_000)], Annotated[float, Field(ge=0)]]] | None = Field(
        None, min_length=1, max_length=1000, description="[[tokens, weight], ...]: lengths and how often they occur")
    dataset: Literal["sharegpt", "alpaca"] | None = Field(None, description="a dataset's published moments")

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        """`std: TOKENS` (or `spread`, a share of the mean) → cv; `histogram: {TOKENS: WEIGHT}` → pairs;
        dataset names in any case, `sharegpt-like` → sharegpt."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if "std" in out:
            std, mean = out.pop("std"), out.get("mean")
            if isinstance(std, int | float) and isinstance(mean, int | float) and mean > 0 and "cv" not in out:
                out["cv"] = float(std) / float(mean)
            else:
                raise ValueError("std needs a mean (and no cv): the standard deviation in tokens")
        if "spread" in out and "cv" not in out:
            out["cv"] = out.pop("spread")
        hist = out.get("histogram")
        if isinstance(hist, dict):
            try:
                out["histogram"] = [[int(k), v] for k, v in hist.items()]
            except (TypeError, ValueError):
                raise ValueError("histogram keys must be token counts, e.g. {200: 3, 4000: 1}") from None
        name = out.get("dataset")
        if isinstance(name, str):
            out["dataset"] = name.strip().lower().removesuffix("-like").removesuffix("_like").replace("_", "")
        return out

    @model_validator(mode="after")
    def _one_kind(self) -> LengthDist:
        given = [k for k in ("mean", "histogram", "dataset") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of mean (with an optional cv), histogram and dataset")
        if self.histogram is not None and not sum(w for _, w in self.histogram) > 0:
            raise ValueError("histogram weights must add up to more than 0")
        if self.histogram is not None and self.cv is not None:
            raise ValueError("cv goes with mean or dataset, not with a histogram")
        return self

    def mean_tokens(self, kind: str) -> float:
        """Returns the mean length (`kind`: prompt or output, for a dataset's moments)."""
        from gpuledger.spec.datasets import dataset_mean

        if self.dataset is not None:
            return dataset_mean(self.dataset, kind)
        if self.histogram is not None:
            return sum(t * w for t, w in self.histogram) / sum(w for _, w in self.histogram)
        return float(self.mean)


class Traffic(_Strict):
    qps: float | None = Field(None, gt=0, le=MAX_QPS, description="requests/s at peak (default: hourly_qps's most)")
    prompt_tokens: int = Field(ge=1, le=MAX_REQUEST_TOKENS, description="prompt tokens per request, or a distribution")
    output_tokens: int = Field(ge=1, le=MAX_REQUEST_TOKENS, description="output tokens per request, or a distribution")
    prompt_tokens_dist: LengthDist | None = Field(None, description="set from prompt_tokens given as a distribution")
    output_tokens_dist: LengthDist | None = Field(None, description="set from output_tokens given as a distribution")

    @model_validator(mode="before")
    @classmethod
    def _distributions(cls, data: Any) -> Any:
        """`prompt_tokens: {dataset: sharegpt}` → the distribution in prompt_tokens_dist, its mean in
        prompt_tokens (what fleet sizing and the floors use)."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for kind in ("prompt", "output"):
            value = out.get(f"{kind}_tokens")
            if isinstance(value, dict):
                dist = LengthDist.model_validate(value)
                out[f"{kind}_tokens_dist"] = dist
                out[f"{kind}_tokens"] = max(1, round(dist.mean_tokens(kind)))
        return out
    hourly_qps: list[Annotated[float, Field(ge=0, le=MAX_QPS)]] | None = Field(
        None, description="requests per second in each hour of a day (24 values) or a week (168, Monday 00:00 first)")

    @model_validator(mode="before")
    @classmethod
    def _peak_from_profile(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("qps") is None and isinstance(data.get("hourly_qps"), list):
            values = [v for v in data["hourly_qps"] if isinstance(v, int | float) and not isinstance(v, bool)]
            if values and max(values) > 0:
                data = {**data, "qps": float(max(values))}
        return data

    @model_validator(mode="after")
    def _profile_fits_peak(self) -> Traffic:
        if self.qps is None:
            raise ValueError("give qps (the peak) or hourly_qps (a day's or a week's profile with a positive hour)")
        if self.hourly_qps is not None:
            if len(self.hourly_qps) not in (24, 168):
                raise ValueError(f"hourly_qps needs 24 values (a day) or 168 (a week), got {len(self.hourly_qps)}")
            if max(self.hourly_qps) > self.qps * (1 + 1e-9):
                raise ValueError(f"hourly_qps peaks at {max(self.hourly_qps):g} req/s, above qps {self.qps:g} "
                                 "(qps is the peak; leave it out to take the profile's)")
        return self


class Slo(_Strict):
    p95_ttft_ms: float = Field(gt=0, le=1e9, description="time to first token, 95th percentile (ms)")
    p95_tpot_ms: float = Field(gt=0, le=1e9, description="time per output token, 95th percentile (ms)")
    confidence: Literal["p50", "p90"] = Field(
        "p90", description="the fleet meets the SLO with this confidence: p90 sizes on the pessimistic end (P10 "
        "throughput, P90 latency) of the model's measured error; p50 on the central estimate")


class CapacityResources(_Strict):
    accelerators: list[Accelerator] = Field(min_length=1)
    clouds: list[Cloud] = Field(default_factory=lambda: ["aws", "gcp"])
    regions: list[str] | None = None
    max_gpus_per_replica: int = Field(8, ge=1, le=8)


Engine = Literal["vllm", "sglang", "trtllm", "tgi"]


class MeasuredPoint(_Strict):
    """One measured serving operating point of an accelerator (e.g. from `vllm bench serve`)."""

    tokens_per_s_per_gpu: float = Field(gt=0, le=MAX_TOKENS_PER_S_PER_GPU, description="output tokens/s of one GPU")
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY, description="requests in flight or max batch")
    request_rate: float | None = Field(None, gt=0, le=MAX_QPS, description="offered requests/s (open loop), if measured so")
    ttft_ms: float | None = Field(None, gt=0, le=MAX_LATENCY_MS, description="p95 time to first token at this point (ms)")
    tpot_ms: float | None = Field(None, gt=0, le=MAX_LATENCY_MS, description="p95 time per output token at this point (ms)")
    engine: Engine | None = Field(None, description="engine measured; default: the spec's engine")
    gpus_per_replica: int = Field(1, ge=1, le=8, description="tensor-parallel GPUs of the measured replica")


#: Older name of `MeasuredPoint` (a rate alone is still a valid entry).
MeasuredRate = MeasuredPoint


class Speculative(_Strict):
    """Speculative decoding as the engine runs it (vLLM `--speculative-config`, SGLang `--speculative-algorithm`)."""

    method: Literal["eagle3", "ngram", "draft_model"] = Field(description="how drafts are made")
    num_speculative_tokens: int = Field(3, ge=1, le=16, description="tokens drafted per step")
    acceptance_rate: float = Field(ge=0, le=1, description="probability each drafted token is accepted "
                                   "(measured on your traffic: vLLM's spec_decode metrics, or the method's paper)")
    draft_model: str | None = Field(None, max_length=300, description="the draft model (draft_model only): "
                                    "a registry name or a path to a config.json")

    @model_validator(mode="after")
    def _draft(self) -> Speculative:
        if self.method == "draft_model" and not self.draft_model:
            raise ValueError("method draft_model needs draft_model: the small model that drafts")
        return self


class EngineArgs(_Strict):
    """Engine flags a capacity plan assumes instead of the engine's defaults (same names as the
    `serve` section of an inference sweep)."""

    max_num_seqs: int | None = Field(None, ge=1, le=65_536, description="sequences batched together")
    max_num_batched_tokens: int | None = Field(None, ge=1, le=1_048_576, description="tokens per engine step")
    chunked_prefill: bool | None = Field(None, description="split long prompts across steps")
    gpu_memory_utilization: float | None = Field(None, gt=0.1, le=0.99,
                                                 description="fraction of GPU memory for weights + KV cache")
    tensor_parallel: Literal[1, 2, 4, 8] | None = Field(
        None, description="GPUs per replica (tensor-parallel size): pins the shape instead of trying 1, 2, 4, 8")
    endpoint: Literal["chat", "completions", "offline"] | None = Field(
        None, description="how requests arrive: chat (/v1/chat/completions, default), completions (/v1/completions, "
        "vllm bench serve's default), offline (no HTTP server)")
    prefix_cache_hit: float | None = Field(
        None, ge=0, le=0.99, description="share of prompt tokens found in the prefix cache (a shared system prompt); "
        "0 or absent: prefix caching off or no shared prefixes")
    kv_cache_dtype: Literal["auto", "fp8", "bf16", "fp16"] | None = Field(
        None, description="KV cache precision; auto: fp8 with fp8 weights, else 16 bit")
    speculative: Speculative | None = Field(None, description="speculative decoding: method, tokens, acceptance rate")


class MeasuredFromSweep(_Strict):
    """`measured: {from_sweep: NAME}`: the operating points a `method: inference` sweep measured."""

    from_sweep: str = Field(pattern=NAME_PATTERN, description="name of a method: inference sweep in the warehouse "
                            "(its latest run); its measured points size the fleet")


def _measured_kind(value: Any) -> str:
    return "sweep" if isinstance(value, dict | MeasuredFromSweep) and (
        isinstance(value, MeasuredFromSweep) or "from_sweep" in value) else "points"


Measured = Annotated[
    Annotated[dict[Accelerator, MeasuredPoint], Tag("points")] | Annotated[MeasuredFromSweep, Tag("sweep")],
    Discriminator(_measured_kind),
]


def _duration_or_zero(value: Any) -> float:
    """A duration that may also be 0 (no delay)."""
    from gpuledger.spec.types import parse_duration

    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return 0.0
    return parse_duration(value)


DurationOrZero = Annotated[float, BeforeValidator(_duration_or_zero)]


class Autoscale(_Strict):
    """How the fleet follows `traffic.hourly_qps`: replicas per hour between the bounds."""

    min_replicas: int = Field(1, ge=0, le=10_000, description="replicas kept up at the quietest hour")
    max_replicas: int | None = Field(None, ge=1, le=10_000, description="replicas at most (default: no cap)")
    cold_start_s: DurationOrZero = Field(300.0, ge=0, description="launch to serving of a new replica (image, weights)")
    scale_down_delay_s: DurationOrZero = Field(600.0, ge=0, description="a replica no longer needed stays up this long")


class Staging(_Strict):
    replicas: int = Field(1, ge=0, le=1_000, description="replicas of the staging environment, up all month")


class Canary(_Strict):
    traffic_share: float = Field(gt=0, lt=1, description="share of production traffic the canary serves, 0.05 = 5%")


class Environments(_Strict):
    staging: Staging | None = None
    canary: Canary | None = None


class ApiPrices(_Strict):
    usd_per_1m_input_tokens: Money = Field(ge=0, description="the API's price per million prompt tokens")
    usd_per_1m_output_tokens: Money = Field(ge=0, description="the API's price per million output tokens")


class Compare(_Strict):
    api: ApiPrices | None = Field(None, description="the hosted API the self-hosted fleet would replace")
    revenue_usd_per_request: Money | None = Field(None, ge=0, description="what one request earns")


class FineTune(_Strict):
    sweep: str | None = Field(None, pattern=NAME_PATTERN, description="sweep whose cost (warehouse) the service pays back")
    usd: Money | None = Field(None, ge=0, description="the fine-tune's cost when it is not in the warehouse")

    @model_validator(mode="after")
    def _one_source(self) -> FineTune:
        if (self.sweep is None) == (self.usd is None):
            raise ValueError("give exactly one of sweep (a sweep in the warehouse) and usd (its cost)")
        return self


class Own(_Strict):
    """Owning the GPUs instead of renting them (rent vs buy vs API, `gpuledger.capacity.ownership`)."""

    usd_per_gpu: Annotated[float, Field(gt=0, le=10_000_000)] | dict[Accelerator, Annotated[float, Field(gt=0, le=10_000_000)]] = Field(
        description="purchase price per GPU with its share of the server: one number, or {ACCELERATOR: price}")
    depreciation_years: float = Field(4.0, gt=0, le=20, description="years the purchase is written off over (straight line)")
    usd_per_kwh: Money = Field(0.12, ge=0, le=100, description="electricity price per kWh")
    pue: float = Field(1.3, ge=1, le=5, description="power usage effectiveness: facility power / IT power (cooling)")
    kw_per_gpu: float | None = Field(None, gt=0, le=20, description="power per GPU with its host share (default by GPU kind)")
    utilisation: float | None = Field(None, ge=0, le=1, description="average load of the owned fleet (default: the "
                                      "traffic's mean over the fleet's capacity)")
    usd_per_gpu_month: Money = Field(0.0, ge=0, le=1_000_000, description="hosting, support and network per GPU and month")

    def price_for(self, accelerator: str) -> float | None:
        """Returns the purchase price of one GPU of this kind (None: not priced for it)."""
        if isinstance(self.usd_per_gpu, dict):
            return self.usd_per_gpu.get(accelerator)
        return float(self.usd_per_gpu)


class CapacitySpec(_SpecBase):
    kind: Literal["capacity"]
    traffic: Traffic
    slo: Slo
    headroom: float = Field(0.2, ge=0, le=10, description="extra capacity above peak, 0.2 = 20%")
    engine: Engine = Field("vllm", description="serving engine: its kernels and scheduler limits")
    engine_args: EngineArgs = Field(default_factory=EngineArgs, description="engine flags instead of its defaults")
    resources: CapacityResources
    measured: Measured = Field(default_factory=dict, description="{ACCELERATOR: operating point} or {from_sweep: NAME}")
    autoscale: Autoscale | None = Field(None, description="replicas follow traffic.hourly_qps (default: min 1, no cap)")
    environments: Environments = Field(default_factory=Environments, description="staging and canary, priced apart")
    committed: dict[Literal["1y", "3y"], Annotated[float, Field(gt=0, lt=100)]] = Field(
        default_factory=dict, description="committed-use discounts: {term: % off on-demand}, e.g. {1y: 30, 3y: 50}")
    compare: Compare = Field(default_factory=Compare, description="what serving is worth: an API's prices, revenue")
    fine_tune: FineTune | None = Field(None, description="the fine-tune the service pays back")
    own: Own | None = Field(None, description="buying the GPUs: price, depreciation, power and cooling (rent vs buy vs API)")

"""Serving engines as gpuledger models them (vLLM, SGLang, TensorRT-LLM, TGI): each engine's scheduler
limits with their documented defaults and versions, its kernel-efficiency scales, the server's terms
(per-request overhead by endpoint, the API server's streaming cost per token, the engine loop's CPU
time per sequence) and speculative decoding (`SpecDecode`: tokens per verification step, the draft's
time). `gpuledger.estimate.inference` prices an engine step with them and re-exports these names
(`inference.ENGINES`, `inference.engine_for`, ... as before). Pure data and arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Engine:
    """A serving engine: scheduler limits (documented defaults) and kernel efficiencies."""

    name: str
    version: str
    max_num_seqs: int  # running sequences per replica (large GPUs)
    max_num_seqs_small_gpu: int  # the same on GPUs under 70 GiB
    max_batched_tokens: int  # tokens per step, decode + prefill (large GPUs)
    max_batched_tokens_small_gpu: int
    chunked_prefill: bool
    cuda_graph_max_batch: int  # decode batches above this run eagerly
    kv_memory_fraction: float  # share of device memory for weights + activations + KV
    reserve_full_request: bool  # admission reserves prompt + output KV (no preemption) vs on demand
    weight_bw_scale: float  # × the generation's weight-stream efficiency
    kv_bw_scale: float  # × the generation's KV-read efficiency
    gemm_mfu_scale: float  # × the generation's GEMM MFU
    step_overhead_s: float  # per engine step outside the kernels
    eager_step_overhead_s: float  # extra per step when the batch exceeds the CUDA-graph sizes
    request_overhead_s: float  # per request: HTTP, tokenisation, detokenisation, scheduling
    sources: str
    #: × the weight-stream efficiency on some generations only: ((generation, scale), ...)
    weight_bw_scale_by_generation: tuple[tuple[str, float], ...] = ()
    large_gpu_min_gib: float = 70.0  # the larger limits apply from this much device memory
    a100_is_small: bool = True  # vLLM keeps the smaller limits on A100s whatever their memory
    #: × the GEMM MFU on some generations only: ((generation, scale), ...)
    gemm_mfu_scale_by_generation: tuple[tuple[str, float], ...] = ()
    #: serial CPU time per running sequence per engine step (scheduler, input preparation, output
    #: update in the engine loop): the GPU waits for it, so it weighs most where the GPU is fastest
    step_overhead_per_seq_s: float = 0.0
    #: CPU time of the API server per streamed output token (detokenise, one SSE chunk per token),
    #: in its own process: overlapped with the GPU, a ceiling of 1 / this many tokens/s per replica
    frontend_s_per_token: float = 0.0
    #: per-request overhead through the OpenAI chat endpoint (chat template, message parsing, the
    #: same HTTP/tokeniser/scheduling path); `request_overhead_s` is the completions endpoint's
    request_overhead_chat_s: float | None = None
    #: the endpoint requests come through: "chat" (what users deploy) or "completions"
    endpoint: str = "chat"
    #: share of prompt tokens served from the prefix cache (engine_args.prefix_cache_hit; 0: off or
    #: no shared prefixes, as with random prompts)
    prefix_cache_hit: float = 0.0
    #: speculative decoding: (method, num_tokens, acceptance_rate, draft ServingModel | None)
    speculative: tuple | None = None


ENGINES: dict[str, Engine] = {
    # vLLM V1 engine (0.9-0.11). `EngineArgs._set_default_args_v1`: OpenAI server on GPUs with
    # >= 70 GiB (not A100): max_num_seqs 1024, max_num_batched_tokens 8192; otherwise 256 and 2048.
    # Chunked prefill always on in V1; CUDA graphs captured up to 512 sequences; gpu_memory_utilization
    # 0.9; KV blocks allocated on demand, preemption (recompute) when the cache is full.
    "vllm": Engine(
        name="vllm", version="vLLM 0.10-0.11 (V1 engine)", max_num_seqs=1024, max_num_seqs_small_gpu=256,
        max_batched_tokens=8192, max_batched_tokens_small_gpu=2048, chunked_prefill=True,
        cuda_graph_max_batch=512, kv_memory_fraction=0.90, reserve_full_request=False,
        weight_bw_scale=1.0, kv_bw_scale=1.0, gemm_mfu_scale=0.95, step_overhead_s=0.4e-3,
        eager_step_overhead_s=2e-3, request_overhead_s=4e-3,
        sources="docs.vllm.ai engine args; vllm/engine/arg_utils.py _set_default_args_v1 (v0.10), EngineArgs.get_batch_defaults (v0.11)",
        # Hopper small-batch decode in vLLM streams the weights at 0.71 × the TensorRT-LLM-derived 0.82
        # (= 0.58 of the datasheet): vLLM's performance CI (buildkite.com/vllm/performance-benchmark,
        # build 9515), batch 8 of 32 → 128 tokens on H200: Llama-3.1-8B TP 1 833 ms, Llama-3-70B TP 4 2,078 ms
        # end to end; both fit 0.58 (tests/data/serving_latency.csv, benchmarks/capacity_accuracy.py).
        weight_bw_scale_by_generation=(("hopper", 0.71),),
        # Engines as they run (round 4, benchmarks/capacity_accuracy.py section 5, tests/data/serving_bench_public.csv):
        # - through the OpenAI chat endpoint a request pays ~45 ms before its first token at concurrency 1
        #   (chat template, message parsing, tokeniser, the API-server -> engine-core hop, the first SSE chunk):
        #   issue 37 measured 60 ms TTFT at concurrency 1 where 12.8 ms was planned (prefill 8.8 ms + 4 ms);
        #   the completions endpoint `vllm bench serve` uses by default keeps 4 ms (tests/data/serving_latency.csv);
        # - the API server streams one chunk per output token in its own process: ~110 µs of CPU per token caps
        #   a replica near 9,100 output tokens/s whatever the GPU (Llama-3.1-8B on an H100 through the chat
        #   endpoint, ShareGPT, 1,000 prompts: 6,583 tokens/s with ramp and drain, vllm PR 18566; issue 37's H100
        #   set 1.5-2.5x below the model before, between the two); slower GPUs never reach it;
        # - the engine loop's scheduler/input preparation/output update, ~10 µs per running sequence per step,
        #   serial with the GPU (V1 without async scheduling; vLLM 0.6.0's multi-step scheduling doubled
        #   Llama-3.1-8B's H100 throughput, 3,958 -> 8,088 tokens/s: the CPU had been half of each step,
        #   Lambda's vllm-benchmark v0 report);
        # - Hopper GEMMs in vLLM's BF16 path reach 0.65 × the TensorRT-LLM-derived MFU: measured H100-over-A100
        #   speed-ups are 1.2-1.9x (issue 37; Lambda: Mistral-7B 2.06x, Mistral-Nemo 1.89x on vLLM 0.5.4)
        #   where the datasheets (3.2x compute, 1.6x bandwidth) made the model assume 1.8-3.0x.
        gemm_mfu_scale_by_generation=(("hopper", 0.65),), step_overhead_per_seq_s=10e-6,
        frontend_s_per_token=110e-6, request_overhead_chat_s=45e-3,
    ),
    # SGLang 0.4.9-0.5 `ServerArgs` (python/sglang/srt/server_args.py, chunked-prefill handling):
    # chunked_prefill_size 2048 below 35 GB of device memory (A10, L40, 4090), 8192 up to 160 GB
    # (A100, H100, H200), 16384 above (B200: kept at 8192 here); cuda_graph_max_bs 256 at TP < 4 on
    # H100-class GPUs; max_running_requests sized from the KV pool; mem_fraction_static ~0.88; radix
    # cache on (no reuse with random prompts).
    "sglang": Engine(
        name="sglang", version="SGLang 0.4.9-0.5", max_num_seqs=4096, max_num_seqs_small_gpu=1024,
        max_batched_tokens=8192, max_batched_tokens_small_gpu=2048, chunked_prefill=True,
        cuda_graph_max_batch=256, kv_memory_fraction=0.88, reserve_full_request=False,
        weight_bw_scale=1.0, kv_bw_scale=1.0, gemm_mfu_scale=0.95, step_overhead_s=0.3e-3,
        eager_step_overhead_s=2e-3, request_overhead_s=5e-3,
        sources="sglang python/sglang/srt/server_args.py defaults (0.4.9-0.5: chunked_prefill_size by GPU memory)",
        # Hopper weight stream as vLLM's (judgement: the same torch/FlashInfer decode path; no SGLang
        # small-batch measurement here)
        weight_bw_scale_by_generation=(("hopper", 0.71),),
        large_gpu_min_gib=35.0, a100_is_small=False,
        # SGLang's zero-overhead scheduler overlaps the next batch's CPU work with the GPU (~3 µs per
        # sequence left serial) and its tokenizer/detokenizer managers stream from separate processes
        # (~70 µs per token, a ceiling near 14,000 tokens/s: 10,897 output tokens/s on 2,000 ShareGPT prompts,
        # sgl-project/sglang issue 1639, vLLM 0.6.3 beside it at 22,116 total tokens/s); Hopper GEMMs 0.75 ×
        # (judgement between vLLM's 0.65 and TensorRT-LLM's own); the chat endpoint ~35 ms (judgement, below vLLM's)
        gemm_mfu_scale_by_generation=(("hopper", 0.75),), step_overhead_per_seq_s=3e-6,
        frontend_s_per_token=70e-6, request_overhead_chat_s=35e-3,
    ),
    # TensorRT-LLM 0.19-1.0, PyTorch backend (`trtllm-bench`, `trtllm-serve`): max_batch_size 2048,
    # max_num_tokens 8192, scheduler GUARANTEED_NO_EVICT (a request is admitted only with KV for its
    # prompt + max output), chunked prefill off by default, CUDA graphs padded up to the batch sizes
    # configured (perf-overview: up to 8192), kv_cache_free_gpu_mem_fraction 0.9 (0.95 in the
    # published throughput runs). GEMM MFU × 1.08 of the generation's (its fused fp8 GEMMs): the 22
    # perf-overview rows' median signed error -4.8% → -2.3% (|error| 5.7% → 3.7%, benchmarks/capacity_accuracy.py).
    "trtllm": Engine(
        name="trtllm", version="TensorRT-LLM 0.19-1.0 (PyTorch backend)", max_num_seqs=2048,
        max_num_seqs_small_gpu=2048, max_batched_tokens=8192, max_batched_tokens_small_gpu=8192,
        chunked_prefill=False, cuda_graph_max_batch=8192, kv_memory_fraction=0.95, reserve_full_request=True,
        weight_bw_scale=1.0, kv_bw_scale=1.0, gemm_mfu_scale=1.08, step_overhead_s=0.3e-3,
        eager_step_overhead_s=0.0, request_overhead_s=4e-3,
        sources="TensorRT-LLM docs: perf-overview (commit 0c9430e), LLM API args (llm_args.py)",
        # trtllm-serve's OpenAI chat endpoint: 20 ms per request (judgement); no streaming ceiling
        # modelled (the C++ executor streams; its perf-overview throughput rows hold without one)
        frontend_s_per_token=0.0, request_overhead_chat_s=20e-3,
    ),
    # Hugging Face TGI 3.x (text-generation-launcher): continuous batching with chunked prefill and
    # prefix caching on by default since 3.0; --max-concurrent-requests 128 (the router refuses more),
    # --max-batch-prefill-tokens 4096, CUDA graphs captured for batch 1, 2, 4, 8, 16, 32 (--cuda-graphs);
    # flashinfer/flash-attention kernels like vLLM's (weight stream as vLLM's), a Rust router in front
    # (per token ~60 µs of streaming, judgement), Python model server per step (~15 µs per sequence,
    # judgement: no published H100 sweep here; its band is the widest).
    "tgi": Engine(
        name="tgi", version="TGI 3.0-3.3", max_num_seqs=128, max_num_seqs_small_gpu=128,
        max_batched_tokens=4096, max_batched_tokens_small_gpu=4096, chunked_prefill=True,
        cuda_graph_max_batch=32, kv_memory_fraction=0.90, reserve_full_request=False,
        weight_bw_scale=1.0, kv_bw_scale=1.0, gemm_mfu_scale=0.95, step_overhead_s=0.5e-3,
        eager_step_overhead_s=2e-3, request_overhead_s=6e-3,
        sources="huggingface.co/docs/text-generation-inference launcher arguments (3.x defaults)",
        weight_bw_scale_by_generation=(("hopper", 0.71),), gemm_mfu_scale_by_generation=(("hopper", 0.65),),
        step_overhead_per_seq_s=15e-6, frontend_s_per_token=60e-6, request_overhead_chat_s=30e-3,
    ),
}
ENGINE_NAMES = tuple(ENGINES)


#: "chat" (/v1/chat/completions, what users deploy), "completions" (/v1/completions, `vllm bench serve`'s
#: default), "offline" (no HTTP server: `trtllm-bench`/`vllm bench throughput`; no per-request or
#: streaming cost)
ENDPOINTS = ("chat", "completions", "offline")


def request_overhead_for(engine: Engine) -> float:
    """Returns the per-request overhead (s) of the engine's endpoint: the chat endpoint's when
    `engine.endpoint` is "chat" (and the engine has a figure for it), else the completions endpoint's."""
    if engine.endpoint == "offline":
        return 0.0
    if engine.endpoint == "chat" and engine.request_overhead_chat_s is not None:
        return engine.request_overhead_chat_s
    return engine.request_overhead_s


def engine_with(engine: Engine, *, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                chunked_prefill: bool | None = None, gpu_memory_utilization: float | None = None,
                endpoint: str | None = None, prefix_cache_hit: float | None = None,
                speculative: tuple | None = None) -> Engine:
    """Returns `engine` with the flags given (None keeps the default; a flag applies on every GPU size)."""
    changes: dict = {}
    if prefix_cache_hit is not None:
        changes["prefix_cache_hit"] = float(prefix_cache_hit)
    if speculative is not None:
        changes["speculative"] = speculative
    if endpoint is not None:
        if endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r} (known: {', '.join(ENDPOINTS)})")
        changes["endpoint"] = endpoint
        if endpoint == "offline":  # no API server: nothing streams
            changes["frontend_s_per_token"] = 0.0
    if max_num_seqs is not None:
        changes.update(max_num_seqs=max_num_seqs, max_num_seqs_small_gpu=max_num_seqs)
    if max_num_batched_tokens is not None:
        changes.update(max_batched_tokens=max_num_batched_tokens, max_batched_tokens_small_gpu=max_num_batched_tokens)
    if chunked_prefill is not None:
        changes["chunked_prefill"] = chunked_prefill
    if gpu_memory_utilization is not None:
        changes["kv_memory_fraction"] = gpu_memory_utilization
    return replace(engine, **changes) if changes else engine


def engine_for(name: str | None) -> Engine:
    """Returns the `Engine` of a name (default vllm); ValueError names the known ones."""
    key = (name or "vllm").lower()
    if key not in ENGINES:
        raise ValueError(f"unknown serving engine {name!r} (known: {', '.join(ENGINES)})")
    return ENGINES[key]


# --------------------------------------------------------------------------------------------
# Speculative decoding

#: the speculative-decoding methods: n-gram lookup in the prompt, EAGLE-3's draft head, a draft model
SPEC_METHODS = ("eagle3", "ngram", "draft_model")


@dataclass(frozen=True)
class SpecDecode:
    """Speculative decoding of one replica: `num_tokens` drafted per step, each accepted with
    probability `acceptance_rate` (i.i.d.); the draft costs `draft_weight_s` per drafted token plus
    `draft_flop_s` per sequence and drafted token."""

    method: str  # eagle3 | ngram | draft_model
    num_tokens: int
    acceptance_rate: float
    draft_weight_s: float = 0.0
    draft_flop_s: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens one verification step emits: (1 − a^(k+1)) / (1 − a)."""
        a, k = self.acceptance_rate, self.num_tokens
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def draft_s(self, seqs: int) -> float:
        """Returns the draft's time for one step: k sequential draft passes over `seqs` sequences."""
        return self.num_tokens * max(self.draft_weight_s, seqs * self.draft_flop_s)

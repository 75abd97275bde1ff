"""The coefficients of the training-throughput model (`throughput.py`), each with its source.

Three kinds: hardware facts (datasheets, interconnect specs), counts derived from the code the
stacks run (bytes an op reads and writes), and efficiencies fitted on published measurements
(`gpuledger/data/training_throughput.csv`, fitted by `benchmarks/time_accuracy.py --fit`; the
benchmark also reports them held out, leaving each source out in turn).
"""

from __future__ import annotations

#: Training stacks and their efficiency class. hf = Transformers Trainer + PEFT/TRL (eager PyTorch,
#: SDPA/FlashAttention-2 attention); litgpt and torchtune are PyTorch-native recipes; "tuned" = the
#: pre-training stacks with fused kernels and overlapped communication (Megatron-LM/Core, NeMo,
#: torchtitan, MosaicML llm-foundry/Composer, nanotron).
FRAMEWORK_CLASS = {"hf": "hf", "litgpt": "litgpt", "torchtune": "torchtune", "torchtitan": "tuned",
                   "megatron": "tuned", "nemo": "tuned", "llm-foundry": "tuned", "nanotron": "tuned"}
FRAMEWORKS = tuple(FRAMEWORK_CLASS)

#: Priors of MATMUL_EFFICIENCY before any fitting (what a class keeps when the fit has no row of it,
#: e.g. held out): tuned 0.72 = llm-foundry's A100 HFU/MFU at 7B-13B without recompute (59-64%)
#: plus the memory-bound share; hf 0.55, litgpt 0.70, torchtune 0.62 = the same GEMMs with unfused
#: eager PyTorch around them (assumed ratios, then fitted).
PRIOR_MATMUL_EFFICIENCY = {"tuned": 0.72, "torchtune": 0.62, "litgpt": 0.70, "hf": 0.55}

#: Achieved fraction of the dense 16-bit peak on the model's matmuls (recompute included), on an
#: Ampere GA100 part with large micro-batches. Fitted (`benchmarks/time_accuracy.py --fit`, 135 scored rows 2026-12-02 with llm.c and nanochat: tuned 0.6729 -> 0.6730; 131 scored
#: public rows, 2026-12-02: litgpt 0.6285 -> 0.6917 when its unpacked rows' lengths became log-normal of their
#: stated mean (`sample_tokens` 150, was uniform up to twice it); 2026-12-01, after the CPU-offload rows were scored and Megatron's Hopper rows got
#: STACK_GENERATION_FACTOR; 126 rows on 2026-11-26; each class's value is the median over its sources of each source's median
#: measured/predicted, so one long table does not outvote the others): tuned on llm-foundry's MPT
#: tables, Megatron-LM Table 1, Llama 3 Table 4, Megatron-Core's README weak-scaling table (H100,
#: 2024; it runs 5-28% faster than this value implies, the 2021 A100 Table 1 20-26% slower); torchtune on its README's speed table; litgpt on
#: TinyLlama's README and lit-gpt's resource tables (LoRA, micro-batch 1-4, one A100-40GB); hf on
#: whyNLP/tinyllama's benchmark (HF Trainer + DeepSpeed), PaddleNLP's Torch benchmark (HF Trainer +
#: PEFT/DeepSpeed, LLaMA-7B LoRA and ZeRO-2/3), Qwen's README profiling (Qwen 1.8B/7B/14B LoRA, one
#: A100-80G, 256-8192 tokens), fms-acceleration's benchmark references (HF Trainer + TRL + PEFT,
#: Mistral-7B/Mixtral/Llama-2-70B full, LoRA, QLoRA packed to 4096 on 1-2 A100-80GB and L40) and
#: Answer.AI's fsdp_qlora benchmarks (HF models + PEFT/bnb under FSDP on RTX 4090, A100, H100). The hf
#: sources split three against two: the 2023-12 to 2024-05 stacks with FlashAttention-2/SDPA and bf16
#: weights (Qwen, fms-acceleration, fsdp_qlora) run ~1.5x faster than the 2023 ones (PaddleNLP's fp16
#: autocast without flash attention, whyNLP's ZeRO-3) imply; the median follows the newer three.
MATMUL_EFFICIENCY = {"tuned": 0.6730, "torchtune": 0.7682, "litgpt": 0.6917, "hf": 0.6151}

#: Sustained fraction of the datasheet peak by GPU generation, relative to Ampere GA100 (same code):
#: llm-foundry's MPT tables measure H100 at 0.67-0.72 of A100's MFU on the same configurations
#: (7B/2k no checkpointing 46.4% vs 64.2%; 1B/2k 41.8% vs 59.9%; 13B/2k 39.8% vs 59.6%): Hopper's
#: tensor rate grew 3.2x over A100, HBM 1.6x. Ada/GA102 cards are clock- and power-limited under
#: sustained load below their boost-clock datasheet figures (torchtune's RTX 4090 rows); Blackwell
#: assumed like Hopper (no public measurement in the rows); Volta/Turing run fp16 only.
GENERATION_FACTOR = {"ampere": 1.0, "ga102": 0.85, "ada": 0.75, "hopper": 0.70, "blackwell": 0.65,
                     "volta": 0.85, "turing": 0.6, "other": 0.7}
#: Per GPU kind where the card departs from its generation: the RTX 4090's catalog rate is the
#: fp32-accumulate rate (165 TFLOP/s at the rated 2.52 GHz boost, half its fp16-accumulate rate); the
#: card runs at ~2.7 GHz under load (+9%) and both of its sources run faster still than the Ampere-
#: calibrated stack efficiencies imply: 1.26 is fitted on them (torchtune's README, 8B full / QLoRA on
#: one card; Answer.AI fsdp_qlora, Llama-2 7B / Yi-34B LoRA and QLoRA on two; median over the 2 sources
#: of each source's median measured/predicted, iterated; those 7 rows are in-sample for it); the L40S (350 W) and L4 (72 W) are power-limited far below their full-rate
#: fp32-accumulate datasheet peaks under sustained GEMMs (L40S: ~60% of 362; L4: ~50% of 121;
#: assumed: calibrate on your own runs). The L40 is the same AD102 die (142 SMs, ~2.5 GHz boost, 864 GB/s)
#: as the L40S and the RTX 6000 Ada (whose whitepaper gives 364 TFLOP/s at FP32 accumulate), but its
#: datasheet states half the L40S's rate (181 vs 362): it is given the L40S's sustained TFLOP/s, i.e.
#: twice the L40S's factor on its own datasheet figure (attention too: throughput.py scales a kind's
#: attention rate by its factor over its generation's). fms-acceleration's L40 rows (HF Trainer + PEFT,
#: Mistral-7B LoRA/QLoRA/full, 4-8 x 4096 packed) came out 7-17% slow on one GPU at 0.6 (assumed); 0.67 is
#: the factor at which their median in-sample error is 0 (fitted 2026-12-01 on those 13 rows, which are
#: in-sample for it; held out over all rows 12.2% -> 11.9%), and the L40S (same die, more power) shares it.
KIND_FACTOR = {"RTX4090": 1.26, "L40S": 0.67, "L4": 0.5}
KIND_FACTOR["L40"] = KIND_FACTOR["L40S"] * 362.0 / 181.05
#: The RTX 6000 Ada is the L40S's AD102 at the same datasheet rate (364 vs 362 TFLOP/s) and less power (300 vs
#: 350 W): the L40S's power-limited factor (assumed; no public row of it that is not reserved).
KIND_FACTOR["RTX6000-Ada"] = KIND_FACTOR["L40S"]
#: The MI300X (AMD CDNA 3, ROCm): no measured row here. Its datasheet BF16 rate is 1.32x the H100's, but the
#: public benchmarks of 2024 (SemiAnalysis, "MI300X vs H100 vs H200 Benchmark Part 1: Training", 2024-12) found
#: that on-paper advantage not realised on AMD's public software (its training throughput at or below the
#: H100's): assumed the H100's sustained TFLOP/s (Hopper's factor x 989 / 1307.4), so that a plan does not
#: flatter it; calibrate on your own runs.
KIND_FACTOR["MI300X"] = GENERATION_FACTOR["hopper"] * 989.0 / 1307.4

#: Per (stack, generation) departure from GENERATION_FACTOR: Megatron-Core and NeMo (which runs
#: Megatron-Core) ship Transformer Engine kernels tuned for Hopper; the generation factor above comes
#: from llm-foundry's 2023 H100 rows (torch 1.13-2.0 era). Fitted on the Megatron-Core README's
#: weak-scaling table (H100, r0.8.0, 2024-07) and Llama 3 Table 4 (H100, 2024): median over the 2
#: sources of each source's median measured/predicted with the class efficiencies fixed; those rows
#: are in-sample for it. Blackwell: assumed the same (no public row that is not reserved); the B200 / H100 step ratio
#: this gives a NeMo FP8 run (2.11-2.12x) agrees with MLPerf Training v4.1's per-GPU 2.0-2.2x (docs/training-time.md).
#: The native-PyTorch / CUDA tuned stacks of 2024-25 (torchtitan, nanotron) on Hopper: 1.1 as well, fitted
#: 2026-12-02 on the two H100 sources that are not reserved, llm.c's GPT-2 1558M on 8 H100 (2.80 s per
#: 1,048,576-token step, scripts/run_gpt2_1558M.sh, 2024-07: 13.3% slow at 1.0) and a nanochat d20 speedrun's
#: report (132,614 tokens/s per GPU, 47.6% MFU, PyTorch 2.9 + torch.compile, 2025-11: 8.3% slow): median
#: of the two 1.108, rounded as Megatron's; the same stacks' A100 rows (llm.c 350M and 774M) are within
#: 3% at the Ampere efficiencies, so the gap is the generation's, not the stack's. Those two rows are
#: in-sample for it; llm-foundry's 2023 H100 rows keep the generation factor they set.
STACK_GENERATION_FACTOR = {("megatron", "hopper"): 1.1, ("nemo", "hopper"): 1.1,
                           ("megatron", "blackwell"): 1.1, ("nemo", "blackwell"): 1.1,
                           ("torchtitan", "hopper"): 1.1, ("nanotron", "hopper"): 1.1,
                           ("torchtitan", "blackwell"): 1.1, ("nanotron", "blackwell"): 1.1}

#: Fused attention forward+backward as a fraction of the 16-bit peak: FlashAttention-2 reaches
#: 50-73% forward and less backward on A100 (Dao 2023, "FlashAttention-2", §4.1: 187-203 TFLOP/s
#: forward+backward at head dim 128 = 0.6-0.65, causal lower); about 35% on H100 (Shah et al. 2024,
#: "FlashAttention-3", Fig. 5: FA2 330-350 TFLOP/s forward, less backward, of 989). Taken at the
#: lower end (causal masks, head dims 64-128, older Triton kernels in llm-foundry's long-sequence
#: rows): 0.45 Ampere, 0.3 Hopper.
ATTENTION_EFFICIENCY = {"ampere": 0.45, "ga102": 0.4, "ada": 0.4, "hopper": 0.3, "blackwell": 0.3,
                        "other": 0.35}
#: Attention without a fused kernel (materialised scores, softmax in memory): half FlashAttention's
#: rate (Dao et al. 2022, FlashAttention Fig. 1/Table: 2-4x speed-up over the PyTorch attention).
EAGER_ATTENTION_FACTOR = 0.5
#: Bytes of memory traffic per attention-score element per forward+backward when attention runs eager
#: (Transformers' `eager` LlamaAttention: QK^T written in 16 bit, the 1/sqrt(d) scale, the causal-mask
#: add, softmax upcast to fp32, the cast back, dropout, read again by the AV matmul: ~26 B forward;
#: backward about twice that: ~80 B counted from the code). 64 is fitted on the one public pair that
#: differs in the attention only: LLaMA-Factory's wiki "Performance Comparison" (Llama-2-7B LoRA r 8, one
#: A100, 4 x 1024 padded, gradient checkpointing), HF 2392 vs HF+FA2 2954 tokens/s = 1.235x (in-sample
#: for it; the counted 80 gives 1.29x). Unsloth's README baselines agree in direction and size where the
#: samples are long (Mistral-7B SlimOrca, A100: HF 1813 s vs FA2 1571 s = 1.15x) and show almost none
#: where they are short (Alpaca, A100: 1040 vs 1001 s) - the scores grow with the square of the length.
EAGER_SCORE_BYTES = 64

#: float8 training over bf16 on the linear layers (fp8 peak is 2x): llm-foundry's H100 FP8 rows
#: against its BF16 rows of the same sizes measure 1.15-1.35x whole-step (3B/8k 19,146 vs 16,578
#: tokens/s/GPU; 1B/512 70,315 vs 52,275); casts and amax bookkeeping take the rest of the 2x.
FP8_MATMUL_SPEEDUP = 1.4

#: Spread of sample lengths when a padded (unpacked) run states their mean (`train.sample_tokens`):
#: coefficient of variation of a log-normal, 0.8 = the middle of the 0.6-1.0 the published length
#: histograms of instruction data span (Alpaca and ShareGPT in the vLLM paper, Kwon et al. 2023, Fig. 11;
#: gpuledger/spec/datasets.py); by judgement, not fitted.
SAMPLE_LENGTH_CV = 0.8
#: Mean real tokens per sample of an unpacked run whose spec does not state it (`train.sample_tokens`):
#: the samples' lengths are a property of the data, not of `max_seq_length` (which caps them), so they
#: are taken log-normal of this mean (SAMPLE_LENGTH_CV) cut at seq_len, not spread evenly up to seq_len
#: (which put the mean at 1,024-2,048 tokens for the 2,048-4,096 caps SFT recipes set). 250 = the geometric
#: mean of four instruction sets' means with their training templates: b-mc2/sql-create-context in the Llama
#: 3.1 chat template, 101.6 (philschmid "How to Fine-Tune LLMs in 2024 with Hugging Face", 2024-08: 186
#: optimizer steps x 8 x 2,048 packed tokens over 3 epochs of 10,000 samples); Alpaca with its prompt template,
#: ~140 (the vLLM paper's 19.3 + 58.5 tokens of instruction and output, Kwon et al. 2023, + ~60 of template);
#: ShareGPT, one turn, 499 (vLLM paper, 161.3 + 338.0); microsoft/orca-math-word-problems-200k in the Llama 3.1
#: chat template, 554 (philschmid "How to fine-tune open LLMs in 2025", 2024-12: 1,352 steps x 2 x 2 packed
#: 1,024-token sequences for 10,000 samples). They span 100-550: a run whose mean is known should state it.
DEFAULT_SAMPLE_TOKENS = 250

#: Tokens of a micro-batch at which a GEMM reaches half its large-size efficiency: cuBLAS tiles of
#: 128-256 rows under-fill the SMs ("wave quantization") when M = tokens is small (NVIDIA Deep
#: Learning Performance Guide, "Matrix Multiplication Background", GEMM throughput vs. size).
SMALL_MATMUL_TOKENS = 256

#: Bytes read+written per hidden unit per token per layer by the memory-bound ops of a decoder
#: layer, forward + backward: eager Transformers Llama layer = 2 RMSNorms in fp32 (~20 B), RoPE on
#: q/k (~12 B), 2 residual adds (~12 B), SiLU·mul on 3.5x hidden (~21 B) forward, about twice that
#: backward: ~200 B. Fused kernels (torch.compile, Megatron/TE fusions) touch each tensor about
#: once: ~70 B.
ELEMENTWISE_BYTES_PER_HIDDEN = {"eager": 200, "fused": 70}
#: A LoRA linear re-reads its input and writes/reads its output per pass (x·A, then ·B and the add),
#: 16-bit: 2 B x 3.
BYTES_PER_ADAPTED_ELEMENT = 6
#: Autocast mixed precision over fp32 weights (HF Trainer `bf16=True`/`fp16=True` on a model loaded
#: in fp32): each forward casts every weight it uses, reading 4 B and writing 2 B per parameter.
AUTOCAST_CAST_BYTES_PER_PARAM = 6
#: QLoRA dequantisation, bytes of memory traffic per base parameter per pass (forward, backward,
#: recompute): litgpt's resource tables (A100 40GB, micro-batch 1, no checkpointing, 2 passes) time
#: nf4 against bf16 LoRA: Llama 2 7B 3.68 vs 2.36 min and 13B 6.38 vs 3.19 min per 1k iterations,
#: i.e. 0.079 s and 0.19 s more per iteration = 9-11 B per parameter per pass at 1,555 GB/s.
DEQUANT_BYTES_PER_PARAM_PASS = 10
#: Share of the datasheet HBM bandwidth a streaming kernel sustains (STREAM-like copies reach
#: 80-90% on A100/H100: NVIDIA's bandwidthTest / Jia et al. 2018 "Dissecting the Volta GPU").
HBM_EFFICIENCY = 0.8

#: Optimizer step, bytes per trained parameter: AdamW with fp32 states reads param, grad, m, v and
#: writes param, m, v (torch.optim foreach/fused, 4 B each) + a gradient-norm pass for clipping:
#: ~32 B; 8-bit AdamW 1-byte states (bitsandbytes): ~14 B; SGD with momentum ~16 B.
OPTIMIZER_BYTES_PER_PARAM = {"adamw": 32, "paged-adamw": 32, "adamw-8bit": 14, "paged-adamw-8bit": 14,
                             "sgd": 16, "adafactor": 20}

#: DeepSpeed ZeRO (stages 1-3, fp16/bf16 with fp32 master weights) optimizer step, seconds per
#: parameter of the GPU's partition, beyond the fused AdamW pass of OPTIMIZER_BYTES_PER_PARAM: its
#: unfused passes over the flat partition (unscale, overflow check, gradient norm and clipping, fp32
#: to 16-bit copy, flatten/unflatten, bucketed all-gather launches). Fitted on PaddleNLP's Torch
#: benchmark (HF Trainer + DeepSpeed 0.9.4, LLaMA-7B full fine-tuning on 4 x A100-80G, ZeRO-2 and
#: ZeRO-3 at global batch 8 and 16 of ~100-token samples): steps take 0.28-0.41 s more than the
#: rest of the model at both batch sizes (a per-step cost, not per token) for 1.7e9 parameters per
#: GPU: ~1.9e-10 s per parameter, i.e. ~280 B of memory traffic per parameter at A100 bandwidth. Those
#: rows are in-sample for it. DeepSpeed's only: the tuned stacks' ZeRO-1 is their distributed optimizer
#: (Megatron-Core's DistributedOptimizer, NeMo's: a fused multi-tensor Adam over the shard, its reduce-
#: scatter / all-gather bucketed and overlapped), charged the fused pass alone (was 0.2 s per step more for
#: an 8B model on 8 GPUs; no scored row ran a tuned stack with zero sharding).
ZERO_STEP_S_PER_PARAM = 1.9e-10

#: Fixed seconds per optimizer step outside the GPU's work: data collation, loss.item() sync,
#: logging, LR scheduler. HF Trainer's step loop (callbacks, `_maybe_log_save_evaluate`, gradient
#: clipping bookkeeping) ~30 ms; the PyTorch-native recipes ~10 ms; tuned stacks prefetch data on
#: other workers: ~5 ms.
FIXED_STEP_S = {"hf": 0.03, "litgpt": 0.01, "torchtune": 0.01, "tuned": 0.005}
#: PEFT's adapted modules add small kernels per pass too (LoraLayer.forward: dropout, lora_A, lora_B, the
#: scaling and the add; their backward), but no extra term is charged for them: Qwen's README rows (Qwen-7B
#: LoRA on c_attn/c_proj/w1/w2, r=64, 1 x 256 tokens, A100-80G) take 0.15 s per micro-batch, already below
#: the floor KERNELS_PER_LAYER x KERNEL_LAUNCH_S sets (0.18 s); a per-module term of even 2 kernels put those
#: rows 40-150% slow (tried 2026-12-01).
#: Quantised linears per decoder layer (q, k, v, o, gate, up, down of a Llama-style block) and the
#: kernels each adds per pass beyond its matmul: bitsandbytes 4-bit (`MatMul4Bit`): dequantize_4bit
#: (+ the absmax dequantisation of double quant) and the 16-bit copy it writes, in forward, recompute
#: and backward alike: ~3; LLM.int8 (`MatMul8bitLt`): per-row double quantisation of the input, the
#: outlier extraction, the int8 GEMM, the fp16 outlier GEMM, the dequantisation of the output, the
#: weight's dequantisation for the input gradient: ~6. Counted from the code, not fitted (no public QLoRA
#: row at micro-batches small enough to be launch-bound).
QUANTISED_LINEARS_PER_LAYER = 7
QUANT_KERNELS_PER_LINEAR = {"nf4": 3, "int8": 6}
#: bitsandbytes LLM.int8() base weights (`load_in_8bit`, LoRA on an 8-bit base): its matmul passes take
#: this many times the 16-bit time. bitsandbytes issue #490 (2023-06, A100 40GB, Llama 7B / Falcon 7B /
#: flan-t5): "load_in_8bit is extremely slow, about 5x as slow as bf16, and 150% slower than load_in_4bit",
#: and T. Dettmers' reply there (the int8 kernels are not efficient for small models); h2oGPT PR #166
#: (8-bit training "much slower than 16-bit") and Alpaca-CoT issue #26 (8-bit LoRA "more than 2x
#: slower"). 4 puts a 7B LoRA step on an 8-bit base at 2.4-3.4x its 4-bit step (3.3-3.6x its bf16 step) at 1-8 x 512-2048 tokens on A100/A10G/H100.
#: The published ratios, with their settings, are in gpuledger/estimate/data/int8_speed.csv (bitsandbytes #490 5x bf16
#: and 2.5x 4-bit; bitsandbytes #465, 0.39.0 on an RTX A5000, 7B LoRA, 2-3x fp16; Alpaca-CoT #26, alpaca-lora, more
#: than 2x): the model's ratios at their settings are 3.4x, 2.7x, 3.5x and 3.4x, so against 16 bit the sources run
#: 0.6-1.5x the model's ratio. No scored throughput row is on an 8-bit base: the bands add that spread to 8-bit
#: figures (bands.UNSCORED_SPREAD) and leave the factor where the 4-bit comparison (2.5x measured, 2.7x modelled) has it.
INT8_BASE_MATMUL_FACTOR = 4.0

#: A stack built on an engine whose own kernels make its adapter runs faster than the engine's (LoRA and QLoRA:
#: the frozen base; a full fine-tune on it is timed as the engine), as a divisor of the step's matmul,
#: memory-bound and launch time; attention (FlashAttention-2 in both), the optimizer step, the fixed per-step cost
#: and communication are the engine's. Unsloth replaces RoPE, RMSNorm, SwiGLU and the cross-entropy with Triton
#: kernels, runs the LoRA linears' backward by hand and dequantises NF4 weights with its own kernel. Fitted on the
#: published ratios of gpuledger/estimate/data/stack_speed.csv (Unsloth against Transformers + PEFT at the same
#: settings: 14 ratios of 2 sources, each source one vote): Unsloth's own measurements (the TRL docs' A100 table,
#: 1.61-1.95x against Transformers + FlashAttention-2; its benchmarks page, "2x" on H100 and A100-80GB) and
#: LLaMA-Factory's wiki (1.36x at 4 x 1,024 16-bit LoRA, 1.11-1.17x at 1 x 1,024-32,768 4-bit): the value makes the
#: two sources' mean log residuals equal and opposite (`public.stack_ratio_rows`, `public.fit_stack_speedup`;
#: tests/unit/test_stack_speed.py refits it). The sources disagree by ~1.6x: the bands add their spread to such a
#: figure (bands.STACK_SPREAD).
STACK_KERNEL_SPEEDUP = {"unsloth": 1.58}
#: the methods a stack's kernel factor times (the frozen base of an adapter run; a full fine-tune is the engine's)
STACK_KERNEL_METHODS = ("lora", "qlora")

#: Kernels an eager (Transformers) sparse-MoE block launches per expert the micro-batch routes to, per
#: pass: `torch.where` on the routing mask, the token gather, gate/up/down linears, the activation, the
#: routing-weight multiply and `index_add_` (transformers modeling_mixtral.py / modeling_qwen3_moe.py
#: SparseMoeBlock.forward; counted from the code). With 128 experts that is ~900 launches per layer per
#: pass, the reason HF MoE fine-tunes at small batches are host-bound. Tuned stacks use grouped GEMMs.
MOE_KERNELS_PER_EXPERT = 7

#: Kernels launched per decoder layer per pass (eager: every op of an unfused Llama-style block;
#: fused: torch.compile / Megatron-TE fusions).
KERNELS_PER_LAYER = {"eager": 40, "fused": 15}
#: CPU seconds per op launched, a floor under each micro-batch's GPU time when its kernels are
#: shorter than the host needs to issue them. Fused/compiled code: ~8 µs per launch (PyTorch,
#: "Accelerating PyTorch with CUDA Graphs", 2021: 5-10 µs of CPU per kernel). Eager code also pays
#: Python module calls, dispatch and autograd recording per op: lit-gpt's resource tables (A100-40GB,
#: LoRA, micro-batch 1-4 of ~150-token Alpaca samples, tutorials/resource-tables.md, 2023-10) take
#: 97-102 ms per iteration for phi-1.5 (24 layers) whatever the micro-batch, 74-90 ms for StableLM-3B
#: (16 layers), 142-151 ms for Llama-2-7B (32), 191 ms for Llama-2-13B (40): a floor of ~4.1 ms per
#: layer per forward+backward = 40 ops x 2.5 passes x 41 µs (fitted on those rows: they are in-sample
#: for it; lit-gpt's finetune_lora.md table, not used, agrees within +2% (Llama-2-7B) and -22%
#: (StableLM-3B) at micro-batch 4).
KERNEL_LAUNCH_S = {"eager": 41e-6, "fused": 8e-6}

#: Host <-> GPU copies of pinned memory over PCIe Gen4 x16, GB/s per GPU (NVIDIA bandwidthTest ~22-25 GB/s
#: one way on A100/H100 hosts; ~20 with several GPUs sharing a CPU socket's lanes).
PCIE_HOST_GBPS = 20.0
#: Optimizer step on the host with CPU offload, trained parameters per second per GPU process (its share
#: of the host's cores). torch's AdamW on CPU tensors (FSDP CPUOffload): fitted on torchtune's README row
#: (Llama-3.1-70B full, FSDP cpu_offload, 8 x A100-80GB, 2 x 2048 packed tokens, 196 tokens/s/GPU: a
#: 20.9 s step of which ~11 s is GPU work, so ~8.8e9 parameters per rank in ~9 s; 1.0e9 is the rate at
#: which that row comes out at torchtune's efficiency from its other rows: in-sample -0.5%, and the
#: efficiency fit stays 0.77); DeepSpeed's CPUAdam (AVX-512 vectorised; ZeRO-Offload, Ren et al. 2021:
#: several times torch's CPU Adam) assumed 1.5x that. fsdp_qlora's four CPU-offload rows (2 x RTX 4090,
#: LoRA/QLoRA, Llama-2 7B/70B, Yi-34B) then come out +1..+20% in-sample: moving a frozen base over PCIe
#: per micro-batch hides behind its compute.
CPU_ADAM_PARAMS_PER_S = {"torch": 1.0e9, "deepspeed": 1.5e9}

#: GPUs per node (DGX/HGX boards; cloud 8-GPU instances); more GPUs per trial = several nodes.
GPUS_PER_NODE = 8


def nodes_for(gpus: int, nodes: int | None = None) -> int:
    """Returns the nodes a trial of `gpus` GPUs spans: `nodes` when stated (train.nodes), else
    ceil(gpus / GPUS_PER_NODE) (the time model, the planner's instances and the launch all read this)."""
    return int(nodes) if nodes else max(1, -(-int(gpus) // GPUS_PER_NODE))
#: Achievable collective bus bandwidth per GPU, GB/s (nccl-tests `busbw`): NVLink in a node (DGX
#: A100 ~230, H100/H200 HGX ~360-450, B200 ~700); PCIe Gen4 x16 ~20 (no NVLink: L4, L40S, A10G, RTX
#: cards). Between nodes NCCL runs one ring/tree per NIC (one 200 Gb/s HDR NIC per A100, one 400 Gb/s
#: NDR NIC per H100) and reduces inside the node first, so multi-node busbw stays near the NICs'
#: sum per node / 8: ~185 GB/s on DGX A100 SuperPODs, ~350 on DGX H100 (NVIDIA DGX SuperPOD
#: reference architectures, nccl-tests all_reduce). llm-foundry's MPT tables agree: 13B on 8, 16, 32
#: and 64 H100s runs 4,767-4,811 tokens/s/GPU. Clusters without such a fabric (cloud instances with
#: 100-400 Gb/s per node) are far slower: "default".
#: The export parts scale their NVLink's datasheet figure by the same busbw/nominal ratio (assumed, no
#: nccl-tests row): A800 400 GB/s = 230 x 400/600 ~ 153 (A100: 600); H800 400 GB/s = 360 x 400/900 = 160 (H100:
#: 900); H20 keeps the H100's 900 GB/s NVLink (360); GB200 the B200's NVLink 5 (700). The MI300X's Infinity
#: Fabric (xGMI, 896 GB/s peak per GPU in AMD's 8-GPU platform) at the H100's ratio 0.4: ~350 (assumed; no
#: RCCL row). GH200 is one GPU per node (no GPU-to-GPU link in the node).
INTERCONNECT_GBPS = {
    "nvlink": {"A100": 230.0, "A100-80GB": 230.0, "H100": 360.0, "H200": 360.0, "B200": 700.0, "V100": 130.0,
               "A800": 153.0, "H800": 160.0, "H20": 360.0, "GB200": 700.0},
    "xgmi": {"MI300X": 350.0},
    "pcie": 20.0,
    "network": {"ampere": 185.0, "hopper": 350.0, "blackwell": 350.0, "default": 25.0},
}
#: Share of data-parallel communication hidden behind compute (FSDP prefetch / DDP bucketed
#: all-reduce overlap with backward; PyTorch FSDP paper, Zhao et al. 2023, §6).
OVERLAP = 0.85


def generation(kind) -> str:
    """Returns the generation key of a GpuKind (its `arch` column in gpus.csv)."""
    arch = kind.arch.lower()
    for key in ("hopper", "blackwell", "ada", "volta", "turing"):
        if key in arch:
            return key
    if "ga102" in arch:
        return "ga102"
    if "ampere" in arch:
        return "ampere"
    return "other"

"""Exact parameter counts, and the linear layers LoRA adapts and quantisation packs.

The counts follow the module trees of `transformers`' `modeling_<family>.py` (each Linear's
weight and bias, each norm's weight and bias, embeddings, tied or separate lm_head), so they equal
`sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())` built on the meta
device (checked for every registry model with transformers 5.23 + torch 2.13; tests/unit/test_models.py
holds the verified values). Tied weights count once, as `parameters()` counts them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuledger.models.registry import ModelConfig

EXACT_FAMILIES = ("gpt2", "opt", "llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2",
                  "phi", "phi3", "gpt_neox", "falcon", "qwen3_moe", "qwen2_moe", "deepseek_v3", "gpt_oss",
                  "gemma3_text", "olmo", "olmo2", "olmo3", "mpt", "gptj", "starcoder2", "stablelm")


@dataclass(frozen=True)
class ParamCount:
    """Parameter count of a model: `total`, `embedding` (token + position embeddings and an untied
    lm_head), `exact` (False for a generic estimate of an unknown family) and `vision` (a multimodal
    checkpoint's vision tower and projector, in `total`: loaded and held, not run by a text step)."""

    total: int
    embedding: int
    exact: bool
    note: str = ""
    vision: int = 0

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding

    @property
    def language(self) -> int:
        """Returns the parameters of the language model (all but a vision tower)."""
        return self.total - self.vision


@dataclass(frozen=True)
class Linear:
    """One linear layer of a decoder block: `name` (HF module), `d_in`, `d_out`, `bias`,
    `count` (copies per block, e.g. MoE experts) and the LoRA target names it answers to."""

    name: str
    d_in: int
    d_out: int
    bias: bool
    targets: tuple[str, ...]
    count: int = 1

    @property
    def weight_params(self) -> int:
        return self.d_in * self.d_out * self.count

    @property
    def params(self) -> int:
        return (self.d_in * self.d_out + (self.d_out if self.bias else 0)) * self.count


def layer_linears(cfg: ModelConfig) -> list[Linear]:
    """Returns the linear layers of one decoder block, as transformers builds them for the family."""
    d, inter = cfg.hidden_size, cfg.intermediate_size
    q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    t = cfg.model_type
    if t == "gpt2":  # Conv1D c_attn (fused qkv), c_proj, mlp.c_fc, mlp.c_proj; all with bias
        return [Linear("attn.c_attn", d, 3 * d, True, ("q", "k", "v")), Linear("attn.c_proj", d, d, True, ("o",)),
                Linear("mlp.c_fc", d, inter, True, ("up",)), Linear("mlp.c_proj", inter, d, True, ("down",))]
    if t == "opt":
        b = bool(cfg.get("enable_bias", True))
        return [Linear("q_proj", d, d, b, ("q",)), Linear("k_proj", d, d, b, ("k",)), Linear("v_proj", d, d, b, ("v",)),
                Linear("out_proj", d, d, b, ("o",)), Linear("fc1", d, inter, b, ("up",)),
                Linear("fc2", inter, d, b, ("down",))]
    if t == "phi":  # every projection has a bias (modeling_phi.py)
        return [Linear("q_proj", d, q_dim, True, ("q",)), Linear("k_proj", d, kv_dim, True, ("k",)),
                Linear("v_proj", d, kv_dim, True, ("v",)), Linear("dense", q_dim, d, True, ("o",)),
                Linear("fc1", d, inter, True, ("up",)), Linear("fc2", inter, d, True, ("down",))]
    if t == "phi3":  # fused qkv_proj and gate_up_proj, no biases
        return [Linear("qkv_proj", d, q_dim + 2 * kv_dim, False, ("q", "k", "v")),
                Linear("o_proj", q_dim, d, False, ("o",)),
                Linear("gate_up_proj", d, 2 * inter, False, ("gate", "up")),
                Linear("down_proj", inter, d, False, ("down",))]
    if t == "gpt_neox":
        b = bool(cfg.get("attention_bias", True))
        return [Linear("query_key_value", d, 3 * d, b, ("q", "k", "v")), Linear("dense", d, d, b, ("o",)),
                Linear("dense_h_to_4h", d, inter, True, ("up",)), Linear("dense_4h_to_h", inter, d, True, ("down",))]
    if t == "falcon":
        b = bool(cfg.get("bias", False))
        return [Linear("query_key_value", d, q_dim + 2 * kv_dim, b, ("q", "k", "v")),
                Linear("dense", q_dim, d, b, ("o",)),
                Linear("dense_h_to_4h", d, inter, b, ("up",)), Linear("dense_4h_to_h", inter, d, b, ("down",))]
    if t == "deepseek_v3":
        return _mla_linears(cfg) + _moe_linears(cfg)
    if t == "mpt":  # fused Wqkv, out_proj, ffn up/down; transformers' MPT has no biases (modeling_mpt.py)
        return [Linear("Wqkv", d, 3 * d, False, ("q", "k", "v")), Linear("out_proj", d, d, False, ("o",)),
                Linear("ffn.up_proj", d, inter, False, ("up",)), Linear("ffn.down_proj", inter, d, False, ("down",))]
    if t == "gptj":  # q/k/v/out_proj without bias, fc_in/fc_out with (modeling_gptj.py)
        return [Linear("q_proj", d, d, False, ("q",)), Linear("k_proj", d, d, False, ("k",)),
                Linear("v_proj", d, d, False, ("v",)), Linear("out_proj", d, d, False, ("o",)),
                Linear("mlp.fc_in", d, inter, True, ("up",)), Linear("mlp.fc_out", inter, d, True, ("down",))]
    if t == "starcoder2":  # every projection biased by use_bias; a plain c_fc / c_proj MLP (modeling_starcoder2.py)
        b = bool(cfg.get("use_bias", True))
        return [Linear("q_proj", d, q_dim, b, ("q",)), Linear("k_proj", d, kv_dim, b, ("k",)),
                Linear("v_proj", d, kv_dim, b, ("v",)), Linear("o_proj", q_dim, d, b, ("o",)),
                Linear("mlp.c_fc", d, inter, b, ("up",)), Linear("mlp.c_proj", inter, d, b, ("down",))]
    if t == "stablelm":  # q/k/v biased by use_qkv_bias, o_proj and the gated MLP never (modeling_stablelm.py)
        b = bool(cfg.get("use_qkv_bias", False))
        return [Linear("q_proj", d, q_dim, b, ("q",)), Linear("k_proj", d, kv_dim, b, ("k",)),
                Linear("v_proj", d, kv_dim, b, ("v",)), Linear("o_proj", q_dim, d, False, ("o",)),
                Linear("gate_proj", d, inter, False, ("gate",)), Linear("up_proj", d, inter, False, ("up",)),
                Linear("down_proj", inter, d, False, ("down",))]
    # llama-style: llama, mistral, mixtral, qwen2, qwen3, gemma, gemma2, gemma3_text, olmo, olmo2, olmo3,
    # qwen2_moe, qwen3_moe, gpt_oss (and the generic fallback)
    attn_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = attn_bias or t in ("qwen2", "qwen2_moe")  # Qwen2 q/k/v have a bias, o_proj none (modeling_qwen2.py)
    o_bias = attn_bias and t != "qwen2_moe"
    mlp_bias = bool(cfg.get("mlp_bias", False))
    out = [Linear("q_proj", d, q_dim, qkv_bias, ("q",)), Linear("k_proj", d, kv_dim, qkv_bias, ("k",)),
           Linear("v_proj", d, kv_dim, qkv_bias, ("v",)), Linear("o_proj", q_dim, d, o_bias, ("o",))]
    if cfg.num_experts > 1:
        return out + _moe_linears(cfg)
    if not cfg.gated_mlp:
        return out + [Linear("up_proj", d, inter, mlp_bias, ("up",)), Linear("down_proj", inter, d, mlp_bias, ("down",))]
    return out + [Linear("gate_proj", d, inter, mlp_bias, ("gate",)), Linear("up_proj", d, inter, mlp_bias, ("up",)),
                  Linear("down_proj", inter, d, mlp_bias, ("down",))]


def _mla_linears(cfg: ModelConfig) -> list[Linear]:
    """DeepSeek-V3 multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention): queries
    through a low-rank q_a (d -> q_lora_rank) and q_b (-> heads x (nope + rope)); keys and values through
    kv_a_proj_with_mqa (d -> kv_lora_rank + rope) and kv_b (-> heads x (nope + v)); o_proj from heads x v."""
    d, h = cfg.hidden_size, cfg.num_heads
    q_rank, kv_rank = int(cfg.get("q_lora_rank") or 0), int(cfg.get("kv_lora_rank") or 512)
    nope, rope, v = (int(cfg.get("qk_nope_head_dim") or 128), int(cfg.get("qk_rope_head_dim") or 64),
                     int(cfg.get("v_head_dim") or 128))
    bias = bool(cfg.get("attention_bias", False))
    q = ([Linear("q_a_proj", d, q_rank, bias, ("q",)), Linear("q_b_proj", q_rank, h * (nope + rope), False, ("q",))]
         if q_rank else [Linear("q_proj", d, h * (nope + rope), False, ("q",))])
    return q + [Linear("kv_a_proj_with_mqa", d, kv_rank + rope, bias, ("k", "v")),
                Linear("kv_b_proj", kv_rank, h * (nope + v), False, ("k", "v")),
                Linear("o_proj", h * v, d, bias, ("o",))]


def _moe_linears(cfg: ModelConfig) -> list[Linear]:
    """Returns the MLP of an MoE layer: the router, E routed experts (count=E) and the shared expert(s).

    Mixtral: router `block_sparse_moe.gate` (no bias) + experts w1/w3/w2 at intermediate_size; Qwen3-MoE:
    router + experts at moe_intermediate_size; Qwen2-MoE adds one shared expert of
    shared_expert_intermediate_size and its 1-output sigmoid gate; DeepSeek-V3: router weight with an
    e_score_correction_bias (E), shared experts of n_shared x moe_intermediate_size; gpt-oss: router with a
    bias, experts as fused gate_up (d -> 2 x inter) and down projections, each with a bias per expert."""
    d, e, t = cfg.hidden_size, cfg.num_experts, cfg.model_type
    inter = cfg.expert_intermediate_size
    if t == "gpt_oss":
        return [Linear("router", d, e, True, ()),
                Linear("experts.gate_up_proj", d, 2 * inter, True, ("gate", "up"), e),
                Linear("experts.down_proj", inter, d, True, ("down",), e)]
    out = [Linear("gate", d, e, False, ())]
    if t == "deepseek_v3":
        out[0] = Linear("gate", d, e, False, ())
        out.append(Linear("gate.e_score_correction_bias", 1, e, False, ()))
    out += [Linear("experts.gate_proj", d, inter, False, ("gate",), e),
            Linear("experts.up_proj", d, inter, False, ("up",), e),
            Linear("experts.down_proj", inter, d, False, ("down",), e)]
    shared = cfg.shared_intermediate_size
    if shared:
        out += [Linear("shared_expert.gate_proj", d, shared, False, ("gate",)),
                Linear("shared_expert.up_proj", d, shared, False, ("up",)),
                Linear("shared_expert.down_proj", shared, d, False, ("down",))]
        if t == "qwen2_moe":
            out.append(Linear("shared_expert_gate", d, 1, False, ()))
    return out


def dense_layer_linears(cfg: ModelConfig) -> list[Linear]:
    """Returns the linears of an MoE model's dense decoder layer (DeepSeek's first_k_dense_replace,
    Qwen-MoE's mlp_only_layers): its attention and a dense gated MLP of intermediate_size."""
    d, inter = cfg.hidden_size, cfg.intermediate_size
    attn = [lin for lin in layer_linears(cfg) if lin.targets and set(lin.targets) <= {"q", "k", "v", "o"}]
    return attn + [Linear("mlp.gate_proj", d, inter, False, ("gate",)), Linear("mlp.up_proj", d, inter, False, ("up",)),
                   Linear("mlp.down_proj", inter, d, False, ("down",))]


LORA_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
#: Model-level LoRA targets outside the decoder blocks: the output head (litgpt `lora_head`, PEFT
#: `target_modules=[..., "lm_head"]`) and the input embedding (PEFT LoRA on `embed_tokens`).
#: `all-linear` does not include them (PEFT's `all-linear` excludes the output layer).
MODEL_LORA_TARGETS = ("lm_head", "embed")


def parse_lora_targets(text: str) -> tuple[str, ...]:
    """Returns the canonical LoRA target names of `q,v` / `all-linear` style text; ValueError if bad."""
    items = [s.strip().lower() for s in str(text).replace(" ", ",").split(",") if s.strip()]
    aliases = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate",
               "up_proj": "up", "down_proj": "down", "all": "all-linear", "all_linear": "all-linear",
               "head": "lm_head", "embed_tokens": "embed", "embeddings": "embed", "wte": "embed"}
    items = [aliases.get(s, s) for s in items]
    if not items:
        raise ValueError("empty LoRA target list")
    extra = tuple(s for s in MODEL_LORA_TARGETS if s in items)
    if "all-linear" in items:
        return LORA_TARGETS + extra
    bad = [s for s in items if s not in LORA_TARGETS and s not in MODEL_LORA_TARGETS]
    if bad:
        raise ValueError(f"unknown LoRA target(s) {', '.join(bad)}; use a comma list of "
                         f"{','.join(LORA_TARGETS + MODEL_LORA_TARGETS)} or all-linear (plus lm_head, embed)")
    return tuple(s for s in LORA_TARGETS if s in items) + extra


def lora_linears(cfg: ModelConfig, targets: tuple[str, ...] | str) -> list[Linear]:
    """Returns the linear layers (per block) a LoRA with `targets` adapts.

    A fused projection (GPT-2 c_attn, Phi-3 qkv_proj) is one module: PEFT adapts it whole when any
    of its parts is named, so `q,v` on GPT-2 adapts c_attn once.
    """
    if isinstance(targets, str):
        targets = parse_lora_targets(targets)
    return [lin for lin in layer_linears(cfg) if any(t in lin.targets for t in targets)]


def _norm(d: int, with_bias: bool) -> int:
    return 2 * d if with_bias else d


def count_params(cfg: ModelConfig) -> ParamCount:
    """Returns the parameter count of `cfg` as transformers builds it (meta device, tied weights once)."""
    d, vocab, layers = cfg.hidden_size, cfg.vocab_size, cfg.num_layers
    t = cfg.model_type
    linears = sum(lin.params for lin in layer_linears(cfg))
    tied = cfg.tie_word_embeddings
    exact, note = t in EXACT_FAMILIES, ""
    if cfg.get("_declared_model_type"):
        exact, note = False, (f"model_type {cfg.get('_declared_model_type')!r} counted as transformers' {t!r} "
                              "(the same block; its own code may add norm biases)")
    if t == "gpt2":
        pos = int(cfg.get("n_positions", 1024)) * d
        emb = vocab * d + pos
        per_layer = linears + 2 * _norm(d, True)
        final = _norm(d, True)
        head = 0 if tied else vocab * d
    elif t == "opt":
        proj = int(cfg.get("word_embed_proj_dim") or d)
        pos = (int(cfg.get("max_position_embeddings", 2048)) + 2) * d  # OPTLearnedPositionalEmbedding offset 2
        emb = vocab * proj + pos
        affine = bool(cfg.get("layer_norm_elementwise_affine", True))
        per_layer = linears + 2 * (_norm(d, True) if affine else 0)
        final = (2 * proj * d) if proj != d else 0  # project_in / project_out, no bias
        if cfg.get("do_layer_norm_before", True) and not cfg.get("_remove_final_layer_norm", False):
            final += _norm(d, True) if affine else 0
        head = 0 if tied else vocab * proj
    elif t in ("llama", "mistral", "mixtral", "qwen2", "gemma", "phi3", "qwen2_moe", "deepseek_v3", "gpt_oss"):
        emb = vocab * d
        per_layer = linears + 2 * d  # input_layernorm + post_attention_layernorm (RMSNorm weight only)
        final = d
        head = 0 if tied else vocab * d
    elif t in ("qwen3", "qwen3_moe"):
        emb = vocab * d
        per_layer = linears + 2 * d + 2 * cfg.head_dim  # + q_norm, k_norm over head_dim
        final = d
        head = 0 if tied else vocab * d
    elif t == "gemma2":
        emb = vocab * d
        per_layer = linears + 4 * d  # input, post_attention, pre_feedforward, post_feedforward norms
        final = d
        head = 0 if tied else vocab * d
    elif t == "gemma3_text":  # Gemma 2's four norms + q_norm, k_norm over head_dim (modeling_gemma3.py)
        emb = vocab * d
        per_layer = linears + 4 * d + 2 * cfg.head_dim
        final = d
        head = 0 if tied else vocab * d
    elif t == "olmo":  # non-parametric LayerNorms (modeling_olmo.py OlmoLayerNorm): no norm weights
        emb = vocab * d
        per_layer = linears
        final = 0
        head = 0 if tied else vocab * d
    elif t in ("olmo2", "olmo3"):  # post-attention / post-feedforward RMSNorms, q_norm and k_norm over the
        emb = vocab * d  # whole projections (num_heads x head_dim, num_kv_heads x head_dim)
        per_layer = linears + 2 * d + (cfg.num_heads + cfg.num_kv_heads) * cfg.head_dim
        final = d
        head = 0 if tied else vocab * d
    elif t == "mpt":  # ALiBi: no position embedding; norm_1, norm_2, norm_f are LayerNorms without bias
        emb = vocab * d
        per_layer = linears + 2 * d
        final = d
        head = 0 if tied else vocab * d
    elif t == "gptj":  # one ln_1 per block (parallel attention + MLP); lm_head has a bias
        emb = vocab * d
        per_layer = linears + _norm(d, True)
        final = _norm(d, True)
        head = 0 if tied else vocab * d + vocab
    elif t == "starcoder2":  # LayerNorms with a bias, whatever use_bias says
        emb = vocab * d
        per_layer = linears + 2 * _norm(d, True)
        final = _norm(d, True)
        head = 0 if tied else vocab * d
    elif t == "stablelm":  # LayerNorms with a bias; one with use_parallel_residual; per-head q/k LayerNorm weights
        emb = vocab * d
        per_layer = linears + (1 if cfg.get("use_parallel_residual", False) else 2) * _norm(d, True)
        if cfg.get("qk_layernorm", False):
            per_layer += (cfg.num_heads + cfg.num_kv_heads) * cfg.head_dim
        final = _norm(d, True)
        head = 0 if tied else vocab * d
    elif t == "phi":
        emb = vocab * d
        per_layer = linears + _norm(d, True)  # one input_layernorm (parallel attention + MLP)
        if cfg.get("qk_layernorm", False):
            per_layer += 2 * _norm(cfg.head_dim, True)
        final = _norm(d, True)
        head = 0 if tied else vocab * d + vocab  # lm_head has a bias
    elif t == "gpt_neox":
        emb = vocab * d
        per_layer = linears + 2 * _norm(d, True)
        final = _norm(d, True)
        head = 0 if tied else vocab * d
    elif t == "falcon":
        emb = vocab * d
        if not cfg.get("parallel_attn", True):
            norms = 2
        elif cfg.get("new_decoder_architecture") and int(cfg.get("num_ln_in_parallel_attn") or 2) == 2:
            norms = 2  # ln_attn + ln_mlp
        else:
            norms = 1
        per_layer = linears + norms * _norm(d, True)
        final = _norm(d, True)
        head = 0 if tied else vocab * d
    else:  # unknown family: a llama-style decoder built from the generic fields
        emb = vocab * d
        per_layer = linears + 2 * d
        final = d
        head = 0 if tied else vocab * d
        note = (f"model_type {t!r} is not one of the exactly counted families ({', '.join(EXACT_FAMILIES)}); "
                "counted as a generic llama-style decoder")
    if t == "deepseek_v3":  # MLA's two low-rank norms (q_a_layernorm, kv_a_layernorm)
        per_layer += int(cfg.get("q_lora_rank") or 0) + int(cfg.get("kv_lora_rank") or 512)
    if t == "gpt_oss":  # one learned attention-sink logit per head per layer
        per_layer += cfg.num_heads
    total = emb + layers * per_layer + final + head
    if cfg.num_experts > 1 and cfg.dense_layers:
        dense = sum(lin.params for lin in dense_layer_linears(cfg)) - linears
        total += cfg.dense_layers * dense
    vision = vision_tower_params(cfg)
    return ParamCount(total=total + vision, embedding=emb + head, exact=exact, note=note, vision=vision)


def vision_tower_params(cfg: ModelConfig) -> int:
    """Returns the parameters of a Gemma 3 checkpoint's SigLIP vision tower and its projector (0 for a
    text-only model), as modeling_siglip.py / modeling_gemma3.py build them: the patch convolution
    (with bias) and one learned position per patch, per encoder layer q/k/v/out projections and fc1/fc2
    (all biased) and two LayerNorms, a post LayerNorm, the optional attention-pooling head, and
    Gemma3MultiModalProjector's input projection (vision width x text width) and soft-embedding RMSNorm."""
    v = cfg.get("vision_config")
    if cfg.model_type != "gemma3_text" or not isinstance(v, dict):
        return 0
    try:
        w, inter, layers = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["num_hidden_layers"])
        chans, patch, image = int(v["num_channels"]), int(v["patch_size"]), int(v["image_size"])
    except (KeyError, TypeError, ValueError):
        return 0
    if min(w, inter, layers, chans, patch, image) <= 0:
        return 0
    embed = chans * patch * patch * w + w + (image // patch) ** 2 * w
    layer = 4 * (w * w + w) + 2 * _norm(w, True) + (w * inter + inter) + (inter * w + w)
    head = 0
    if v.get("vision_use_head", True):  # probe, in_proj (3w x w + 3w), out_proj, LayerNorm, MLP
        head = w + 3 * w * w + 3 * w + w * w + w + _norm(w, True) + (w * inter + inter) + (inter * w + w)
    projector = w * cfg.hidden_size + w
    return embed + layers * layer + _norm(w, True) + head + projector

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
                  "phi", "phi3", "gpt_neox", "falcon")


@dataclass(frozen=True)
class ParamCount:
    """Parameter count of a model: `total`, `embedding` (token + position embeddings and an untied
    lm_head), and `exact` (False for a generic estimate of an unknown family)."""

    total: int
    embedding: int
    exact: bool
    note: str = ""

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding


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
    # llama-style: llama, mistral, mixtral, qwen2, qwen3, gemma, gemma2 (and the generic fallback)
    attn_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = attn_bias or t == "qwen2"  # Qwen2 q/k/v have a bias, o_proj none (modeling_qwen2.py)
    mlp_bias = bool(cfg.get("mlp_bias", False))
    out = [Linear("q_proj", d, q_dim, qkv_bias, ("q",)), Linear("k_proj", d, kv_dim, qkv_bias, ("k",)),
           Linear("v_proj", d, kv_dim, qkv_bias, ("v",)), Linear("o_proj", q_dim, d, attn_bias, ("o",))]
    if cfg.num_experts > 1:  # Mixtral: router + E experts of (w1 gate, w3 up, w2 down)
        e = cfg.num_experts
        return out + [Linear("block_sparse_moe.gate", d, e, False, ()),
                      Linear("experts.w1", d, inter, False, ("gate",), e),
                      Linear("experts.w3", d, inter, False, ("up",), e),
                      Linear("experts.w2", inter, d, False, ("down",), e)]
    if not cfg.gated_mlp:
        return out + [Linear("up_proj", d, inter, mlp_bias, ("up",)), Linear("down_proj", inter, d, mlp_bias, ("down",))]
    return out + [Linear("gate_proj", d, inter, mlp_bias, ("gate",)), Linear("up_proj", d, inter, mlp_bias, ("up",)),
                  Linear("down_proj", inter, d, mlp_bias, ("down",))]


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
    elif t in ("llama", "mistral", "mixtral", "qwen2", "gemma", "phi3"):
        emb = vocab * d
        per_layer = linears + 2 * d  # input_layernorm + post_attention_layernorm (RMSNorm weight only)
        final = d
        head = 0 if tied else vocab * d
    elif t == "qwen3":
        emb = vocab * d
        per_layer = linears + 2 * d + 2 * cfg.head_dim  # + q_norm, k_norm over head_dim
        final = d
        head = 0 if tied else vocab * d
    elif t == "gemma2":
        emb = vocab * d
        per_layer = linears + 4 * d  # input, post_attention, pre_feedforward, post_feedforward norms
        final = d
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
    total = emb + layers * per_layer + final + head
    return ParamCount(total=total, embedding=emb + head, exact=exact, note=note)

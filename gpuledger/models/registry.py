"""The model registry: HF `config.json` facts stored as data, loaded with HF's defaults applied.

Every `configs/<org>__<name>.json` is one model (`<name>.json` for models without an org, like
`gpt2`); its registry name is the file name with `__` turned back into `/`. The fields are the
model's own `config.json` on the Hugging Face Hub (only the architecture facts are kept).
Missing keys get the defaults of the family's `transformers` configuration class
(`configuration_<family>.py`, transformers 4.4x-5.x), so a hand-written config.json with only
the fields that differ from the defaults loads the way `AutoConfig` would load it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuledger.errors import UserError

CONFIG_DIR = Path(__file__).parent / "configs"

# Defaults of each family's transformers config class (the keyword defaults of
# `<Family>Config.__init__`), for the keys that change the architecture.
HF_DEFAULTS: dict[str, dict[str, Any]] = {
    "gpt2": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
             "n_inner": None, "tie_word_embeddings": True},
    "opt": {"vocab_size": 50272, "hidden_size": 768, "num_hidden_layers": 12, "ffn_dim": 3072,
            "max_position_embeddings": 2048, "do_layer_norm_before": True, "_remove_final_layer_norm": False,
            "word_embed_proj_dim": None, "num_attention_heads": 12, "enable_bias": True,
            "layer_norm_elementwise_affine": True, "tie_word_embeddings": True},
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "head_dim": None},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None,
                "max_position_embeddings": 4096 * 32, "tie_word_embeddings": False},
    "mixtral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None,
                "max_position_embeddings": 4096 * 32, "tie_word_embeddings": False,
                "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768,
              "tie_word_embeddings": False},
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "attention_bias": False,
              "max_position_embeddings": 32768, "tie_word_embeddings": False},
    "gemma": {"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256,
              "max_position_embeddings": 8192, "tie_word_embeddings": True, "attention_bias": False},
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "max_position_embeddings": 8192, "tie_word_embeddings": True, "attention_bias": False},
    # MoE families (transformers configuration_qwen3_moe.py, configuration_qwen2_moe.py,
    # configuration_deepseek_v3.py, configuration_gpt_oss.py keyword defaults)
    "qwen3_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
                  "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": None, "attention_bias": False,
                  "max_position_embeddings": 32768, "tie_word_embeddings": False, "decoder_sparse_step": 1,
                  "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128, "mlp_only_layers": []},
    "qwen2_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
                  "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 32768,
                  "tie_word_embeddings": False, "decoder_sparse_step": 1, "moe_intermediate_size": 1408,
                  "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60,
                  "mlp_only_layers": []},
    "deepseek_v3": {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
                    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
                    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
                    "max_position_embeddings": 4096, "tie_word_embeddings": False, "attention_bias": False},
    "gpt_oss": {"vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 36,
                "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128,
                "num_experts_per_tok": 4, "attention_bias": True, "max_position_embeddings": 131072,
                "tie_word_embeddings": False},
    "phi": {"vocab_size": 51200, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
            "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
            "partial_rotary_factor": 0.5, "qk_layernorm": False, "tie_word_embeddings": False},
    "phi3": {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 4096,
             "tie_word_embeddings": False},
    "gpt_neox": {"vocab_size": 50432, "hidden_size": 6144, "num_hidden_layers": 44, "num_attention_heads": 64,
                 "intermediate_size": 24576, "max_position_embeddings": 2048, "rotary_pct": 0.25,
                 "tie_word_embeddings": False, "use_parallel_residual": True, "attention_bias": True},
    "falcon": {"vocab_size": 65024, "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
               "num_kv_heads": None, "multi_query": True, "new_decoder_architecture": False,
               "parallel_attn": True, "bias": False, "alibi": False, "ffn_hidden_size": None,
               "num_ln_in_parallel_attn": None, "max_position_embeddings": 2048, "tie_word_embeddings": True},
    # transformers configuration_gemma3.py (Gemma3TextConfig), configuration_olmo*.py, configuration_mpt.py,
    # configuration_gptj.py, configuration_starcoder2.py, configuration_stablelm.py (transformers 5.25)
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "tie_word_embeddings": True, "attention_bias": False},
    "olmo": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
             "tie_word_embeddings": False, "attention_bias": False},
    "olmo2": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "attention_bias": False},
    "olmo3": {"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": None, "max_position_embeddings": 2048,
              "tie_word_embeddings": False, "attention_bias": False},
    "mpt": {"vocab_size": 50368, "d_model": 2048, "n_heads": 16, "n_layers": 24, "expansion_ratio": 4,
            "max_seq_len": 2048, "tie_word_embeddings": True},
    "gptj": {"vocab_size": 50400, "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_inner": None, "n_positions": 2048,
             "rotary_dim": 64, "tie_word_embeddings": False},
    "starcoder2": {"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
                   "num_attention_heads": 24, "num_key_value_heads": 2, "max_position_embeddings": 4096,
                   "tie_word_embeddings": True, "use_bias": True},
    "stablelm": {"vocab_size": 50304, "hidden_size": 2560, "intermediate_size": 6912, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096,
                 "tie_word_embeddings": False, "use_qkv_bias": False, "qk_layernorm": False,
                 "use_parallel_residual": False},
}

#: transformers' SiglipVisionConfig defaults, for the vision tower of a Gemma 3 checkpoint
#: (Gemma3ForConditionalGeneration: configuration_siglip.py)
SIGLIP_DEFAULTS: dict[str, Any] = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                   "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16,
                                   "vision_use_head": True}

#: model types that are another family's architecture under an older name: MosaicML's own
#: `mosaic_gpt` (mpt-1b-redpajama-200b, trust_remote_code) is the MPT block transformers builds as `mpt`
_FAMILY_ALIASES = {"mosaic_gpt": "mpt"}

# Older config.json files spell some keys differently; transformers maps them (attribute_map).
_KEY_ALIASES = {
    "falcon": {"n_layer": "num_hidden_layers", "n_head": "num_attention_heads", "n_head_kv": "num_kv_heads"},
    "gpt2": {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
             "max_position_embeddings": "n_positions"},
    "gptj": {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
             "max_position_embeddings": "n_positions"},
    "mpt": {"mlp_ratio": "expansion_ratio"},
}


@dataclass(frozen=True)
class ModelConfig:
    """The architecture facts of one model, normalised across families (HF defaults applied).

    `raw` holds every config.json key (with defaults); `get(key)` reads family-specific ones.
    """

    name: str
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    num_experts: int = 1  # MoE: routed experts per layer (mixtral/gpt-oss num_local_experts, qwen num_experts,
    # deepseek n_routed_experts)
    experts_per_token: int = 1  # MoE: experts each token is routed to (top-k)
    moe_intermediate_size: int = 0  # MoE: one routed expert's FFN width (0: intermediate_size, as Mixtral)
    shared_intermediate_size: int = 0  # MoE: the always-on shared expert(s)' FFN width in all (0: none)
    dense_layers: int = 0  # MoE: decoder layers with a dense MLP instead (deepseek first_k_dense_replace)
    source: str = ""  # registry file or user path
    #: how a name that is not itself registered was resolved ("" when it was the registry's own name
    #: or a path): the Hugging Face cache file, or the registered base of an -Instruct/-Chat variant
    resolved: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def get(self, key: str, default: Any = None) -> Any:
        """Returns a config.json field (HF default applied), or `default` when absent."""
        value = self.raw.get(key, default)
        return default if value is None else value

    @property
    def expert_intermediate_size(self) -> int:
        """Returns one routed expert's FFN width (the dense width for dense models)."""
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def moe_layers(self) -> int:
        """Returns the decoder layers with routed experts (0 for a dense model)."""
        return max(0, self.num_layers - self.dense_layers) if self.num_experts > 1 else 0

    @property
    def mlp_width_per_token(self) -> float:
        """Returns the FFN width a token passes through per layer, averaged over the layers: the top-k
        routed experts plus the shared expert(s) in MoE layers, the dense width elsewhere."""
        if self.num_experts <= 1:
            return float(self.intermediate_size)
        moe = self.experts_per_token * self.expert_intermediate_size + self.shared_intermediate_size
        return (moe * self.moe_layers + self.intermediate_size * self.dense_layers) / max(1, self.num_layers)

    @property
    def gated_mlp(self) -> bool:
        """True for SwiGLU/GeGLU MLPs (gate, up, down); False for two-matrix MLPs."""
        return self.model_type in {"llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3",
                                   "qwen3_moe", "qwen2_moe", "deepseek_v3", "gpt_oss", "gemma3_text", "olmo",
                                   "olmo2", "olmo3", "stablelm"} or (
            self.model_type not in HF_DEFAULTS and self.raw.get("hidden_act", "silu") in ("silu", "swiglu")
        )


def _registry_name(path: Path) -> str:
    return path.stem.replace("__", "/")


@functools.cache
def _registry() -> dict[str, Path]:
    """Returns registry name -> config file, for every JSON in the configs folder."""
    table: dict[str, Path] = {}
    for path in sorted(CONFIG_DIR.glob("*.json")):
        table[_registry_name(path)] = path
    return table


def registry_names() -> list[str]:
    """Returns every registered model name (`org/name`, or `name` for org-less models), sorted."""
    return sorted(_registry(), key=str.lower)


def _int(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < 0:
        raise UserError(f"{where}: {key} must be a non-negative whole number (got {value!r})")
    return int(value)


def _normalise(raw: dict[str, Any], name: str, where: str) -> ModelConfig:
    model_type = str(raw.get("model_type") or "").strip()
    if not model_type:
        raise UserError(f"{where}: no 'model_type' key; an HF config.json names its family (e.g. \"llama\")")
    if model_type == "gemma3":
        raw = _gemma3_text(raw, where)
        model_type = "gemma3_text"
    declared, model_type = model_type, _FAMILY_ALIASES.get(model_type, model_type)
    cfg = dict(HF_DEFAULTS.get(model_type, {}))
    for old, new in _KEY_ALIASES.get(model_type, {}).items():
        if old in raw and new not in raw:
            raw = {**raw, new: raw[old]}
    cfg.update({k: v for k, v in raw.items() if v is not None or k not in cfg})
    cfg["model_type"] = model_type
    if declared != model_type:
        cfg["_declared_model_type"] = declared

    def need(*keys: str) -> int:
        for key in keys:
            if cfg.get(key) is not None:
                return _int(cfg[key], key, where)
        raise UserError(f"{where}: missing {keys[0]!r} (model_type {model_type!r} has no default for it)")

    if model_type in ("gpt2", "gptj"):
        d, layers, heads = need("n_embd", "hidden_size"), need("n_layer"), need("n_head")
        inter = _int(cfg["n_inner"], "n_inner", where) if cfg.get("n_inner") else 4 * d
        kv, max_pos = heads, cfg.get("n_positions")
    elif model_type == "mpt":  # MptConfig: d_model, n_heads, n_layers, expansion_ratio x d_model MLP, max_seq_len
        d, layers, heads = need("d_model", "hidden_size"), need("n_layers"), need("n_heads")
        ratio = cfg.get("expansion_ratio")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio <= 0:
            raise UserError(f"{where}: expansion_ratio must be a positive number (got {ratio!r})")
        inter, kv, max_pos = int(ratio * d), heads, cfg.get("max_seq_len")
    else:
        d = need("hidden_size", "n_embd", "d_model")
        layers = need("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        heads = need("num_attention_heads", "n_head", "num_heads", "n_heads")
        if model_type == "opt":
            inter = need("ffn_dim")
        elif model_type == "falcon":
            inter = _int(cfg["ffn_hidden_size"], "ffn_hidden_size", where) if cfg.get("ffn_hidden_size") else 4 * d
        else:
            inter = _int(cfg["intermediate_size"], "intermediate_size", where) if cfg.get(
                "intermediate_size") else (_int(cfg["ffn_dim"], "ffn_dim", where) if cfg.get("ffn_dim") else 4 * d)
        if model_type == "falcon":
            if cfg.get("new_decoder_architecture"):
                kv = _int(cfg["num_kv_heads"], "num_kv_heads", where) if cfg.get("num_kv_heads") else heads
            else:
                kv = 1 if cfg.get("multi_query") else heads
        elif model_type in ("gpt2", "opt", "gpt_neox"):
            kv = heads
        else:
            kv = cfg.get("num_key_value_heads")
            kv = _int(kv, "num_key_value_heads", where) if kv else heads
        max_pos = cfg.get("max_position_embeddings")
    if heads == 0 or d == 0 or layers == 0:
        raise UserError(f"{where}: hidden size, layers and heads must be positive")
    hd = cfg.get("head_dim")
    head_dim = _int(hd, "head_dim", where) if hd else d // heads
    if model_type == "deepseek_v3":  # MLA: a query/key head is the no-rope part plus the rotary part
        head_dim = int(cfg.get("qk_nope_head_dim") or 128) + int(cfg.get("qk_rope_head_dim") or 64)
    vocab = need("vocab_size")
    experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts") or 1)
    per_tok = int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 1) if experts > 1 else 1
    moe_inter = _int(cfg["moe_intermediate_size"], "moe_intermediate_size", where) if (
        experts > 1 and cfg.get("moe_intermediate_size")) else 0
    shared = 0
    if experts > 1 and cfg.get("shared_expert_intermediate_size"):  # qwen2_moe: one shared expert of this width
        shared = _int(cfg["shared_expert_intermediate_size"], "shared_expert_intermediate_size", where)
    elif experts > 1 and cfg.get("n_shared_experts"):  # deepseek: n_shared x moe_intermediate_size
        shared = _int(cfg["n_shared_experts"], "n_shared_experts", where) * (moe_inter or inter)
    dense = 0
    if experts > 1:
        if cfg.get("first_k_dense_replace"):
            dense = min(layers, _int(cfg["first_k_dense_replace"], "first_k_dense_replace", where))
        elif model_type in ("qwen3_moe", "qwen2_moe"):
            # Qwen MoE: layer i is sparse when i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
            step = max(1, int(cfg.get("decoder_sparse_step") or 1))
            only = {int(i) for i in (cfg.get("mlp_only_layers") or [])}
            dense = sum(1 for i in range(layers) if i in only or (i + 1) % step)
    return ModelConfig(
        name=name,
        model_type=model_type,
        hidden_size=d,
        intermediate_size=inter,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        max_position_embeddings=int(max_pos) if isinstance(max_pos, (int, float)) else None,
        num_experts=experts,
        experts_per_token=per_tok,
        moe_intermediate_size=moe_inter,
        shared_intermediate_size=shared,
        dense_layers=dense,
        source=where,
        raw=cfg,
    )


def _gemma3_text(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """Returns a Gemma 3 checkpoint's language model as one flat `gemma3_text` config, its vision tower
    kept under `vision_config` (SigLIP defaults applied), so the count holds both and the compute the text.

    The 4B, 12B and 27B checkpoints are `Gemma3ForConditionalGeneration` (configuration_gemma3.py
    Gemma3Config): a `text_config` (Gemma3TextConfig), a SigLIP `vision_config` and a projector;
    `AutoModelForCausalLM` loads all of it, and a text-only fine-tune runs only the language model."""
    text = raw.get("text_config") or {}
    vision = raw.get("vision_config") or {}
    if not isinstance(text, dict) or not isinstance(vision, dict):
        raise UserError(f"{where}: a gemma3 config's text_config and vision_config must be JSON objects")
    flat = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config")}
    flat.update(text)
    flat["model_type"] = "gemma3_text"
    flat["vision_config"] = {**SIGLIP_DEFAULTS, **{k: v for k, v in vision.items() if v is not None}}
    return flat


#: an HF config.json is a few KiB; a larger file is not one (and is not read whole)
MAX_CONFIG_BYTES = 4 * 2**20


def _read_json(path: Path) -> dict[str, Any]:
    from gpuledger.safeyaml import FileRefused, read_text_file

    try:
        text = read_text_file(path, MAX_CONFIG_BYTES)
    except FileRefused as err:
        raise UserError(f"cannot read model config {str(path)!r}: {err.reason}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(
            f"{path}:{err.lineno}:{err.colno}: not valid JSON ({err.msg}); an HF config.json is one JSON object"
        ) from None
    except RecursionError:  # thousands of nested [ or {
        raise UserError(f"{path}: nested too deep to be an HF config.json") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object (an HF config.json), got {type(data).__name__}")
    return data


#: Suffixes of a fine-tuned variant that keeps its base's architecture (the Hub's naming habits:
#: Qwen2.5-7B-Instruct, Llama-2-7b-chat-hf, gemma-2-9b-it, Meta-Llama-3-8B-Instruct, Mistral-7B-Instruct-v0.2,
#: Phi-3-mini-4k-instruct, falcon-7b-instruct). Tried longest first, case-insensitive; what is left
#: must be a registered name.
VARIANT_SUFFIXES = ("-instruct-hf", "-chat-hf", "-instruct", "-chat", "-base", "-it", "-sft", "-dpo", "-rlhf",
                    # quantised re-uploads keep the architecture (AWQ, GPTQ, bitsandbytes, FP8 checkpoints)
                    "-unsloth-bnb-4bit", "-bnb-4bit", "-gptq-int4", "-gptq-int8", "-gptq", "-awq", "-fp8", "-4bit",
                    "-8bit", "-int4", "-int8")


def _variant_bases(key: str) -> list[str]:
    """Returns registry keys a variant name may stand for, most specific first
    (`qwen/qwen2.5-7b-instruct` -> `qwen/qwen2.5-7b`; `meta-llama/llama-2-7b-chat-hf` ->
    `meta-llama/llama-2-7b-hf`; `mistralai/mistral-7b-instruct-v0.2` -> `mistralai/mistral-7b-v0.2`;
    suffixes stack: `qwen/qwen2.5-7b-instruct-awq` -> `qwen/qwen2.5-7b-instruct` -> `qwen/qwen2.5-7b`)."""
    import re

    out: list[str] = []
    frontier = [key]
    while frontier:
        name = frontier.pop(0)
        for suffix in VARIANT_SUFFIXES:
            # the suffix at the end, or before a version / date tag (-v0.2, -2407)
            m = re.search(re.escape(suffix) + r"(-v?\d[\w.]*)?$", name)
            if not m:
                continue
            stem, tail = name[:m.start()], m.group(1) or ""
            for cand in (stem + tail, stem + tail + "-hf" if suffix.endswith("-hf") else "", stem):
                if cand and cand not in out and cand != key:
                    out.append(cand)
                    frontier.append(cand)
    return out


def _lookup(key: str) -> Path | None:
    table = _registry()
    by_lower = {n.lower(): p for n, p in table.items()}
    if key in by_lower:
        return by_lower[key]
    # without the org prefix, where that is unique (`llama-2-7b-hf`, `opt-350m`)
    short = [p for n, p in table.items() if n.lower().rsplit("/", 1)[-1] == key]
    if len(short) == 1:
        return short[0]
    return None



def _lookup_short(short: str) -> Any:
    """The registry config of a model's short name; Meta's old Meta-Llama-3.x-* names as the new ones, and the
    names people write for Meta's models: Llama-2-7b for its Transformers upload Llama-2-7b-hf, Llama-3-8B for
    Meta-Llama-3-8B; and Google's Gemma 3 without its -pt (pre-trained) tag: gemma-3-4b for gemma-3-4b-pt."""
    return (_lookup(short) or (_lookup(short.removeprefix("meta-")) if short.startswith("meta-llama-3.") else None)
            or (_lookup(short + "-hf") if short.startswith("llama-2-") else None)
            or (_lookup("meta-" + short) if short.startswith("llama-3-") else None)
            or (_lookup(short + "-pt") if short.startswith("gemma-3-") else None))


def _resolved_to(path: Any, repo_id: str, why: str) -> Any:
    """The registry model at `path` standing for `repo_id`, saying why it was chosen."""
    base_name = _registry_name(path)
    cfg = _normalise(_read_json(path), repo_id, f"registry model {base_name}")
    return dataclasses.replace(cfg, resolved=f"{repo_id} is not in the registry: resolved to {base_name}, {why}")

def hf_cache_dirs() -> list[Path]:
    """Returns the Hugging Face hub cache folders to look in, as huggingface_hub resolves them:
    HF_HUB_CACHE (or the older HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, else
    ~/.cache/huggingface/hub (XDG_CACHE_HOME respected)."""
    import os

    env = os.environ
    dirs = [env[k] for k in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE") if env.get(k)]
    if env.get("HF_HOME"):
        dirs.append(str(Path(env["HF_HOME"]) / "hub"))
    xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    dirs.append(str(Path(xdg) / "huggingface" / "hub"))
    return [Path(d).expanduser() for d in dict.fromkeys(dirs)]


def hf_cached_config(repo_id: str) -> Path | None:
    """Returns the config.json of `repo_id` ("org/name") in the local Hugging Face cache
    (`models--ORG--NAME/snapshots/<rev>/config.json`; the revision `refs/main` names first, else the
    newest snapshot), or None. Offline: reads files only."""
    if "/" not in repo_id or repo_id.count("/") != 1 or ".." in repo_id:
        return None
    folder = "models--" + repo_id.replace("/", "--")
    for root in hf_cache_dirs():
        repo = root / folder
        if not repo.is_dir():
            # the cache keeps the Hub's spelling; match the folder case-insensitively
            try:
                repo = next((p for p in root.iterdir() if p.name.lower() == folder.lower()), repo)
            except OSError:
                continue
        snaps = repo / "snapshots"
        if not snaps.is_dir():
            continue
        try:
            ref = (repo / "refs" / "main").read_text().strip()
        except OSError:
            ref = ""
        if ref and (snaps / ref / "config.json").is_file():
            return snaps / ref / "config.json"
        found = [p for p in snaps.glob("*/config.json") if p.is_file()]
        if found:
            return max(found, key=lambda p: p.stat().st_mtime)
    return None


def _shown(name: str, most: int = 120) -> str:
    """`name` quoted for a message, cut to its first `most` characters (a name may be any text a user typed)."""
    return repr(name) if len(name) <= most else f"{name[:most]!r}... ({len(name):,} characters)"


@functools.cache
def _load_cached(name_or_path: str) -> ModelConfig:
    key = name_or_path.strip().lower().removeprefix("hf://").removeprefix("https://huggingface.co/").strip("/")
    if " " in key and "/" not in key:  # "Llama 2 7B": a name written with spaces
        key = "-".join(key.split())
    path = _lookup(key) if "/" in key else _lookup_short(key)
    if path is not None:
        data = _read_json(path)
        name = _registry_name(path)
        return _normalise(data, name, f"registry model {name}")
    candidate = Path(name_or_path).expanduser()
    try:
        is_dir = candidate.is_dir()
        if is_dir and (candidate / "config.json").is_file():
            candidate, is_dir = candidate / "config.json", False
        is_file = candidate.is_file()
    except OSError:  # no file can have this name (too long for a path, ...): it is a name, if anything
        is_dir = is_file = False
    looks_like_path = candidate.suffix == ".json" or "\\" in name_or_path or name_or_path.startswith((".", "/", "~"))
    if is_dir and looks_like_path:  # ("org/name" may be a folder here and still a name of the Hugging Face cache)
        raise UserError(f"model folder {_shown(name_or_path)} has no config.json; give a registry name, an HF "
                        "config.json or the folder that holds one")
    if is_file:
        data = _read_json(candidate)
        name = str(data.get("_name_or_path") or candidate.parent.name or candidate.stem)
        return _normalise(data, name, str(candidate))
    if looks_like_path:
        raise UserError(f"model config file {_shown(name_or_path)} does not exist; give a registry name or a path to "
                        "an HF config.json")
    repo_id = name_or_path.strip().removeprefix("hf://").removeprefix("https://huggingface.co/").strip("/")
    try:
        cached = hf_cached_config(repo_id)
    except OSError:  # a name too long for the cache's folders is in no cache
        cached = None
    if cached is not None:
        data = _read_json(cached)
        cfg = _normalise(data, repo_id, str(cached))
        return dataclasses.replace(cfg, resolved=f"{repo_id}: config.json from the Hugging Face cache ({cached})")
    if "/" in key:
        # the same model re-uploaded under another org (unsloth/Llama-3.2-1B, NousResearch/Llama-2-7b-hf)
        short = key.rsplit("/", 1)[-1]
        # Meta renamed Meta-Llama-3.1-* to Llama-3.1-* on the Hub; re-uploads keep the old name
        path = _lookup_short(short)
        if path is not None:
            return _resolved_to(path, repo_id, "the registered model of that name (give its config.json path to be exact)")
    for base in _variant_bases(key):
        # the same org first, then the base's name under any org where unique (Mistral's v0.2 base
        # weights live under mistral-community)
        short = base.rsplit("/", 1)[-1]
        path = _lookup(base) or _lookup_short(short)
        if path is not None:
            return _resolved_to(path, repo_id, "the architecture it was tuned from (same layers, widths and "
                                "vocabulary assumed; give its config.json path to be exact)")
    names = registry_names()
    lowered = {n.lower(): n for n in names}
    lowered.update({n.lower().rsplit("/", 1)[-1]: n for n in names})
    close = difflib.get_close_matches(name_or_path.strip().lower(), list(lowered), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(dict.fromkeys(lowered[c] for c in close))}?" if close else ""
    raise UserError(
        f"unknown model {_shown(name_or_path)}{hint} (registry: {len(names)} models, e.g. "
        f"{', '.join(names[:4])}; not in the Hugging Face cache ({', '.join(str(d) for d in hf_cache_dirs())}); "
        "or give a path to an HF config.json)"
    )


def load_config(name_or_path: str | Path) -> ModelConfig:
    """Returns the `ModelConfig` of a registry name or of an HF `config.json` path (or its folder).

    Raises `UserError` for an unknown name (with the closest names), an unreadable file or bad JSON.
    Cached: the planner calls it once per trial.
    """
    if isinstance(name_or_path, ModelConfig):
        return name_or_path
    text = str(name_or_path).strip()
    if not text:
        raise UserError("empty model name; give a registry name (see `gpuledger estimate --help`) or a config.json path")
    return _load_cached(text)

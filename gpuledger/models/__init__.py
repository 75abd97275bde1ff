"""Model architecture registry (HF `config.json` facts) and exact parameter counting.

`load_config(name_or_path)` returns a `ModelConfig` for a registry name (`meta-llama/Llama-2-7b-hf`,
case-insensitive, the org prefix optional where unique) or for a path to any HF `config.json`.
`count_params(cfg)` returns the parameter count `transformers` builds on the meta device for the
families gpt2, opt, llama, mistral, mixtral, qwen2, qwen3, gemma, gemma2, gemma3 (with its SigLIP vision
tower), phi, phi3, gpt_neox, gptj, falcon, olmo, olmo2, olmo3, mpt, starcoder2, stablelm and the
mixture-of-experts families qwen3_moe, qwen2_moe, deepseek_v3 (MLA, shared experts, dense first layers) and
gpt_oss; other families get a generic decoder estimate flagged `exact=False`.
"""

from gpuledger.models.params import (
    EXACT_FAMILIES,
    Linear,
    ParamCount,
    count_params,
    layer_linears,
    lora_linears,
)
from gpuledger.models.registry import CONFIG_DIR, ModelConfig, load_config, registry_names

__all__ = [
    "CONFIG_DIR",
    "EXACT_FAMILIES",
    "Linear",
    "ModelConfig",
    "ParamCount",
    "count_params",
    "layer_linears",
    "load_config",
    "lora_linears",
    "registry_names",
]

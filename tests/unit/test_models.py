"""Model registry and exact parameter counts (verified against transformers on the meta device)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from gpuledger.errors import UserError
from gpuledger.models import count_params, load_config, lora_linears, registry_names

SHARED = Path(__file__).resolve().parents[3] / "shared" / "reference" / "param_counts.csv"

# The eight counts of shared/reference/param_counts.csv (copied so the test runs without ../shared).
REFERENCE = {
    "facebook/opt-125m": 125_239_296,
    "facebook/opt-350m": 331_196_416,
    "gpt2": 124_439_808,
    "meta-llama/Llama-2-7b-hf": 6_738_415_616,
    "meta-llama/Meta-Llama-3-8B": 8_030_261_248,
    "mistralai/Mistral-7B-v0.1": 7_241_732_096,
    "Qwen/Qwen2.5-0.5B": 494_032_768,
    "google/gemma-2b": 2_506_172_416,
}
# sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters()) under
# torch.device("meta"), transformers 5.23.0 + torch 2.13.0 (CPU), from each registry config.
VERIFIED = {
    "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080, "gpt2-xl": 1_557_611_200,
    "facebook/opt-1.3b": 1_315_758_080, "facebook/opt-2.7b": 2_651_596_800, "facebook/opt-6.7b": 6_658_473_984,
    "facebook/opt-13b": 12_853_473_280, "facebook/opt-30b": 29_974_540_288,
    "meta-llama/Llama-2-13b-hf": 13_015_864_320, "meta-llama/Llama-2-70b-hf": 68_976_648_192,
    "meta-llama/Meta-Llama-3-70B": 70_553_706_496, "meta-llama/Llama-3.1-8B": 8_030_261_248,
    "meta-llama/Llama-3.1-70B": 70_553_706_496, "meta-llama/Llama-3.1-405B": 405_853_388_800,
    "meta-llama/Llama-3.2-1B": 1_235_814_400, "meta-llama/Llama-3.2-3B": 3_212_749_824,
    "huggyllama/llama-65b": 65_285_660_672,
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T": 1_100_048_384,
    "mistralai/Mixtral-8x7B-v0.1": 46_702_792_704,
    "Qwen/Qwen2.5-1.5B": 1_543_714_304, "Qwen/Qwen2.5-3B": 3_085_938_688, "Qwen/Qwen2.5-7B": 7_615_616_512,
    "Qwen/Qwen2.5-14B": 14_770_033_664, "Qwen/Qwen2.5-32B": 32_763_876_352, "Qwen/Qwen2.5-72B": 72_706_203_648,
    "Qwen/Qwen3-0.6B": 596_049_920, "Qwen/Qwen3-1.7B": 1_720_574_976, "Qwen/Qwen3-4B": 4_022_468_096,
    "Qwen/Qwen3-8B": 8_190_735_360,
    "google/gemma-7b": 8_537_680_896, "google/gemma-2-2b": 2_614_341_888, "google/gemma-2-9b": 9_241_705_984,
    "microsoft/phi-1_5": 1_418_270_720, "microsoft/phi-2": 2_779_683_840,
    "microsoft/Phi-3-mini-4k-instruct": 3_821_079_552,
    "EleutherAI/pythia-160m": 162_322_944, "EleutherAI/pythia-1b": 1_011_781_632,
    "EleutherAI/pythia-6.9b": 6_857_302_016,
    "tiiuae/falcon-7b": 6_921_720_704, "tiiuae/falcon-40b": 41_303_293_952,
    # 2026-12-04, transformers 5.25.0 + torch 2.13.0 (CPU), the same way
    "01-ai/Yi-6B": 6_061_035_520, "HuggingFaceTB/SmolLM2-1.7B": 1_711_376_384,
    "HuggingFaceTB/SmolLM2-135M": 134_515_008, "HuggingFaceTB/SmolLM2-360M": 361_821_120,
    "Qwen/QwQ-32B": 32_763_876_352, "Qwen/Qwen2-0.5B": 494_032_768, "Qwen/Qwen2-1.5B": 1_543_714_304,
    "Qwen/Qwen2-72B": 72_706_203_648, "Qwen/Qwen2-7B": 7_615_616_512, "Qwen/Qwen2.5-Coder-0.5B": 494_032_768,
    "Qwen/Qwen2.5-Coder-1.5B": 1_543_714_304, "Qwen/Qwen2.5-Coder-14B": 14_770_033_664,
    "Qwen/Qwen2.5-Coder-32B": 32_763_876_352, "Qwen/Qwen2.5-Coder-3B": 3_085_938_688,
    "Qwen/Qwen2.5-Coder-7B": 7_615_616_512, "Qwen/Qwen2.5-Math-1.5B": 1_543_714_304,
    "Qwen/Qwen2.5-Math-7B": 7_615_616_512, "TinyLlama/TinyLlama-1.1B-Chat-v1.0": 1_100_048_384,
    "codellama/CodeLlama-13b-hf": 13_016_028_160, "codellama/CodeLlama-34b-hf": 33_743_970_304,
    "codellama/CodeLlama-7b-hf": 6_738_546_688, "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": 70_553_706_496,
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": 8_030_261_248,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": 1_777_088_000,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": 14_770_033_664,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": 32_763_876_352,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": 7_615_616_512, "google/codegemma-7b": 8_537_680_896,
    "google/gemma-2-27b": 27_227_128_320, "meta-llama/Llama-3.3-70B-Instruct": 70_553_706_496,
    "microsoft/Phi-3.5-mini-instruct": 3_821_079_552, "microsoft/phi-4": 14_659_507_200,
    "mistralai/Mistral-7B-v0.3": 7_248_023_552, "mistralai/Mistral-Nemo-Base-2407": 12_247_782_400,
    "openlm-research/open_llama_7b": 6_738_415_616,
    # 2026-12-05, transformers 5.25.0 + torch 2.13.0 (CPU), the same way: the families added that day (Gemma 3
    # with its SigLIP vision tower for 4B-27B, OLMo, OLMo 2, MPT, GPT-J) and more of the published bases
    "google/gemma-3-270m": 268_098_176, "google/gemma-3-1b-pt": 999_885_952, "google/gemma-3-4b-pt": 4_300_079_472,
    "google/gemma-3-12b-pt": 12_187_325_040, "google/gemma-3-27b-pt": 27_432_406_640,
    "allenai/OLMo-2-0425-1B": 1_484_916_736, "allenai/OLMo-2-1124-7B": 7_298_617_344,
    "allenai/OLMo-2-1124-13B": 13_716_198_400, "allenai/OLMo-2-0325-32B": 32_234_279_936,
    "allenai/OLMo-1B-hf": 1_176_764_416, "allenai/OLMo-7B-hf": 6_888_095_744,
    "mosaicml/mpt-7b": 6_649_286_656, "mosaicml/mpt-30b": 29_957_200_896, "EleutherAI/gpt-j-6b": 6_050_882_784,
    "EleutherAI/pythia-2.8b": 2_775_208_960, "EleutherAI/pythia-12b": 11_846_072_320,
    "huggyllama/llama-13b": 13_015_864_320, "huggyllama/llama-30b": 32_528_943_616,
    # the demo trainer's GPT-2 (V=45, P=64, d=64, 4 layers): 45*64 + 64*64 + 4*(12*64^2 + 13*64) + 2*64
    "gpuledger/demo-char-gpt": 207_040,
}
# Hand-written config.json files exercising HF defaults and family switches; counts verified the
# same way (AutoConfig.for_model(model_type, **fields) on the meta device).
EDGE = [
    ({"model_type": "llama", "num_hidden_layers": 2}, 666_914_816),
    ({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 2, "attention_bias": True, "mlp_bias": True,
      "vocab_size": 1000, "head_dim": 64}, 1_959_680),
    ({"model_type": "gpt2", "n_embd": 128, "n_layer": 3, "n_head": 4, "n_inner": 300, "vocab_size": 999,
      "n_positions": 64, "tie_word_embeddings": False}, 695_556),
    ({"model_type": "opt", "hidden_size": 128, "ffn_dim": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
      "word_embed_proj_dim": 64, "do_layer_norm_before": True, "vocab_size": 500,
      "max_position_embeddings": 100}, 326_656),
    ({"model_type": "opt", "hidden_size": 128, "ffn_dim": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
      "layer_norm_elementwise_affine": False, "enable_bias": False, "vocab_size": 500,
      "tie_word_embeddings": False}, 652_544),
    ({"model_type": "phi", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 2, "qk_layernorm": True, "vocab_size": 1000}, 1_369_576),
    ({"model_type": "falcon", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
      "parallel_attn": False, "multi_query": False, "bias": True, "vocab_size": 1000}, 1_836_032),
    ({"model_type": "falcon", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 8,
      "num_kv_heads": 2, "new_decoder_architecture": True, "num_ln_in_parallel_attn": 1, "vocab_size": 1000,
      "ffn_hidden_size": 700}, 1_302_016),
    ({"model_type": "gpt_neox", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "attention_bias": False, "vocab_size": 1000, "tie_word_embeddings": True}, 1_308_672),
    ({"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 4, "attention_bias": True, "head_dim": 64,
      "vocab_size": 1000}, 2_088_960),
    ({"model_type": "qwen2", "num_hidden_layers": 1}, 1_582_325_760),
    ({"model_type": "mixtral", "num_hidden_layers": 1, "num_local_experts": 4}, 1_008_758_784),
    ({"model_type": "mistral", "num_hidden_layers": 1}, 480_260_096),
    ({"model_type": "gemma2", "num_hidden_layers": 1}, 667_692_288),
    ({"model_type": "gemma", "num_hidden_layers": 1}, 1_063_265_280),
    ({"model_type": "phi3", "num_hidden_layers": 1, "num_key_value_heads": 8}, 296_100_864),
    ({"model_type": "phi", "num_hidden_layers": 1}, 260_124_672),
    ({"model_type": "gpt_neox", "num_hidden_layers": 1}, 1_072_785_408),
    ({"model_type": "falcon", "num_hidden_layers": 1}, 502_548_224),
    ({"model_type": "opt"}, 125_239_296),
    ({"model_type": "gpt2"}, 124_439_808),
    # 2026-12-05, transformers 5.25.0, the same way
    ({"model_type": "starcoder2", "num_hidden_layers": 1}, 246_980_096),
    ({"model_type": "starcoder2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "use_bias": False,
      "tie_word_embeddings": False}, 1_366_528),
    ({"model_type": "stablelm", "num_hidden_layers": 1}, 336_870_400),
    ({"model_type": "stablelm", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "use_qkv_bias": True,
      "qk_layernorm": True, "use_parallel_residual": True}, 1_629_056),
    ({"model_type": "olmo", "num_hidden_layers": 1}, 614_465_536),
    ({"model_type": "olmo", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "attention_bias": True,
      "tie_word_embeddings": True}, 1_371_392),
    ({"model_type": "olmo2", "num_hidden_layers": 1}, 614_486_016),
    ({"model_type": "olmo3", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000}, 1_628_032),
    ({"model_type": "gemma3_text", "num_hidden_layers": 1}, 681_996_032),
    ({"model_type": "mpt", "n_layers": 1}, 153_491_456),
    ({"model_type": "gptj", "n_layer": 1}, 614_290_656),
    ({"model_type": "gptj", "n_embd": 256, "n_layer": 2, "n_head": 8, "n_inner": 700, "vocab_size": 1000,
      "rotary_dim": 16}, 1_757_536),
    # a sparse Gemma 3 config.json: text_config and vision_config take their classes' defaults
    ({"model_type": "gemma3", "text_config": {"num_hidden_layers": 1}, "vision_config": {"num_hidden_layers": 1}},
     698_683_904),
    ({"model_type": "gemma3", "text_config": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
                                              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                                              "vocab_size": 1000},
      "vision_config": {"hidden_size": 128, "intermediate_size": 300, "num_hidden_layers": 2, "num_attention_heads": 4,
                        "image_size": 224, "patch_size": 14, "vision_use_head": False}}, 1_867_096),
]


@pytest.mark.parametrize("name,expected", sorted(REFERENCE.items()))
def test_reference_counts_exact(name, expected):
    assert count_params(load_config(name)).total == expected


def test_reference_csv_agrees_when_present():
    if not SHARED.is_file():
        pytest.skip(f"{SHARED} absent (shared reference data lives next to the repo)")
    with open(SHARED, newline="") as fh:
        rows = {r["model"]: int(r["params_total"]) for r in csv.DictReader(fh)}
    assert rows == REFERENCE


@pytest.mark.parametrize("name,expected", sorted(VERIFIED.items()))
def test_verified_counts_exact(name, expected):
    if name.startswith("gpuledger/") and name not in registry_names():
        pytest.skip(f"{name} is registered by the demo trainer's config file, not present here")
    pc = count_params(load_config(name))
    assert pc.exact and pc.total == expected


@pytest.mark.parametrize("fields,expected", EDGE, ids=[f"{f['model_type']}-{i}" for i, (f, _) in enumerate(EDGE)])
def test_hf_defaults_and_variants_from_a_path(tmp_path, fields, expected):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))
    assert count_params(load_config(str(path))).total == expected


def test_opt_350m_is_not_the_seed_claim():
    assert count_params(load_config("facebook/opt-350m")).total == 331_196_416 != 356_714_496


def test_every_listed_family_and_model_is_registered():
    names = set(registry_names())
    for n in ["gpt2", "gpt2-medium", "gpt2-xl", "facebook/opt-125m", "facebook/opt-13b", "meta-llama/Llama-2-70b-hf",
              "meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.2-3B",
              "mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen2.5-72B", "Qwen/Qwen3-8B", "google/gemma-2-9b",
              "microsoft/phi-2", "microsoft/Phi-3-mini-4k-instruct", "tiiuae/falcon-40b", "EleutherAI/pythia-6.9b",
              "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"]:
        assert n in names, n
    assert all(load_config(n).num_layers > 0 for n in names)


@pytest.mark.parametrize("written, name", [("Llama-2-7b", "meta-llama/Llama-2-7b-hf"), ("Llama 2 7B", "meta-llama/Llama-2-7b-hf"),
                                           ("Llama-3-8B", "meta-llama/Meta-Llama-3-8B"),
                                           ("meta-llama/Llama-2-13b", "meta-llama/Llama-2-13b-hf")])
def test_meta_models_by_the_names_people_write(written, name):
    assert name in (load_config(written).resolved or load_config(written).name)


@pytest.mark.parametrize("written, name", [("google/gemma-3-4b-it", "google/gemma-3-4b-pt"),
                                           ("gemma-3-12b", "google/gemma-3-12b-pt"),
                                           ("unsloth/gemma-3-27b-it-bnb-4bit", "google/gemma-3-27b-pt"),
                                           ("google/gemma-3-1b-it", "google/gemma-3-1b-pt"),
                                           ("allenai/OLMo-2-1124-7B-Instruct", "allenai/OLMo-2-1124-7B"),
                                           ("mosaicml/mpt-7b-instruct", "mosaicml/mpt-7b"),
                                           ("EleutherAI/gpt-j-6B", "EleutherAI/gpt-j-6b")])
def test_new_families_by_the_names_people_write(written, name):
    cfg = load_config(written)
    assert name in (cfg.resolved or cfg.name)


def test_gemma3_vision_tower_is_held_not_run():
    """Gemma 3 4B-27B load a SigLIP tower with the language model: its weights count, its FLOPs do not."""
    from gpuledger.estimate.compute import active_params

    big, text_only = load_config("google/gemma-3-4b-pt"), load_config("google/gemma-3-1b-pt")
    pc = count_params(big)
    assert pc.vision == 419_816_304 and pc.total == pc.language + pc.vision
    # active: everything but the input embedding and the tower (the tied lm_head runs)
    assert active_params(big) == pc.language - pc.embedding + big.vocab_size * big.hidden_size
    assert count_params(text_only).vision == 0 and big.gated_mlp


def test_mosaic_gpt_is_counted_as_mpt_and_says_so():
    pc = count_params(load_config("mosaicml/mpt-1b-redpajama-200b"))
    assert pc.total == 1_311_213_568 and not pc.exact and "mosaic_gpt" in pc.note


def test_names_case_insensitive_and_without_org():
    assert load_config("LLAMA-2-7B-HF").name == "meta-llama/Llama-2-7b-hf"
    assert load_config("opt-350m").name == "facebook/opt-350m"
    assert load_config("qwen/qwen3-0.6b").name == "Qwen/Qwen3-0.6B"


def test_registry_config_facts():
    l3 = load_config("meta-llama/Llama-3.1-70B")
    assert (l3.num_kv_heads, l3.head_dim, l3.vocab_size) == (8, 128, 128256)
    g = load_config("google/gemma-2b")
    assert (g.num_kv_heads, g.head_dim, g.tie_word_embeddings) == (1, 256, True)
    f = load_config("tiiuae/falcon-7b")
    assert (f.num_kv_heads, f.intermediate_size) == (1, 4 * 4544)


def test_unknown_name_did_you_mean():
    with pytest.raises(UserError, match="did you mean.*meta-llama/Llama-2-7b-hf"):
        load_config("Llama-2-7b-hff")


@pytest.mark.parametrize("content,match", [("{not json", "not valid JSON"), ("[1, 2]", "JSON object"),
                                           ('{"hidden_size": 8}', "model_type"),
                                           ('{"model_type": "llama", "hidden_size": "big"}', "hidden_size")])
def test_bad_files(tmp_path, content, match):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(UserError, match=match):
        load_config(str(path))


def test_missing_file():
    with pytest.raises(UserError, match="does not exist"):
        load_config("/no/such/config.json")


def test_unknown_family_is_a_flagged_estimate(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "newarch", "hidden_size": 512, "intermediate_size": 1024,
                                "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000}))
    pc = count_params(load_config(str(path)))
    assert not pc.exact and "newarch" in pc.note
    # llama-style blocks with a gated MLP; lm_head tied (PretrainedConfig's tie_word_embeddings=True)
    assert pc.total == 1000 * 512 + 4 * (4 * 512 * 512 + 3 * 512 * 1024 + 2 * 512) + 512


def test_lora_linears_fused_and_targets():
    assert [lin.name for lin in lora_linears(load_config("gpt2"), "q,v")] == ["attn.c_attn"]
    names = [lin.name for lin in lora_linears(load_config("meta-llama/Llama-2-7b-hf"), "all-linear")]
    assert names == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    mix = lora_linears(load_config("mistralai/Mixtral-8x7B-v0.1"), "up")
    assert mix[0].count == 8


# --- models by any name (issue 38 item 6) ---------------------------------------------------------


@pytest.mark.parametrize("name,base", [
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B"),
    ("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf"),
    ("google/gemma-2-9b-it", "google/gemma-2-9b"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-community/Mistral-7B-v0.2"),
    ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B"),
    # quantised re-uploads, other orgs, stacked suffixes, Meta's old Llama 3.1 names
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B"),
    ("unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit", "meta-llama/Llama-3.1-8B-Instruct"),
    ("unsloth/Llama-3.2-1B", "meta-llama/Llama-3.2-1B"),
    ("NousResearch/Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf"),
])
def test_variant_names_resolve_to_their_base_and_say_so(name, base, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache: the registry decides
    from gpuledger.models import registry

    registry._load_cached.cache_clear()
    cfg = load_config(name)
    assert cfg.name == name
    assert count_params(cfg).total == count_params(load_config(base)).total
    assert base in cfg.resolved and "not in the registry" in cfg.resolved and name in cfg.resolved
    registry._load_cached.cache_clear()


def test_unknown_variant_of_unknown_base_is_still_unknown(monkeypatch, tmp_path):
    from gpuledger.errors import UserError
    from gpuledger.models import registry

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    registry._load_cached.cache_clear()
    with pytest.raises(UserError, match="unknown model"):
        load_config("someorg/NoSuchModel-7B-Instruct")
    registry._load_cached.cache_clear()


def _cache_repo(root, repo_id, config, rev="abc123", ref=True):
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(rev)
    return snap / "config.json"


@pytest.mark.parametrize("env", ["HF_HUB_CACHE", "HF_HOME"])
def test_config_from_the_hugging_face_cache(env, monkeypatch, tmp_path):
    from gpuledger.models import registry

    cfg_json = {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 6,
                "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000}
    root = tmp_path / "hub" if env == "HF_HOME" else tmp_path
    for k in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv(env, str(tmp_path))
    path = _cache_repo(root, "acme/tiny-llama-x", cfg_json)
    registry._load_cached.cache_clear()
    cfg = load_config("acme/tiny-llama-x")
    assert cfg.num_layers == 6 and cfg.num_kv_heads == 4 and cfg.source == str(path)
    assert "Hugging Face cache" in cfg.resolved
    # a cached config wins over a registry variant guess: it is the model's own
    _cache_repo(root, "Qwen/Qwen2.5-7B-Instruct", {**cfg_json, "num_hidden_layers": 3})
    registry._load_cached.cache_clear()
    assert load_config("Qwen/Qwen2.5-7B-Instruct").num_layers == 3
    registry._load_cached.cache_clear()


def test_estimate_says_how_the_model_was_resolved(monkeypatch, tmp_path):
    from gpuledger.estimate import Workload, estimate
    from gpuledger.models import registry

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    registry._load_cached.cache_clear()
    est = estimate(Workload(model="Qwen/Qwen2.5-7B-Instruct"))
    assert any("resolved to Qwen/Qwen2.5-7B" in a for a in est.assumptions)
    registry._load_cached.cache_clear()


# --- mixture-of-experts models from their config (issue 36 item 4) -------------------------------


@pytest.mark.parametrize("name,total_b,active_b", [
    # totals and activated parameters as their model cards state them (activated incl. the embedding)
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.3),
    ("Qwen/Qwen3-235B-A22B", 235.1, 22.2),
    ("Qwen/Qwen1.5-MoE-A2.7B", 14.3, 2.7),
    ("Qwen/Qwen2-57B-A14B", 57.41, 14.0),
    ("openai/gpt-oss-20b", 20.9, 3.6 + 0.58),
    ("openai/gpt-oss-120b", 116.8, 5.1 + 0.58),
    ("mistralai/Mixtral-8x22B-v0.1", 140.6, 39.1),
    ("deepseek-ai/DeepSeek-V3", 671.0, 37.5),
])
def test_moe_totals_and_active_parameters_match_their_cards(name, total_b, active_b):
    from gpuledger.estimate.compute import active_params

    cfg = load_config(name)
    assert cfg.num_experts > 1
    assert count_params(cfg).total / 1e9 == pytest.approx(total_b, abs=0.06 * total_b / 10 + 0.05)
    with_embedding = (active_params(cfg) + cfg.vocab_size * cfg.hidden_size) / 1e9
    assert with_embedding == pytest.approx(active_b, rel=0.05)


def test_moe_from_a_hand_written_config(tmp_path):
    # the config fields a user gives: experts, their width, shared experts, top-k, dense first layers
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "deepseek_v3", "hidden_size": 1024, "intermediate_size": 4096,
                                "moe_intermediate_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
                                "num_key_value_heads": 8, "n_routed_experts": 16, "n_shared_experts": 2,
                                "num_experts_per_tok": 2, "first_k_dense_replace": 1, "vocab_size": 1000}))
    cfg = load_config(str(path))
    assert (cfg.num_experts, cfg.experts_per_token, cfg.moe_layers, cfg.dense_layers) == (16, 2, 3, 1)
    assert cfg.shared_intermediate_size == 2 * 256
    assert cfg.mlp_width_per_token == pytest.approx((3 * (2 * 256 + 512) + 4096) / 4)


@pytest.mark.parametrize("name", ["a" * 5000, "qwen/" + "x" * 300, "Qwen2.5-0.5B" + "x" * 1000])
def test_a_name_too_long_for_a_path_is_an_unknown_model_said_in_one_short_line(name):
    with pytest.raises(UserError, match=r"^unknown model '.*'\.\.\. \([\d,]+ characters\)") as err:
        load_config(name)
    assert len(str(err.value)) < 600 and "\n" not in str(err.value)


def test_a_folder_without_a_config_is_said_to_be_one_not_to_be_missing(tmp_path):
    with pytest.raises(UserError, match=r"^model folder '.*' has no config.json; "):
        load_config(str(tmp_path))

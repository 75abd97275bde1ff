"""The numpy demo trainer: exact GPT-2 parameter layout, correct backward, deterministic base, real runs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuledger.trainers import demo_lora
from gpuledger.trainers.make_corpus import CHARSET, base_corpus, encode, shifted_corpus
from gpuledger.trainers.tinygpt import Config, Model, clip_grads, init_lora, init_params, param_shapes

REPO = Path(__file__).resolve().parents[2]

CONFIG_JSON = REPO / "gpuledger" / "models" / "configs" / "gpuledger__demo-char-gpt.json"
DEMO_PARAMS = 207_040  # 45*64 + 64*64 + 4*(12*64^2 + 13*64) + 2*64


def _gpt2_formula(hf: dict) -> int:
    d, L = hf["n_embd"], hf["n_layer"]
    inner = hf["n_inner"] or 4 * d
    per_layer = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * inner + inner) + (inner * d + d)
    head = 0 if hf["tie_word_embeddings"] else hf["vocab_size"] * d
    return hf["vocab_size"] * d + hf["n_positions"] * d + L * per_layer + 2 * d + head


def test_config_is_gpt2_and_counts_exactly():
    hf = json.loads(CONFIG_JSON.read_text())
    assert hf["model_type"] == "gpt2" and hf["tie_word_embeddings"] is True and hf["n_inner"] is None
    assert hf["vocab_size"] == len(CHARSET)
    cfg = demo_lora.model_config(hf)
    params = init_params(cfg, 0)
    assert sum(a.size for a in params.values()) == _gpt2_formula(hf) == cfg.n_params == DEMO_PARAMS
    # exactly GPT-2's tensors (HF names without the `transformer.` prefix; lm_head tied to wte)
    assert set(params) == set(param_shapes(cfg))
    assert params["h.0.attn.c_attn.weight"].shape == (64, 192) and params["h.0.attn.c_attn.bias"].shape == (192,)
    assert params["h.3.mlp.c_fc.weight"].shape == (64, 256) and params["h.3.mlp.c_proj.weight"].shape == (256, 64)
    assert not any("lm_head" in name for name in params)


def test_registry_counts_the_demo_model_like_the_numpy_model():
    models = pytest.importorskip("gpuledger.models")
    if not hasattr(models, "load_config") or not hasattr(models, "count_params"):
        pytest.skip("model registry API not available yet")
    count = models.count_params(models.load_config("gpuledger/demo-char-gpt"))
    assert count.total == DEMO_PARAMS and count.exact


def _tiny(dtype=np.float64):
    cfg = Config(vocab_size=7, n_positions=6, n_embd=8, n_layer=2, n_head=2)
    rng = np.random.default_rng(1)
    params = {k: v + rng.standard_normal(v.shape) * 0.3 for k, v in init_params(cfg, 0, dtype).items()}
    lora = {k: v + rng.standard_normal(v.shape) * 0.3 for k, v in init_lora(cfg, 3, 2, dtype).items()}
    idx, tgt = rng.integers(0, 7, (2, 5)), rng.integers(0, 7, (2, 5))
    return cfg, params, lora, idx, tgt


def test_backward_matches_numerical_gradient():
    """Central finite differences in float64 on every tensor (up to 16 entries each) of a tiny model."""
    cfg, params, lora, idx, tgt = _tiny()
    model = Model(cfg, params, lora, lora_alpha=6.0)
    _, cache = model.forward(idx, tgt)
    grads = model.backward(cache, grad_base=True)
    assert set(grads) == set(params) | set(lora)
    eps = 1e-6
    pick = np.random.default_rng(5)
    for name, arr in [*params.items(), *lora.items()]:
        flat = arr.reshape(-1)  # a view: perturbing it perturbs the model
        entries = pick.choice(flat.size, size=min(16, flat.size), replace=False)
        numeric = np.empty(len(entries))
        for j, i in enumerate(entries):
            old = flat[i]
            flat[i] = old + eps
            up, _ = model.forward(idx, tgt, keep=False)
            flat[i] = old - eps
            down, _ = model.forward(idx, tgt, keep=False)
            flat[i] = old
            numeric[j] = (up - down) / (2 * eps)
        analytic = grads[name].reshape(-1)[entries]
        scale = max(1e-6, np.abs(numeric).max())
        assert np.abs(numeric - analytic).max() / scale < 1e-6, name


def test_lora_only_backward_matches_full_and_starts_at_base():
    cfg, params, lora, idx, tgt = _tiny()
    model = Model(cfg, params, lora, lora_alpha=6.0)
    _, cache = model.forward(idx, tgt)
    full = model.backward(cache, grad_base=True)
    only = model.backward(cache, grad_base=False)
    assert set(only) == set(lora)
    for name in lora:
        np.testing.assert_allclose(only[name], full[name])
    fresh = init_lora(cfg, 4, 0, np.float64)  # B = 0: the adapted model equals the base
    assert Model(cfg, params, fresh).forward(idx, tgt)[0] == pytest.approx(Model(cfg, params).forward(idx, tgt)[0])


def test_clip_grads():
    grads = {"a": np.array([3.0, 4.0])}
    assert clip_grads(grads, 1.0) == pytest.approx(5.0)
    assert np.linalg.norm(grads["a"]) == pytest.approx(1.0, rel=1e-5)


def test_corpora_are_deterministic_and_different():
    assert base_corpus(5000, 0) == base_corpus(5000, 0) and shifted_corpus(5000, 1) == shifted_corpus(5000, 1)
    assert base_corpus(5000, 0) != base_corpus(5000, 3)
    base, shifted = set(base_corpus(20000).split()), set(shifted_corpus(20000).split())
    assert len(base & shifted) < 0.2 * len(shifted)  # a real distribution shift
    assert max(encode(shifted_corpus(3000))) < len(CHARSET)


def test_pretraining_is_deterministic_and_cached(tmp_path, monkeypatch):
    recipe = {**demo_lora.PRETRAIN, "steps": 3, "batch": 2, "seq_len": 16}
    hf = json.loads(CONFIG_JSON.read_text())
    cfg = demo_lora.model_config(hf)
    paths = []
    for sub in ("one", "two"):
        monkeypatch.setenv("GPULEDGER_CACHE_DIR", str(tmp_path / sub))
        demo_lora.load_or_pretrain_base(cfg, hf, recipe)
        paths.append(demo_lora.base_cache_path(hf, recipe))
    assert paths[0].name == paths[1].name and paths[0].read_bytes() == paths[1].read_bytes()
    mtime = paths[1].stat().st_mtime_ns
    again = demo_lora.load_or_pretrain_base(cfg, hf, recipe)  # from the cache: not re-created
    assert paths[1].stat().st_mtime_ns == mtime and set(again) == set(param_shapes(cfg))
    assert demo_lora.base_cache_path(hf, {**recipe, "steps": 4}) != paths[1]


@pytest.fixture(scope="module")
def demo_env(tmp_path_factory) -> dict[str, str]:
    """A private cache with a small base (40 pretraining steps), so tests never touch ~/.cache."""
    return {"GPULEDGER_CACHE_DIR": str(tmp_path_factory.mktemp("demo-cache")),
            "GPULEDGER_DEMO_PRETRAIN_STEPS": "40"}


def _run_trainer(*args: str, tmp_env: dict | None = None) -> tuple[dict, list[dict]]:
    env = {**os.environ, **(tmp_env or {})}
    env.pop("GPULEDGER_METRICS", None)
    proc = subprocess.run([sys.executable, "-m", "gpuledger.trainers.demo_lora", *args, "--quiet"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    metrics = [json.loads(ln.removeprefix("GPULEDGER_METRIC ")) for ln in proc.stdout.splitlines()
               if ln.startswith("GPULEDGER_METRIC ")]
    final = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith('{"final"')][0])["final"]
    return final, metrics


def test_trainer_cli_reports_metrics_and_learns(demo_env):
    final, metrics = _run_trainer("--lora-r", "4", "--lr", "1e-2", "--micro-batch", "8", "--steps", "30",
                                  "--eval-every", "10", tmp_env=demo_env)
    evals = [m for m in metrics if m["name"] == "eval_loss"]
    assert [m["step"] for m in evals] == [0, 10, 20, 30, 30]  # step 0 = base, last = final report
    assert all(math.isfinite(m["value"]) for m in metrics)
    assert final["eval_loss"] < final["eval_loss_base"]  # adaptation helps on the shifted corpus
    assert final["trainable_params"] == 4 * (4 * (64 + 192) + 4 * (64 + 64))
    assert [m for m in metrics if m["name"] == "train_loss"]


def test_trainer_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, "-m", "gpuledger.trainers.demo_lora", "--seq-len", "500"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--seq-len" in proc.stderr


def test_demo_trials_under_the_local_launcher(tmp_path, demo_env):
    """Real trials under the agent: metrics arrive, RSS grows with micro-batch, records are valid."""
    from gpuledger.launch.base import LaunchRequest
    from gpuledger.launch.local import LocalLauncher
    from gpuledger.record import parse_record

    prep = subprocess.run([sys.executable, "-m", "gpuledger.trainers.demo_lora", "--prepare-base", "--quiet"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, **demo_env})
    assert prep.returncode == 0, prep.stderr  # the (small) base is cached before the trials start
    assert Path(prep.stdout.strip()).parent == Path(demo_env["GPULEDGER_CACHE_DIR"])
    reqs = [LaunchRequest(sweep_id="demo-1", sweep_name="demo", trial_id=f"b{batch}", params={"micro_batch": batch},
                          run=f"python -m gpuledger.trainers.demo_lora --lora-r 4 --lr 3e-2 --micro-batch {batch} "
                              f"--steps {steps} --eval-every 4 --quiet",
                          workdir=REPO, env=demo_env)
            for batch, steps in ((2, 8), (64, 8))]
    with LocalLauncher(max_parallel=2, landing_dir=tmp_path) as launcher:
        records = [r.to_json() for r in launcher.run_all(reqs)]
    small, big = records
    for rec in records:
        parse_record(rec)
        assert rec["status"] == "succeeded", rec.get("stderr_tail")
        evals = [m for m in rec["metrics"] if m["name"] == "eval_loss"]
        assert [m["step"] for m in evals] == [0, 4, 8, 8]
        assert rec["final_metrics"]["eval_loss"] == evals[-1]["value"]
        assert len([m for m in rec["metrics"] if m["name"] == "train_loss"]) == 1
        assert rec["peak_rss_gib"] > 0.02
    assert big["peak_rss_gib"] > small["peak_rss_gib"] + 0.01  # activations of 64 vs 2 sequences


_FAULTS = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from gpuledger.trainers.demo_lora import keep_freed_memory
    assert keep_freed_memory()
x = np.ones((32 * 64, 64), np.float32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(300):  # a step's temporaries: a few MiB, of varying sizes, made and freed
    a = x @ np.ones((64, 256 * (1 + i % 5)), np.float32)
    b = np.tanh(a)
    del a, b
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
                    reason="mallopt is glibc's")
def test_the_trainer_keeps_freed_memory_instead_of_faulting_it_back():
    """glibc's default maps and unmaps a step's large temporaries (page faults: system CPU time, a third
    of a B=32 demo trial's CPU); with keep_freed_memory the same loop faults a small fraction as often."""
    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    default, kept = faults("default"), faults("keep")
    assert kept * 5 < default, (kept, default)

"""`gpuledger estimate MODEL --tokens N`: the table over GPU kinds and counts (gpuledger/plan/gpu_table.py)."""

from __future__ import annotations

import json

import pytest

from gpuledger.catalog.pricing import load_offers
from gpuledger.cli import main
from gpuledger.estimate import Workload, bands, estimate, train_time_s
from gpuledger.plan.gpu_table import OPTION_KEYS, gpu_options

W8B = Workload(model="meta-llama/Llama-3.1-8B", method="lora", lora_targets="all-linear", micro_batch=4)


def test_options_mark_one_cheapest_and_one_fastest_among_fitting():
    opts = gpu_options(W8B, 20e6, load_offers(), ["H100", "A100", "L4"])
    assert all(set(OPTION_KEYS) <= set(o) for o in opts)
    fitting = [o for o in opts if o["fits"]]
    # refused only where even the memory band's P10 exceeds the usable memory (35 GiB on one 24 GB L4);
    # between P10 and P90 the option fits with its OOM risk said (the planner's rule)
    assert {o["accelerator"] for o in opts if not o["fits"]} == {"L4"}
    for o in opts:
        if o["peak_memory_gib"] is not None:
            assert o["fits"] == (o["peak_memory_gib_p10"] <= o["usable_memory_gib"] + 0.01) or o["reason"]
            assert (o["memory_note"] is not None) == (o["peak_memory_gib_p90"] > o["usable_memory_gib"] + 0.01) \
                or not o["fits"]
    assert not next(o for o in opts if o["accelerator"] == "L4" and o["gpus"] == 1)["fits"]
    cheapest = [o for o in opts if o["cheapest"]]
    fastest = [o for o in opts if o["fastest"]]
    assert len(cheapest) == len(fastest) == 1 and cheapest[0]["fits"] and fastest[0]["fits"]
    safe = [o for o in fitting if o["usd_on_demand"] is not None and o["memory_note"] is None]
    assert cheapest[0]["usd_on_demand"] == min(o["usd_on_demand"] for o in safe)
    assert fastest[0]["time_s"]["p50"] == min(o["time_s"]["p50"] for o in fitting)
    h100 = next(o for o in opts if o["accelerator"] == "H100" and o["gpus"] == 1)
    # the time is the throughput model's moved by its cell's measured error (the band's P50), the money
    # that time at the offer's hourly price
    band = bands.band_for("time", "hf", "lora", "bf16", 1, "H100")
    model_s = train_time_s(estimate(W8B), 20e6, "H100", 1)
    t = h100["time_s"]
    assert t["p50"] == pytest.approx(model_s * band.p50, rel=1e-3)
    assert t["p10"] == pytest.approx(model_s * band.p10, rel=1e-3) and t["p10"] < t["p50"] < t["p90"]
    assert h100["usd_on_demand"] > 0 and h100["on_demand_offer"]
    assert h100["cost_usd"]["p50"] == pytest.approx(h100["usd_on_demand"], abs=0.01)
    assert h100["cost_usd"]["p90"] / h100["cost_usd"]["p50"] == pytest.approx(t["p90"] / t["p50"], rel=1e-2)
    assert h100["time_band"]["rows"] > 0 and "median error" in h100["time_band"]["says"]
    assert h100["peak_memory_gib_p90"] >= h100["peak_memory_gib"] * bands.band_for(
        "memory", "hf", "lora", "bf16", 1, None).p90 - 0.01


def test_json_carries_the_options(capsys):
    assert main(["estimate", "meta-llama/Llama-3.1-8B", "--tokens", "2e7", "--accelerator", "H100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == 2e7 and [o["gpus"] for o in out["options"]] == [1, 2, 4, 8]
    assert "memory_gib" in out and "flops_per_token" in out  # the stable keys stay
    band = out["memory_band"]  # the device level's band, from the memory rows of its cell
    d = band["device_gib"]
    assert d["p10"] <= d["p50"] <= d["p90"] and band["rows"] > 0 and "median error" in band["says"]
    assert d["p50"] == pytest.approx(out["memory_gib"]["device"] * band["p50"], rel=1e-3)
    assert all(set(o["time_s"]) == {"p10", "p50", "p90"} and set(o["cost_usd"]) == {"p10", "p50", "p90"}
               for o in out["options"] if o["fits"])


def test_text_table_and_without_tokens_no_table(capsys):
    assert main(["estimate", "gpt2", "--tokens", "1e6", "--accelerator", "A100"]) == 0
    text = capsys.readouterr().out
    assert "which GPU" in text and "FASTEST" in text and "CHEAPEST" in text
    # the answer first, above the table: the marked options in one line each
    head = text[text.index("which GPU"):].splitlines()[1:3]
    assert head[0].startswith("  cheapest: ") and head[1].startswith("  fastest: ") and "x A100" in head[1]
    assert "(P10 " in head[0] and " - P90 " in head[0] and "public runs of" in head[0] and "median error" in head[0]
    assert main(["estimate", "gpt2"]) == 0
    assert "which GPU" not in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--tokens", "-5"], "--tokens"),
    (["--tokens", "1e6", "--accelerator", "Z99"], "--accelerator"),
    (["--gpus", "3", "--tensor-parallel", "2"], "tensor_parallel"),
])
def test_bad_input_is_one_line(capsys, args, message):
    assert main(["estimate", "gpt2", *args]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_checkpointing_mode_keeps_grad_ckpt_working():
    assert Workload(model="gpt2", grad_ckpt=False).checkpointing_mode == "none"
    sel = Workload(model="gpt2", checkpointing="selective")
    assert sel.checkpointing_mode == "selective" and sel.grad_ckpt is False
    assert Workload(model="gpt2", checkpointing="full").grad_ckpt is True


def test_a_gpu_without_bf16_says_its_time_is_the_fp16_rate():
    opts = gpu_options(Workload(model="meta-llama/Llama-3.2-1B", method="lora"), 1e6, load_offers(), ["V100", "A100"])
    v100 = [o for o in opts if o["accelerator"] == "V100" and o["fits"] and o["usd_on_demand"] is not None]
    assert v100 and all("no bf16" in o["reason"] for o in v100)
    assert not any("no bf16" in (o["reason"] or "") for o in opts if o["accelerator"] == "A100")


def test_gpu_names_the_gpu_kind_as_prices_does(capsys):
    # `gpuledger estimate gpt2 --gpu A100` was refused with "ambiguous option: --gpu could match --gpus,
    # --gpu-memory" (argparse's prefix matching), naming neither --accelerator nor what --gpu meant in `prices`
    assert main(["estimate", "gpt2", "--tokens", "1e6", "--accelerator", "A100", "--json"]) == 0
    spelled_out = json.loads(capsys.readouterr().out)
    assert main(["estimate", "gpt2", "--tokens", "1e6", "--gpu", "A100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == spelled_out and {o["accelerator"] for o in out["options"]} == {"A100"}
    assert main(["estimate", "gpt2", "--gpus", "2", "--json"]) == 0  # --gpus is still the count
    assert json.loads(capsys.readouterr().out)["workload"]["gpus"] == 2

"""GPU kinds a project declares in gpuledger.toml [[gpus]] (issue 36 item 4)."""

from __future__ import annotations

import pytest

from gpuledger.errors import UserError

H800 = '''
[[gpus]]
name = "H800"
aliases = ["h800-sxm"]
memory_gib = 79.65
bf16_tflops = 989
fp8_tflops = 1979
bandwidth_gbps = 3350
arch = "Hopper"
interconnect = "nvlink"
interconnect_gbps = 150
usd_per_gpu_hour = 2.5
gpus_per_instance = [1, 8]
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    def make(text: str):
        (tmp_path / "gpuledger.toml").write_text(text)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "no-user-config.toml"))
        monkeypatch.delenv("GPULEDGER_PROJECT", raising=False)
        return tmp_path
    return make


def test_a_declared_kind_is_a_catalog_kind_with_its_own_figures(project):
    from gpuledger.catalog import gpu_kinds, normalize_accelerator
    from gpuledger.estimate import Workload, estimate, training_step

    project(H800)
    assert normalize_accelerator("h800-sxm") == "H800"
    kind = gpu_kinds()["H800"]
    assert kind.memory_gib == 79.65 and kind.peak_tflops("fp8") == 1979 and kind.interconnect_gbps == 150
    est = estimate(Workload(model="meta-llama/Llama-3.1-8B", method="full", gpus=8, sharding="fsdp"))
    h800, h100 = training_step(est, "H800"), training_step(est, "H100")
    # same compute as an H100, a third of its NVLink: FSDP's communication is what differs
    assert h800.parts_s["communication"] > h100.parts_s["communication"]
    assert h800.parts_s["matmul"] == pytest.approx(h100.parts_s["matmul"])


def test_a_declared_price_becomes_offers_per_gpu_count(project):
    from gpuledger.catalog.pricing import declared_gpu_offers

    project(H800)
    offers = declared_gpu_offers()
    assert offers["accelerator_count"].to_list() == [1, 8]
    assert offers["usd_per_hour_on_demand"].to_list() == [2.5, 20.0]
    assert set(offers["cloud"]) == {"kubernetes"}


@pytest.mark.parametrize("text,match", [
    ('[[gpus]]\nname = "X"\nmemory_gib = 48\nbandwidth_gbps = 900\n', "bf16_tflops"),
    ('[[gpus]]\nname = "X"\nmemory_gib = -1\nbf16_tflops = 100\nbandwidth_gbps = 900\n', "memory_gib"),
    ('[[gpus]]\nname = "X"\nmemory_gib = 48\nbf16_tflops = 100\nbandwidth_gbps = 900\ncolour = "red"\n', "colour"),
])
def test_a_bad_declaration_names_the_table_and_key(project, text, match):
    from gpuledger.catalog import gpu_kinds

    project(text)
    with pytest.raises(UserError, match=match) as err:
        gpu_kinds()
    assert "[[gpus]] #1" in str(err.value)

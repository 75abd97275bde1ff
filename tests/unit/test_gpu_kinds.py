"""GPU kinds of the bundled catalog beyond the first fourteen (H800, H20, A800, A40, RTX 6000 Ada, GH200, GB200,
MI300X): each is a spec row with its datasheet figures and source, is timed by the training-step model with its
own link, and is planned at a catalog price where SkyPilot's catalog has one and as "no price: bring your own
rate" where it has none (issue 36 item 4)."""

from __future__ import annotations

import pytest

from gpuledger.errors import UserError

NEW_KINDS = ("H800", "H20", "A800", "A40", "RTX6000-Ada", "GH200", "GB200", "MI300X")
#: what a user may type for each (SkyPilot's names, NVML-like names, datasheet names)
SPELLINGS = {"h800-sxm": "H800", "H20": "H20", "a800-sxm4-80gb": "A800", "a40": "A40", "RTX 6000 Ada": "RTX6000-Ada",
             "rtx6000ada": "RTX6000-Ada", "gh200-480gb": "GH200", "GB200": "GB200", "mi300x": "MI300X",
             "L40": "L40", "RTX 4090": "RTX4090", "B200": "B200"}
#: the SkyPilot v8 snapshot (gpuledger/catalog/offers.csv) prices these, and not the others
PRICED = {"MI300X": "azure", "GH200": "lambda", "RTX6000-Ada": "vast"}


@pytest.fixture
def project(tmp_path, monkeypatch):
    def make(text: str = ""):
        (tmp_path / "gpuledger.toml").write_text(text)
        (tmp_path / "gpuledger.toml").chmod(0o600)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "no-user-config.toml"))
        monkeypatch.delenv("GPULEDGER_PROJECT", raising=False)
        monkeypatch.delenv("GPULEDGER_PRICES", raising=False)
        return tmp_path
    return make


@pytest.mark.parametrize("typed,name", sorted(SPELLINGS.items()))
def test_each_spelling_names_its_kind(typed, name):
    from gpuledger.catalog import normalize_accelerator

    assert normalize_accelerator(typed) == name


@pytest.mark.parametrize("name", NEW_KINDS)
def test_each_new_kind_is_a_sourced_spec_row(name):
    from gpuledger.catalog import gpu_kinds

    kind = gpu_kinds()[name]
    assert kind.source.startswith(("https://", "NVIDIA publishes no")) and "https://" in kind.source
    assert kind.as_of == "2026-12-02" and kind.confidence in ("high", "medium", "low")
    # what nvidia-smi / rocm-smi shows is at most the marketing GB, at least 90% of it
    assert 0.9 * kind.memory_gb_nominal * 1e9 / 2**30 <= kind.memory_gib <= kind.memory_gb_nominal * 1.0001
    assert kind.bandwidth_gbps > 500 and kind.peak_tflops("bf16") > 100 and "nvidia-smi" in kind.notes + kind.source \
        or "rocm-smi" in kind.notes


def test_the_export_parts_keep_compute_and_lose_link():
    """H800 / A800 are the H100 / A100-80GB at the same datasheet rate with NVLink cut to 400 GB/s; the H20 keeps
    the NVLink and loses ~85% of the tensor rate: 8-GPU FSDP spends more on communication on the H800 and A800,
    and the H20's matmuls take 989 / 148 times the H100's."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import Workload, estimate, training_step

    kinds = gpu_kinds()
    assert kinds["H800"].tflops == kinds["H100"].tflops and kinds["A800"].tflops == kinds["A100-80GB"].tflops
    est = estimate(Workload(model="meta-llama/Llama-3.1-8B", method="full", gpus=8, sharding="fsdp"))
    step = {k: training_step(est, k) for k in ("H100", "H800", "H20", "A100-80GB", "A800")}
    assert step["H800"].parts_s["communication"] > step["H100"].parts_s["communication"]
    assert step["A800"].parts_s["communication"] > step["A100-80GB"].parts_s["communication"]
    assert step["H800"].parts_s["matmul"] == pytest.approx(step["H100"].parts_s["matmul"])
    assert step["H20"].parts_s["matmul"] == pytest.approx(step["H100"].parts_s["matmul"] * 989 / 148, rel=1e-6)
    assert step["H20"].parts_s["communication"] == pytest.approx(step["H100"].parts_s["communication"], rel=0.05)


def test_links_and_generations_of_the_new_kinds():
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate.calibration import accelerator_family
    from gpuledger.estimate.inference import hardware_for
    from gpuledger.estimate.throughput import _intra_node_gbps

    kinds = gpu_kinds()
    assert _intra_node_gbps(kinds["MI300X"])[0] == "xgmi" and _intra_node_gbps(kinds["GB200"]) == ("nvlink", 700.0)
    assert _intra_node_gbps(kinds["A40"])[0] == "pcie" and _intra_node_gbps(kinds["RTX6000-Ada"])[0] == "pcie"
    assert {k: accelerator_family(k) for k in NEW_KINDS} == {
        "H800": "hopper", "H20": "hopper", "A800": "ampere", "A40": "ampere", "RTX6000-Ada": "ada",
        "GH200": "hopper", "GB200": "blackwell", "MI300X": "other"}
    assert hardware_for("H800", "bf16").nvlink and hardware_for("H20", "bf16").generation == "hopper"
    assert not hardware_for("A40", "bf16").nvlink and hardware_for("GB200", "bf16").generation == "blackwell"


def test_the_mi300x_is_not_flattered_beyond_the_h100():
    """Its datasheet is 1.32x the H100's; the time model assumes the H100's sustained rate (coefficients.py)."""
    from gpuledger.estimate import Workload, estimate, training_step

    est = estimate(Workload(model="meta-llama/Llama-3.1-8B", method="lora", micro_batch=4, seq_len=2048))
    mi, h100 = training_step(est, "MI300X"), training_step(est, "H100")
    assert mi.parts_s["matmul"] == pytest.approx(h100.parts_s["matmul"], rel=0.02)


@pytest.mark.parametrize("typed,name", [("NVIDIA H800", "H800"), ("NVIDIA H20", "H20"), ("NVIDIA GH200 480GB", "GH200"),
                                        ("NVIDIA GB200", "GB200"), ("NVIDIA A800-SXM4-80GB", "A800"),
                                        ("NVIDIA A40", "A40"), ("NVIDIA RTX 6000 Ada Generation", "RTX6000-Ada"),
                                        ("NVIDIA H200", "H200"), ("NVIDIA B200", "B200"), ("NVIDIA RTX A6000", "A6000"),
                                        ("NVIDIA A800-SXM4-40GB", "NVIDIA A800-SXM4-40GB"),
                                        ("NVIDIA H800 PCIe", "NVIDIA H800 PCIe"), ("NVIDIA RTX A4000", "NVIDIA RTX A4000")])
def test_the_agent_names_the_gpu_it_sees(typed, name):
    from gpuledger.agent.measure import accelerator_name

    assert accelerator_name(typed) == name


def _spec(accelerators, clouds, gpus=1):
    from gpuledger.spec import parse_spec

    return parse_spec(f"""
kind: sweep
name: kinds
project: tests
owner: ci
model: meta-llama/Llama-3.1-8B
method: lora
precision: bf16
train: {{seq_len: 2048, tokens_per_trial: 20000000}}
search:
  strategy: grid
  params: {{learning_rate: [1.0e-4]}}
  objective: {{metric: eval_loss, goal: minimize}}
resources: {{accelerators: {accelerators}, gpus_per_trial: {gpus}, clouds: {clouds}, max_parallel: 1}}
budget: {{max_usd: 500}}
launcher: skypilot
task:
  run: python train.py --lr {{learning_rate}}
""", "kinds.yaml")


@pytest.mark.parametrize("name", sorted(set(NEW_KINDS) - set(PRICED)))
def test_a_kind_without_a_price_is_planned_as_bring_your_own_rate(project, name):
    from gpuledger.plan import plan_sweep

    project()
    plan = plan_sweep(_spec([name], ["aws", "gcp", "azure", "lambda", "nebius", "vast", "kubernetes"], 8))
    (trial,) = plan.trials
    assert not trial["feasible"] and trial["est_cost_usd"] is None  # no price invented
    assert trial["reason"].startswith(f"no price for {name} in any cloud") and "bring your own rate" in trial["reason"]
    (note,) = [a for a in plan.assumptions if a.startswith("no price for")]
    assert "[[prices.instance]]" in note and f'accelerator = "{name}"' in note and "invents none" in note


@pytest.mark.parametrize("name,cloud", sorted(PRICED.items()))
def test_a_kind_the_catalog_prices_is_planned_at_its_price(project, name, cloud):
    from gpuledger.plan import plan_sweep

    project()
    plan = plan_sweep(_spec([name], [cloud]))
    (trial,) = plan.trials
    assert trial["feasible"] and trial["accelerator"] == name and trial["cloud"] == cloud
    assert trial["price_basis"] == "catalog" and trial["est_cost_usd"] > 0
    assert not any(a.startswith("no price for") for a in plan.assumptions)


def test_your_rate_for_a_catalog_kind_in_gpus_or_prices(project):
    """A [[gpus]] table naming a catalog kind with only its price keeps the catalog's figures; a
    [[prices.instance]] row prices it the same way (docs/prices.md)."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.plan import plan_sweep

    project('[[gpus]]\nname = "h800-sxm"\nusd_per_gpu_hour = 1.9\ngpus_per_instance = [1, 8]\n')
    assert gpu_kinds()["H800"].source.startswith("https://www.nvidia.cn/")  # the figures stay the catalog's
    (trial,) = plan_sweep(_spec(["H800"], ["kubernetes"])).trials
    assert trial["feasible"] and trial["instance_type"] == "H800-x1" and trial["usd_per_hour"] == pytest.approx(1.9)
    assert "your price for H800" in trial["price_source"]
    hours = trial["est_wall_s"] / 3600
    assert trial["est_cost_usd"] == pytest.approx(1.9 * hours, rel=1e-3)

    project('[[prices.instance]]\ncloud = "kubernetes"\ninstance_type = "h20-box"\naccelerator = "H20"\n'
            'accelerator_count = 8\nusd_per_hour = 9.6\n')
    (trial,) = plan_sweep(_spec(["H20"], ["kubernetes"], 8)).trials
    assert trial["feasible"] and trial["instance_type"] == "h20-box" and trial["usd_per_hour"] == pytest.approx(9.6)


def test_a_gpus_table_for_a_catalog_kind_needs_its_price_or_all_its_figures(project):
    from gpuledger.catalog import gpu_kinds

    project('[[gpus]]\nname = "A40"\nusd_per_gpu_hour_spot = 0.3\n')
    with pytest.raises(UserError, match=r"\[\[gpus\]\] #1: A40 is in the bundled catalog.*usd_per_gpu_hour"):
        gpu_kinds()
    project('[[gpus]]\nname = "A40"\nmemory_gib = 48\n')  # some figures: a kind of its own, all three required
    with pytest.raises(UserError, match="bandwidth_gbps"):
        gpu_kinds()


def test_the_estimate_table_says_no_price_for_an_unpriced_kind(project):
    from gpuledger.catalog.pricing import load_offers
    from gpuledger.estimate import Workload
    from gpuledger.plan.gpu_table import gpu_options

    project()
    w = Workload(model="meta-llama/Llama-3.1-8B", method="lora", micro_batch=4, seq_len=2048)
    rows = gpu_options(w, 1e7, load_offers(), accelerators=["A40", "H100"], counts=(1,))
    by = {r["accelerator"]: r for r in rows}
    assert by["A40"]["time_s"]["p50"] > by["H100"]["time_s"]["p50"] and by["A40"]["usd_on_demand"] is None
    assert by["A40"]["reason"] == "no price for A40 in any cloud: bring your own rate (docs/prices.md)"
    assert by["H100"]["usd_on_demand"] > 0


#: product names as nvidia-smi, a datasheet or a cloud console writes them, and the kind each names
PRODUCT_NAMES = {"NVIDIA A100-SXM4-80GB": "A100-80GB", "NVIDIA H100 80GB HBM3": "H100", "H200 141GB": "H200",
                 "L4-24GB": "L4", "NVIDIA L4": "L4", "L40S 48GB": "L40S", "A100 80GB PCIe": "A100-80GB",
                 "NVIDIA A100-PCIE-40GB": "A100", "A100 PCIe": "A100", "H100 PCIe": "H100-PCIe",
                 "NVIDIA H100 PCIe": "H100-PCIe", "H100-PCIE-80GB": "H100-PCIe", "NVIDIA H100 NVL": "H100-NVL",
                 "H100 SXM5 80GB": "H100", "NVIDIA GeForce RTX 4090": "RTX4090", "MI300X 192GB": "MI300X",
                 "NVIDIA RTX 6000 Ada Generation 48GB": "RTX6000-Ada", "Tesla T4": "T4"}


@pytest.mark.parametrize("typed,name", sorted(PRODUCT_NAMES.items()))
def test_a_product_name_names_its_kind(typed, name):
    from gpuledger.catalog import normalize_accelerator

    assert normalize_accelerator(typed) == name


@pytest.mark.parametrize("typed", ["V100 32GB", "A100 48GB", "RTX 3090", "RTX Pro 6000", "Quadro RTX 6000", "NVIDIA",
                                   "80GB", "H800 PCIe", "x" * 5000])
def test_a_product_name_of_another_part_names_no_kind(typed):
    """A size that is not the kind's own, a card the catalog lacks (declare it in [[gpus]]), vendor words alone."""
    from gpuledger.catalog import UnknownAccelerator, normalize_accelerator

    with pytest.raises(UnknownAccelerator, match="unknown accelerator"):
        normalize_accelerator(typed)


def test_the_h100_pcie_and_nvl_are_timed_as_their_own_cards():
    """The PCIe H100 is 756 dense TFLOPS at 2 TB/s over PCIe, the NVL 835 at 3.9 TB/s: not the SXM part's 989 and
    3.35 TB/s over NVLink (datasheet columns, gpus.csv)."""
    from gpuledger.catalog import gpu_kinds
    from gpuledger.estimate import Workload, estimate, training_step
    from gpuledger.estimate.calibration import accelerator_family
    from gpuledger.estimate.throughput import _intra_node_gbps

    kinds = gpu_kinds()
    assert (kinds["H100-PCIe"].peak_tflops("bf16"), kinds["H100-PCIe"].bandwidth_gbps) == (756, 2000)
    assert (kinds["H100-NVL"].peak_tflops("bf16"), kinds["H100-NVL"].memory_gb_nominal) == (835, 94)
    assert _intra_node_gbps(kinds["H100-PCIe"])[0] == "pcie" and _intra_node_gbps(kinds["H100-NVL"])[0] == "pcie"
    assert accelerator_family("H100-PCIe") == accelerator_family("H100-NVL") == "hopper"
    est = estimate(Workload(model="meta-llama/Llama-3.1-8B", method="full", gpus=8, sharding="fsdp"))
    sxm, pcie = training_step(est, "H100"), training_step(est, "H100-PCIe")
    assert pcie.parts_s["matmul"] == pytest.approx(sxm.parts_s["matmul"] * 989 / 756, rel=1e-6)
    assert pcie.parts_s["communication"] > 2 * sxm.parts_s["communication"]

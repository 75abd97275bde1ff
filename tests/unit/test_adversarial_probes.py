"""Issue 43 item 6: a probe is believed only within what the hardware can do. A probe that logs a rate a
billion times too high (2e12 tokens/s on one CPU core) is refused as implausible, named in the plan, and
never makes a trial free; beside it a believable probe still replaces the estimate."""

from __future__ import annotations

import math

import pytest
from test_probes import MACHINE, _demo, _probes

from gpuledger.plan import plan_sweep
from gpuledger.plan.probes import PLAUSIBLE_MARGIN, physical_tokens_per_s


@pytest.mark.slow  # over ~1 s (a whole report, replay, plan or warehouse): make test runs it, make test-fast does not
@pytest.mark.parametrize("rate", [2e12, 1e30, math.inf, math.nan, 0.0, -1.0])
def test_an_implausible_probe_is_refused_named_and_makes_nothing_free(rate):
    spec, trials = _demo()
    before = plan_sweep(spec, trials, machine=MACHINE)
    rows = {t.trial_id: t for t in before.planned_trials}
    probes = _probes(spec, trials, rows, tps={8: rate, 32: rate}, startup_s=2.5, mem=0.25)
    after = plan_sweep(spec, trials, machine=MACHINE, probes=probes)
    assert all(not str(t["est_basis"]).startswith("probe ") for t in after.trials)
    assert [t["compute_s"] for t in after.trials] == [t["compute_s"] for t in before.trials]
    assert all(t["compute_s"] > 0 and t["est_cost_usd"] > 0 for t in after.trials)
    refused = [a for a in after.assumptions if a.startswith("probe refused:")]
    assert len(refused) == 2 and all("implausible" in a for a in refused), after.assumptions


def test_a_believable_probe_is_still_used():
    spec, trials = _demo()
    before = plan_sweep(spec, trials, machine=MACHINE)
    rows = {t.trial_id: t for t in before.planned_trials}
    probes = _probes(spec, trials, rows, tps={8: 4000.0, 32: 6000.0}, startup_s=2.5, mem=0.25)
    after = plan_sweep(spec, trials, machine=MACHINE, probes=probes)
    assert all(str(t["est_basis"]).startswith("probe ") for t in after.trials)
    assert not [a for a in after.assumptions if a.startswith("probe refused:")]


def test_the_physical_rate_is_peak_flops_over_flops_per_token():
    # 8B model, ~6 x 8e9 FLOPs per token, one H100 at its dense bf16 peak: ~2,060 tokens/s at 100% MFU
    h100 = physical_tokens_per_s(6 * 8e9, "H100", 1, "bf16-mixed")
    assert 1500 < h100 < 25000
    assert physical_tokens_per_s(6 * 8e9, "H100", 8, "bf16-mixed") == pytest.approx(8 * h100)
    cpu = physical_tokens_per_s(1e6, "CPU", 1, "fp32", machine=MACHINE)
    assert cpu == pytest.approx(MACHINE.matmul_gflops_one_core * 1e9 * max(MACHINE.cores, MACHINE.logical_cores) / 1e6)
    assert PLAUSIBLE_MARGIN >= 2

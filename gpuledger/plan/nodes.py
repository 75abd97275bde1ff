"""Trials of several nodes: what the plan says about them (the rule is `gpuledger.estimate.coefficients.nodes_for`;
the candidates rent one instance per node, `gpuledger.plan.candidates`), and the refusal that names the nodes
a trial needs when no instance of the chosen clouds offers a node's share of GPUs."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from gpuledger.estimate.coefficients import GPUS_PER_NODE, nodes_for


def trial_nodes(gpus: int | None, stated: int | None) -> int:
    """Returns the nodes a placed trial of `gpus` GPUs spans (`stated`: the spec's train.nodes)."""
    return nodes_for(int(gpus or 1), stated)


def with_nodes(plan, offers: pl.DataFrame, stated: int | None, requested: list[str]):
    """Returns the plan with, where a trial spans several nodes, the assumption saying how it is placed,
    timed and paid, and each such trial refused for want of an offer told which nodes it needs and the
    largest instance of each requested kind the chosen clouds have. One-node plans come back unchanged."""
    frame = plan.trials_frame
    if frame.is_empty():
        return plan
    counts = sorted({int(g) for g in frame["gpus"].drop_nulls().to_list()})
    multi = {g: nodes_for(g, stated) for g in counts if nodes_for(g, stated) > 1}
    if not multi:
        return plan
    shown = ", ".join(f"{g} GPUs on {n} nodes of {g // n}" for g, n in multi.items())
    note = (f"multi-node: {shown} (train.nodes, else ceil(GPUs / {GPUS_PER_NODE})); each node is one instance "
            "with at least its share of the GPUs, all paid whole for the whole trial (usd_per_hour is the nodes' "
            "sum); data-parallel traffic crosses the nodes at the inter-node bus bandwidth of the time model "
            "(gpuledger/estimate/coefficients.py INTERCONNECT_GBPS network); launched as one SkyPilot task with "
            "num_nodes (the agent measures on the head node)")
    largest = {} if offers.is_empty() else dict(
        offers.group_by("accelerator").agg(pl.col("accelerator_count").max()).iter_rows())
    reasons = {}
    for g, n in multi.items():
        have = "; ".join(f"the largest {a} instance has {largest[a]}" if a in largest else f"no {a} instance"
                         for a in requested) or "no instance"
        reasons[g] = (f"{g} GPUs need {n} nodes of {g // n} GPUs each: no instance in the chosen clouds/regions "
                      f"has {g // n} ({have}); more nodes of fewer GPUs: train.nodes")
    fill = pl.col("gpus").replace_strict(reasons, default=None, return_dtype=pl.String)
    frame = frame.with_columns(reason=pl.when(
        ~pl.col("feasible") & pl.col("reason").fill_null("").str.starts_with("no offer for the candidate")
        & fill.is_not_null()).then(fill).otherwise(pl.col("reason")))
    return replace(plan, trials_frame=frame, assumptions=[note, *plan.assumptions])

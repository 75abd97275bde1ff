"""Step 2 of the plan: the candidate offers (exact dominance pruning of the catalog's offers)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpuledger.plan.settings import PlanSettings


def candidate_offers(offers: pl.DataFrame, gpu_counts: Sequence[int], settings: PlanSettings) -> pl.DataFrame:
    """Returns, per (accelerator, gpus needed): the cheapest on-demand instance with at least that
    many GPUs, and per cloud the cheapest trustworthy spot instance, with its preemption rate.

    This pruning is exact: for a given accelerator and GPU count every on-demand offer takes the
    same time, so only the cheapest can win; spot offers of one cloud share a preemption rate,
    so again only the cheapest can win. Suspicious spot prices are never candidates.
    Columns: accelerator, gpus, spot, cloud, region, instance_type, accelerator_count,
    usd_per_hour, on_demand_usd_per_hour, price_source, price_as_of, price_basis (catalog |
    skypilot | override | billed: gpuledger/catalog/pricing.py), before_bill_usd_per_hour (the price
    before `settings.billed_rates` changed it, else null), preemptions_per_hour, preemption_source.
    """
    from gpuledger.catalog.floors import mark
    from gpuledger.catalog.offers import preemption_rates, spot_suspicious_expr
    from gpuledger.catalog.pricing import apply_billed

    if "price_problem" not in offers.columns or "spot_problem" not in offers.columns:
        offers = mark(offers)  # a hand-made frame: the floors over its own rows
    if "spot_suspicious" not in offers.columns:
        offers = offers.with_columns(spot_suspicious=spot_suspicious_expr())
    # prices below the floor are never planned on (gpuledger/catalog/floors.py; the plan names them)
    offers = offers.filter(pl.col("price_problem").is_null()).with_columns(
        spot_suspicious=pl.col("spot_suspicious") | pl.col("spot_problem").is_not_null())
    from gpuledger.estimate.coefficients import nodes_for

    # a trial of several nodes (gpuledger.estimate.coefficients.nodes_for) rents one instance per node with at
    # least its share of the GPUs, and pays them all; counts that do not split evenly over their nodes have none
    gpus = sorted({int(g) for g in gpu_counts})
    nodes = [nodes_for(g, settings.nodes) for g in gpus]
    counts = pl.DataFrame({"gpus": gpus, "_nodes": nodes, "_per_node": [g // n if n <= g and not g % n else 0
                                                                        for g, n in zip(gpus, nodes, strict=True)]},
                          schema={"gpus": pl.Int64, "_nodes": pl.Int64, "_per_node": pl.Int64})
    base = offers.select(
        "cloud", "region", "instance_type", "accelerator", "accelerator_count",
        pl.col("usd_per_hour_on_demand").alias("on_demand_usd_per_hour"),
        pl.col("usd_per_hour_spot"), "spot_suspicious",
        pl.col("source").alias("price_source"), pl.col("as_of").alias("price_as_of"),
        (pl.col("basis") if "basis" in offers.columns else pl.lit(None, dtype=pl.String)).alias("price_basis"),
    )
    od = base.with_columns(spot=pl.lit(False), usd_per_hour=pl.col("on_demand_usd_per_hour"))
    sp = base.filter(pl.col("usd_per_hour_spot").is_not_null() & ~pl.col("spot_suspicious")).with_columns(
        spot=pl.lit(True), usd_per_hour=pl.col("usd_per_hour_spot")
    )
    both = apply_billed(pl.concat([od, sp]).drop("usd_per_hour_spot", "spot_suspicious"), settings.billed_rates)
    joined = counts.join(both, how="cross").filter(
        (pl.col("_per_node") > 0) & (pl.col("accelerator_count") >= pl.col("_per_node")))
    if (counts["_nodes"] > 1).any():  # the price of all the trial's nodes (one node: unchanged)
        joined = joined.with_columns(
            [(pl.col(c) * pl.col("_nodes")).alias(c) for c in ("usd_per_hour", "on_demand_usd_per_hour",
                                                             "before_bill_usd_per_hour") if c in joined.columns])
    joined = joined.drop("_per_node")
    order = ["usd_per_hour", "accelerator_count", "cloud", "region", "instance_type"]
    joined = joined.sort(order)
    best_od = joined.filter(~pl.col("spot")).group_by("accelerator", "gpus", maintain_order=True).first()
    best_sp = joined.filter(pl.col("spot")).group_by("accelerator", "gpus", "cloud", maintain_order=True).first()
    cand = pl.concat([best_od, best_sp.select(best_od.columns)])
    pairs = cand.select("cloud", "accelerator").unique()
    rates = preemption_rates(pairs, override_per_hour=settings.preemption_per_hour, measured=settings.measured_preemption)
    cand = cand.join(rates, on=["cloud", "accelerator"], how="left").with_columns(
        preemptions_per_hour=pl.when(pl.col("spot")).then(pl.col("preemptions_per_hour")).otherwise(0.0),
        preemption_source=pl.when(pl.col("spot")).then(pl.col("preemption_source")),
    )
    if (cand["_nodes"] > 1).any():  # any spot node preempted stops the trial: n nodes, n times the rate
        cand = cand.with_columns(
            preemptions_per_hour=pl.col("preemptions_per_hour") * pl.col("_nodes"),
            preemption_source=pl.when(pl.col("spot") & (pl.col("_nodes") > 1)).then(
                pl.col("preemption_source") + pl.lit(" x ") + pl.col("_nodes").cast(pl.String) + pl.lit(" nodes"))
            .otherwise(pl.col("preemption_source")))
    cand = cand.drop("_nodes")
    return cand.sort("accelerator", "gpus", "spot", "usd_per_hour", "cloud")

"""Money beside the plan: the local rate, what the prices a plan uses are and how old (`price_notes`),
the price rows a plan chose (the warehouse's `prices`
table) and the warehouse rows of its trials. (The cloud equivalent of a local plan, which plans
again, is `gpuledger.plan.sweep.with_cloud_equivalent`.)"""

from __future__ import annotations

from typing import Any

from gpuledger.catalog.local import LocalRate, local_rate_for


def local_rate(spec, machine=None) -> LocalRate:
    """Returns the rate local trials of `spec` are planned (and billed) at: `local.usd_per_hour`
    when the spec sets it, else the catalog's reference rate (gpuledger/catalog/local.py)."""
    set_in_spec = "usd_per_hour" in spec.local.model_fields_set
    return local_rate_for(spec.local.usd_per_hour if set_in_spec else None)


def price_notes(table, launcher: str, today=None) -> list[str]:
    """Returns what the prices a plan uses are and how old (one line per source, in words: "prices
    (skypilot): AWS list price from SkyPilot's catalog cache, as of 2026-11-20"), and a WARNING
    naming those older than `STALE_AFTER_DAYS` with how to refresh them. `table`: the plan's trials."""
    import polars as pl

    from gpuledger.catalog.pricing import STALE_AFTER_DAYS, age_days, price_words

    if launcher == "local" or table.is_empty():
        return []
    used = (table.filter(pl.col("feasible")).select("price_basis", "price_source", "price_as_of").unique()
            .sort("price_basis", "price_source", "price_as_of", nulls_last=True))
    notes = [f"prices ({r['price_basis'] or 'given'}): {price_words(r['price_source'], r['price_as_of'])}"
             for r in used.head(8).iter_rows(named=True)]
    if used.height > 8:
        notes.append(f"... and {used.height - 8} more price sources (`gpuledger plan --json`: each trial's price_source)")
    stale = {}
    for r in used.iter_rows(named=True):
        age = age_days(r["price_as_of"], today)
        if age is not None and age > STALE_AFTER_DAYS:
            stale[price_words(r["price_source"], r["price_as_of"])] = age
    if stale:
        listed = "; ".join(f"{w} ({age} days old)" for w, age in sorted(stale.items())[:4])
        notes.append(f"WARNING {len(stale)} price source(s) this plan uses are older than {STALE_AFTER_DAYS} days: "
                     f"{listed}. Refresh: any `sky` command run online refreshes SkyPilot's catalog cache, which "
                     "gpuledger then reads; `gpuledger prices update` copies it into the project for your team; "
                     "or set your own prices in gpuledger.toml [prices] (docs/prices.md)")
    return notes


def prices_used(plan_json: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns the price rows a plan actually chose: one per distinct (cloud, region, instance type,
    accelerator, spot) among its feasible trials, with the hourly price, the on-demand price, the
    catalog source and date, and the plan's price snapshot id (the warehouse's `prices` table)."""
    seen: dict[tuple, dict[str, Any]] = {}
    for t in plan_json.get("trials", []):
        if not t.get("feasible"):
            continue
        key = (t.get("cloud"), t.get("region"), t.get("instance_type"), t.get("accelerator"), bool(t.get("spot")))
        row = seen.setdefault(key, {
            "cloud": key[0], "region": key[1], "instance_type": key[2], "accelerator": key[3], "spot": key[4],
            "usd_per_hour": t.get("usd_per_hour"), "on_demand_usd_per_hour": t.get("on_demand_usd_per_hour"),
            "source": t.get("price_source"), "as_of": t.get("price_as_of"),
            "price_snapshot": plan_json.get("price_snapshot"), "trial_gpus": t.get("gpus"), "trials": 0,
        })
        row["trials"] += 1
    return list(seen.values())


def warehouse_trial_rows(plan_json: dict[str, Any], trials) -> list[dict[str, Any]]:
    """Returns the warehouse `trials` rows of a plan (`Plan.to_json()`; one row per trial of
    `trials`, in order): the placement, estimates (est_wall_s, est_cost_usd, est_flops, est_basis,
    est_pruned_cost_usd for a sweep that prunes)
    and, for a local plan, the cloud equivalent (cloud_equiv_*). The one place a plan row becomes a
    stored trial row."""
    rows = {r["trial_id"]: r for r in plan_json.get("trials", [])}
    equivalent = plan_json.get("cloud_equivalent") or {}
    out = []
    for t in trials:
        row = rows.get(t.trial_id, {})
        eq = equivalent.get(t.trial_id) or {}
        out.append({
            "trial_id": t.trial_id, "index": t.index, "params": t.params,
            "accelerator": row.get("accelerator"), "gpus": row.get("gpus"), "cloud": row.get("cloud"),
            "region": row.get("region"), "instance_type": row.get("instance_type"), "spot": row.get("spot"),
            "est_memory_gib": row.get("est_memory_gib"), "est_wall_s": row.get("est_wall_s"),
            "est_cost_usd": row.get("est_cost_usd"), "est_flops": row.get("flops_total"),
            "est_basis": row.get("est_basis"), "feasible": row.get("feasible"), "reason": row.get("reason"),
            "cloud_equiv_accelerator": eq.get("accelerator"), "cloud_equiv_gpus": eq.get("gpus"),
            "cloud_equiv_instance_type": eq.get("instance_type"), "cloud_equiv_cloud": eq.get("cloud"),
            "cloud_equiv_spot": eq.get("spot"), "cloud_equiv_wall_s": eq.get("wall_s"), "cloud_equiv_usd": eq.get("usd"),
            "est_pruned_cost_usd": row.get("est_pruned_cost_usd"),
        })
    return out


#: The infeasible reason of a trial whose every candidate GPU kind has no price (`with_unpriced`).
NO_PRICE_REASON = "no price for {kinds} in any cloud gpuledger knows: bring your own rate (see the plan's assumptions)"
#: What a plan says about a requested GPU kind no offer prices (gpuledger invents no rate).
NO_PRICE_NOTE = ("no price for {kinds} in the bundled SkyPilot catalog, your SkyPilot catalog cache or your [prices] "
                 "(any cloud), and gpuledger invents none: bring your own rate, a gpuledger.toml [[prices.instance]] "
                 "row (cloud = \"kubernetes\", instance_type, accelerator = \"{first}\", accelerator_count, "
                 "usd_per_hour) or usd_per_gpu_hour in a [[gpus]] table, and list its cloud in resources.clouds "
                 "(docs/prices.md)")


def unpriced_kinds(accelerators, offers=None) -> list[str]:
    """Returns the requested GPU kinds that no offer prices in any cloud: `offers` (default: every offer a
    plan may pay, `gpuledger.catalog.pricing.priced_offers`)."""
    if not accelerators:
        return []
    if offers is None:
        from gpuledger.catalog.pricing import priced_offers

        offers = priced_offers()
    have = set(offers["accelerator"].unique().to_list())
    return [a for a in dict.fromkeys(accelerators) if a not in have]


def with_unpriced(plan, unpriced: list[str], requested: list[str]):
    """Returns the plan with a note naming the unpriced kinds, and, where no requested kind has a price, each
    trial refused for want of an offer saying so ("no price ...: bring your own rate") instead."""
    from dataclasses import replace

    import polars as pl

    if not unpriced:
        return plan
    kinds = ", ".join(unpriced)
    plan = replace(plan, assumptions=[NO_PRICE_NOTE.format(kinds=kinds, first=unpriced[0]), *plan.assumptions])
    if set(requested) - set(unpriced):
        return plan
    frame = plan.trials_frame.with_columns(reason=pl.when(
        ~pl.col("feasible") & pl.col("reason").fill_null("").str.starts_with("no offer for the candidate"))
        .then(pl.lit(NO_PRICE_REASON.format(kinds=kinds))).otherwise(pl.col("reason")))
    return replace(plan, trials_frame=frame)

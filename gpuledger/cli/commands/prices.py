"""`gpuledger prices [--gpu NAME] [--cloud NAME] [--json]`: what the planner would pay per offer,
each price with its basis (catalog, skypilot, override, billed), source and date; and
`gpuledger prices update [--from DIR]`: copy a SkyPilot catalog into the project (`prices/`), so a
team plans with the same prices. Nothing is downloaded (gpuledger/catalog/pricing.py)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from gpuledger.errors import UserError


def run(args: argparse.Namespace) -> int:
    if getattr(args, "prices_action", None) == "update":
        return _update(args)
    return _show(args)


def _show(args) -> int:
    from gpuledger.api import Ledger
    from gpuledger.catalog.pricing import STALE_AFTER_DAYS, age_days, committed_rates, price_words

    rows = Ledger().prices(gpu=args.gpu, cloud=args.cloud)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from gpuledger.cli.table_text import render

    def usd(x):
        return "-" if x is None else f"{x:,.4g}"

    table = [[r["cloud"], r["region"], r["instance_type"], f"{r['accelerator_count']}x {r['accelerator']}",
              usd(r["usd_per_hour"]["on_demand"]) + (" REFUSED" if r.get("price_problem") else ""),
              usd(r["usd_per_hour"]["spot"]) + (" (!)" if r["spot_suspicious"] else ""),
              r["basis"] + ("" if r["spot_basis"] in (None, r["basis"]) else f" / spot {r['spot_basis']}"), r["as_of"]]
             for r in rows]
    width = shutil.get_terminal_size((160, 24)).columns
    print(render(["cloud", "region", "instance", "GPUs", "on-demand $/h", "spot $/h", "basis", "as of"], table, width))
    sources = sorted({(r["source"], r["as_of"]) for r in rows} | {(r["spot_source"], r["spot_as_of"]) for r in rows if r["spot_source"]})
    print("\nwhere the prices come from:")
    for src, as_of in sources[:12]:
        age = age_days(as_of)
        old = f"  (WARNING: {age} days old, over {STALE_AFTER_DAYS})" if age is not None and age > STALE_AFTER_DAYS else ""
        print(f"  - {price_words(src, as_of)}{old}")
    if len(sources) > 12:
        print(f"  ... and {len(sources) - 12} more (--json shows each offer's source)")
    if any(r["spot_suspicious"] for r in rows):
        print("(!) a spot price the planner never uses (exactly 10% of on-demand, >= on-demand, below 8%, or an "
              "outlier far below the same instance type's other regions)")
    problems = [r.get("price_problem") or r.get("spot_problem") for r in rows if r.get("price_problem") or r.get("spot_problem")]
    if problems:
        print("price floor (gpuledger/catalog/floors.py):")
        for line in problems[:12]:
            print(f"  - {line}")
        if len(problems) > 12:
            print(f"  ... and {len(problems) - 12} more (--json: price_problem, spot_problem)")
    committed = committed_rates(args.cloud)
    if committed:
        print("\ncommitted-use / reserved rates (paid whether used; for capacity plans, not per-sweep prices):")
        for c in committed:
            print(f"  - {c.count}x {c.cloud} {c.instance_type}{' ' + c.region if c.region else ''} at "
                  f"${c.usd_per_hour:,.4g}/h for {c.term_months} months"
                  + (f" from {c.start} to {c.end}" if c.start else "") + f": {c.source}")
    return 0


def _catalog_root(folder: Path) -> Path:
    """Returns the `catalogs/v8` folder at or under `folder` (which may be `.sky`, `catalogs` or `v8`)."""
    for root in (folder, folder / "v8", folder / "catalogs" / "v8", folder / ".sky" / "catalogs" / "v8"):
        if root.is_dir() and any((root / c / "vms.csv").is_file() for c in _clouds()):
            return root
    raise UserError(f"{folder}: no SkyPilot catalog there (expected <cloud>/vms.csv of a catalogs/v8 folder, "
                    "e.g. ~/.sky/catalogs/v8 after SkyPilot ran online once, or a skypilot-catalog checkout)")


def _clouds():
    from gpuledger.catalog.offers import CATALOG_CLOUDS

    return CATALOG_CLOUDS


def _floored(new):
    """Returns (the rows of a catalog copy that pass the price floor, one line per price refused): an
    on-demand price refused drops its row; a spot price that is not a positive number or below the floor
    is left out (an outlier spot price is kept: the planner flags it). Peers: these rows and the bundled
    snapshot's."""
    import polars as pl

    from gpuledger.catalog.floors import mark
    from gpuledger.catalog.offers import OFFER_COLUMNS, bundled_offers

    tagged = new.select(OFFER_COLUMNS).with_columns(_new=pl.lit(True))
    peers = bundled_offers().select(OFFER_COLUMNS).with_columns(_new=pl.lit(False))
    marked = mark(pl.concat([tagged, peers], how="vertical_relaxed")).filter(pl.col("_new")).drop("_new")
    bad_spot = pl.col("spot_problem").is_not_null() & ~pl.col("spot_problem").str.contains("outlier")
    refused = (marked.filter(pl.col("price_problem").is_not_null())["price_problem"].to_list()
               + marked.filter(pl.col("price_problem").is_null() & bad_spot)["spot_problem"].to_list())
    kept = marked.filter(pl.col("price_problem").is_null()).with_columns(
        usd_per_hour_spot=pl.when(bad_spot).then(None).otherwise(pl.col("usd_per_hour_spot")))
    return kept.drop("price_problem", "spot_problem"), refused


def _update(args) -> int:
    import polars as pl

    from gpuledger.catalog.offers import OFFER_COLUMNS, cloud_label, offers_from_vms_csv, read_price_file
    from gpuledger.catalog.pricing import project_catalog_path
    from gpuledger.catalog.skypilot import catalog_dir, file_date
    from gpuledger.settings import no_project_message

    target = project_catalog_path()
    if target is None:
        raise UserError(no_project_message("its shared price folder"))
    root = _catalog_root(Path(args.source).expanduser() if args.source else catalog_dir())
    frames, said = [], []
    for cloud in _clouds():
        path = root / cloud / "vms.csv"
        if not path.is_file():
            continue
        as_of = file_date(path)
        where = str(root).replace(str(Path.home()), "~", 1)
        source = f"{cloud_label(cloud)} list price from SkyPilot's catalog (the project's copy, from {where})"
        rows = offers_from_vms_csv(path, cloud, source, as_of)
        if rows.height:
            frames.append(rows)
            said.append(f"{rows.height} {cloud_label(cloud)} offers as of {as_of}")
    if not frames:
        raise UserError(f"{root}: its catalogs list no GPU instance gpuledger knows")
    from gpuledger.files import write_text_atomic

    new = pl.concat(frames)
    new, refused = _floored(new)
    if new.is_empty():
        raise UserError(f"{root}: every price there was refused by the price floor ({refused[0]}); nothing copied")
    if target.is_file():  # keep the clouds this copy does not bring
        old = read_price_file(target)
        new = pl.concat([old.filter(~pl.col("cloud").is_in(new["cloud"].unique().to_list())), new])
    write_text_atomic(target, new.select(OFFER_COLUMNS).sort("cloud", "accelerator", "accelerator_count",
                                                             "instance_type", "region").write_csv())
    print(f"copied {', '.join(said)} from {root} into {target}")
    if refused:
        print(f"refused {len(refused)} price(s) below the price floor (gpuledger/catalog/floors.py), not copied:")
        for line in refused[:20]:
            print(f"  - {line}")
        if len(refused) > 20:
            print(f"  ... and {len(refused) - 20} more")
    print("commit it so your team plans with the same prices; `gpuledger prices` shows what the planner pays",
          file=sys.stderr)
    return 0

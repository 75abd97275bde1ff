"""Offers read from SkyPilot's own catalog cache (`~/.sky/catalogs/v8`).

`cache_offers(clouds)` reads the cached `<cloud>/vms.csv` files directly (no `sky` import, so no
refresh or download can start): what `load_offers` uses where the cache is newer than the bundled
snapshot (gpuledger/catalog/pricing.py).

`skypilot_offers(...)` returns the same columns as `gpuledger.catalog.pricing.load_offers` (source
"skypilot catalog v8 (cache)", `as_of` = the date of the cached file), so the planner can be fed
SkyPilot's current prices where a user has them. `sky` is imported lazily, and only after the
cached files were found: a cloud whose file is absent is skipped (SkyPilot would otherwise
download it), and no cache at all is a `UserError`.

How rows are read: `sky.catalog.list_accelerators(gpus_only=True, clouds=CLOUD, all_regions=True)`
gives per (instance type, region) the on-demand price; the spot price is
`sky.catalog.get_hourly_cost(instance, use_spot=True, region=REGION, zone=None)`, SkyPilot's
cheapest zone of the region (the rule SkyPilot's optimizer uses). GCP attaches GPUs to a host VM:
its `list_accelerators` rows already price GPU + host, so their spot price is taken as listed.
"""

from __future__ import annotations

import functools
import math
import os
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from gpuledger.errors import UserError

SOURCE = "skypilot catalog v8 (cache)"
#: what a price read from the cache says about itself (with the cloud's name: "AWS list price from ...")
CACHE_SOURCE = "{cloud} list price from SkyPilot's catalog cache"
CLOUDS = ("aws", "gcp", "azure", "lambda", "nebius", "vast")


def catalog_dir() -> Path:
    """Returns where SkyPilot keeps its v8 catalog (`$SKY_RUNTIME_DIR` or `~`, then `.sky/catalogs/v8`)."""
    root = os.environ.get("SKY_RUNTIME_DIR") or "~"
    return Path(os.path.expanduser(root)) / ".sky" / "catalogs" / "v8"


def cached_clouds(clouds=CLOUDS) -> dict[str, Path]:
    """Returns {cloud: path of its cached vms.csv} for the clouds whose file is in the cache."""
    base = catalog_dir()
    return {c: base / c / "vms.csv" for c in clouds if (base / c / "vms.csv").is_file()}


def file_date(path: Path) -> str:
    """Returns the UTC date (YYYY-MM-DD) a catalog file was written: SkyPilot writes a file when it
    downloads it and never touches it otherwise, so its modification time is the price's date."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).date().isoformat()


@functools.lru_cache(maxsize=16)
def _cache_file_offers(path: str, cloud: str, as_of: str, _mtime_ns: int, _size: int) -> pl.DataFrame:
    from gpuledger.catalog.offers import cloud_label, offers_from_vms_csv

    return offers_from_vms_csv(path, cloud, CACHE_SOURCE.format(cloud=cloud_label(cloud)), as_of)


def cache_offers(clouds=CLOUDS) -> dict[str, pl.DataFrame]:
    """Returns {cloud: offers rows} read from SkyPilot's catalog cache files (`load_offers`' columns;
    `as_of` = the file's date), for the clouds whose `vms.csv` is cached.

    Reads the CSV files themselves: `sky` is not imported, so nothing can trigger SkyPilot's
    refresh of a stale file (a download). A file that is not a catalog is a UserError naming it."""
    out = {}
    for cloud, path in cached_clouds(clouds).items():
        st = path.stat()
        out[cloud] = _cache_file_offers(str(path), cloud, file_date(path), st.st_mtime_ns, st.st_size)
    return out


def _num(x) -> float | None:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def skypilot_offers(
    clouds: list[str] | None = None,
    accelerators: list[str] | None = None,
    regions: list[str] | None = None,
) -> pl.DataFrame:
    """Returns GPU offers from SkyPilot's cached catalog, in `load_offers`' columns.

    Raises `UserError` when none of the asked clouds has a cached catalog file (never downloads).
    """
    wanted = [c.lower() for c in (clouds or CLOUDS)]
    files = cached_clouds(wanted)
    if not files:
        raise UserError(
            f"no SkyPilot catalog cache for {', '.join(wanted)} under {catalog_dir()}; run any "
            "`sky` price look-up once with network access (or copy a catalogs/v8 folder there), "
            "or use the bundled offers"
        )
    import sky.catalog

    from gpuledger.catalog.offers import OFFER_SCHEMA, spot_suspicious_expr

    name_filter = None
    if accelerators:
        import re

        name_filter = "^(" + "|".join(re.escape(a) for a in accelerators) + ")$"
    rows = []
    for cloud, path in files.items():
        as_of = file_date(path)
        listed = sky.catalog.list_accelerators(gpus_only=True, name_filter=name_filter, clouds=cloud,
                                               all_regions=True, case_sensitive=False)
        for infos in listed.values():
            for info in infos:
                count = _num(info.accelerator_count)
                price = _num(info.price)
                if not count or count < 1 or count != int(count) or not price:
                    continue
                if regions and info.region not in regions:
                    continue
                spot = _num(info.spot_price)
                if cloud != "gcp" and spot:  # some clouds (Lambda) assert on a spot look-up
                    try:
                        spot = sky.catalog.get_hourly_cost(info.instance_type, use_spot=True, region=info.region,
                                                           zone=None, clouds=cloud)
                    except (ValueError, AssertionError):  # no spot price listed
                        spot = None
                rows.append({
                    "cloud": cloud, "region": info.region, "instance_type": info.instance_type,
                    "accelerator": info.accelerator_name, "accelerator_count": int(count),
                    "usd_per_hour_on_demand": price,
                    "usd_per_hour_spot": spot if spot and spot > 0 else None,
                    "vcpus": _num(info.cpu_count), "memory_gib": _num(info.memory),
                    "source": SOURCE, "as_of": as_of,
                })
    df = pl.DataFrame(rows, schema=OFFER_SCHEMA) if rows else pl.DataFrame(schema=OFFER_SCHEMA)
    df = df.unique(subset=["cloud", "region", "instance_type"], keep="first", maintain_order=True)
    return df.with_columns(spot_suspicious=spot_suspicious_expr())

"""Offers: who rents which GPUs where, at what hourly price, as versioned data.

`offers.csv` (in this package) holds one row per (cloud, region, instance type) with its GPU kind
and count, on-demand and spot $/hour, host vCPUs and RAM, and the `source` and `as_of` of the
price. It was written from SkyPilot's v8 catalog of 2026-05-20 (1/2/4/8-GPU instances in every
region the catalog lists; per region the cheapest zone);
`python -m gpuledger.catalog.offers --rebuild DIR` regenerates it from a `catalogs/v8` folder.

`preemption.csv` holds the default hourly spot preemption rate per cloud (and accelerator where
there is a reason to differ), each with its source and the assumption behind it.

`gpuledger.catalog.pricing.load_offers` applies its price layers over this snapshot: newer
SkyPilot catalogs, the team's prices (gpuledger.toml `[prices]`, and a user price file,
`GPULEDGER_PRICES=path.csv` with the same columns, which overrides rows with the same
(cloud, region, instance_type) and adds new ones: local hardware, negotiated prices).

Nothing here imports SkyPilot.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import sys
from pathlib import Path

import polars as pl

from gpuledger.catalog import DATA_DIR, UnknownAccelerator, normalize_accelerator
from gpuledger.errors import UserError

OFFERS_CSV = DATA_DIR / "offers.csv"
PREEMPTION_CSV = DATA_DIR / "preemption.csv"
PRICES_ENV = "GPULEDGER_PRICES"

#: The columns of `offers.csv` and of a user price file, in order.
OFFER_COLUMNS = (
    "cloud",
    "region",
    "instance_type",
    "accelerator",
    "accelerator_count",
    "usd_per_hour_on_demand",
    "usd_per_hour_spot",
    "vcpus",
    "memory_gib",
    "source",
    "as_of",
)

OFFER_SCHEMA: dict[str, pl.DataType] = {
    "cloud": pl.String,
    "region": pl.String,
    "instance_type": pl.String,
    "accelerator": pl.String,
    "accelerator_count": pl.Int64,
    "usd_per_hour_on_demand": pl.Float64,
    "usd_per_hour_spot": pl.Float64,
    "vcpus": pl.Float64,
    "memory_gib": pl.Float64,
    "source": pl.String,
    "as_of": pl.String,
}

#: A spot price that is exactly this fraction of on-demand is a known catalog artefact: some AWS
#: regions list spot at exactly 10% of on-demand (docs/prices.md).
SUSPICIOUS_SPOT_FRACTION = 0.10
#: Relative tolerance for "exactly 10%" (catalog prices carry 4-6 significant digits).
SUSPICIOUS_SPOT_RTOL = 0.002
#: Below this fraction of on-demand a spot price is implausible (real GPU spot discounts reported
#: by AWS/GCP/Azure run 60-85%; nothing credible sells below 8%). Flagged, not trusted.
IMPLAUSIBLE_SPOT_FRACTION = 0.08

SPOT_SUSPICION_RULES = (
    f"spot exactly {SUSPICIOUS_SPOT_FRACTION:.0%} of on-demand (known AWS catalog artefact)",
    "spot >= on-demand (no discount: a placeholder, e.g. Azure ND96isr_H200_v5)",
    f"spot below {IMPLAUSIBLE_SPOT_FRACTION:.0%} of on-demand (implausible discount)",
)


def spot_suspicious_expr() -> pl.Expr:
    """Returns a boolean expression: the row's spot price is not to be trusted (see the rules)."""
    od = pl.col("usd_per_hour_on_demand")
    spot = pl.col("usd_per_hour_spot")
    ratio = spot / od
    return (
        spot.is_not_null()
        & (
            ((ratio - SUSPICIOUS_SPOT_FRACTION).abs() <= SUSPICIOUS_SPOT_FRACTION * SUSPICIOUS_SPOT_RTOL)
            | (spot >= od)
            | (ratio < IMPLAUSIBLE_SPOT_FRACTION)
        )
    ).fill_null(False)


# --------------------------------------------------------------------------------------------
# Loading


@functools.cache
def bundled_offers() -> pl.DataFrame:
    """Returns the bundled snapshot `offers.csv` as it is (no layer applied)."""
    return pl.read_csv(OFFERS_CSV, schema=OFFER_SCHEMA)


def _num_or_problem(text: str, col: str, *, required: bool, integer: bool = False) -> tuple[float | None, str | None]:
    text = (text or "").strip()
    if not text:
        return None, (f"column {col}: a value is required" if required else None)
    try:
        value = float(text)
    except ValueError:
        return None, f"column {col}: expected a number (got {text!r})"
    if not math.isfinite(value) or value < 0:
        return None, f"column {col}: must be a non-negative number (got {text!r})"
    if integer and (value != int(value) or value < 1):
        return None, f"column {col}: must be a whole number >= 1 (got {text!r})"
    return value, None


#: the largest price file read (bytes): the bundled catalog of every cloud is well below 1 MiB
MAX_PRICE_FILE_BYTES = 16 * 1024**2


def read_price_file(path: str | Path) -> pl.DataFrame:
    """Returns the rows of a user price file (the columns of `offers.csv`), validated.

    Raises UserError naming the file, line and column of every problem at once. `source` defaults
    to the file name and `as_of` to the file's modification date when left empty.
    """
    from gpuledger.safeyaml import FileRefused, read_text_file

    p = Path(path)
    try:  # named by a variable, so it may name anything: a regular file of bounded size only
        text = read_text_file(p, MAX_PRICE_FILE_BYTES).removeprefix("\ufeff")
    except FileRefused as err:
        if err.reason == "no such file":
            raise UserError(f"{path}: price file not found (set by {PRICES_ENV}); fix the path or unset it") from None
        raise UserError(f"{path}: not read as a price file ({PRICES_ENV}): "
                        f"{err.reason.replace('; give the path of a YAML file', '')}") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in OFFER_COLUMNS if c not in header and c not in ("source", "as_of", "vcpus", "memory_gib", "usd_per_hour_spot")]
    unknown = [c for c in header if c not in OFFER_COLUMNS]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown column(s) {', '.join(unknown)}")
        raise UserError(f"{path}:1: {'; '.join(parts)} (expected: {','.join(OFFER_COLUMNS)})")
    import datetime

    mtime = datetime.date.fromtimestamp(p.stat().st_mtime).isoformat()
    rows, problems = [], []
    for line_no, raw in enumerate(reader, start=2):
        row = {k.strip(): (v or "").strip() for k, v in raw.items() if k is not None}
        if None in raw:
            problems.append(f"{path}:{line_no}: more values than columns")
            continue
        errs = []
        for col in ("cloud", "region", "instance_type"):
            if not row.get(col):
                errs.append(f"column {col}: a value is required")
        acc = row.get("accelerator", "")
        if not acc:
            errs.append("column accelerator: a value is required")
        elif acc.upper() != "CPU":
            try:
                acc = normalize_accelerator(acc)
            except UnknownAccelerator as err:
                errs.append(f"column accelerator: {err}")
        count, e1 = _num_or_problem(row.get("accelerator_count", ""), "accelerator_count", required=True, integer=True)
        od, e2 = _num_or_problem(row.get("usd_per_hour_on_demand", ""), "usd_per_hour_on_demand", required=True)
        spot, e3 = _num_or_problem(row.get("usd_per_hour_spot", ""), "usd_per_hour_spot", required=False)
        vcpus, e4 = _num_or_problem(row.get("vcpus", ""), "vcpus", required=False)
        mem, e5 = _num_or_problem(row.get("memory_gib", ""), "memory_gib", required=False)
        errs += [e for e in (e1, e2, e3, e4, e5) if e]
        if errs:
            problems += [f"{path}:{line_no}: {e}" for e in errs]
            continue
        rows.append(
            {
                "cloud": row["cloud"].lower(),
                "region": row["region"],
                "instance_type": row["instance_type"],
                "accelerator": acc,
                "accelerator_count": int(count),
                "usd_per_hour_on_demand": od,
                "usd_per_hour_spot": spot,
                "vcpus": vcpus,
                "memory_gib": mem,
                "source": row.get("source") or f"user price file {p.name}",
                "as_of": row.get("as_of") or mtime,
            }
        )
    if problems:
        raise UserError("bad user price file:\n" + "\n".join(problems))
    if not rows:
        raise UserError(f"{path}: the price file has no rows (expected: {','.join(OFFER_COLUMNS)})")
    return pl.DataFrame(rows, schema=OFFER_SCHEMA)


def price_snapshot_id(offers: pl.DataFrame) -> str:
    """Returns a short id of the prices in `offers`: 12 hex of sha256 over its sorted CSV rows."""
    cols = [c for c in OFFER_COLUMNS if c in offers.columns]
    text = offers.select(cols).sort(["cloud", "region", "instance_type"]).write_csv()
    return "px-" + hashlib.sha256(text.encode()).hexdigest()[:12]


#: Spot hours of measured history needed before the measured rate replaces the default.
MEASURED_MIN_SPOT_HOURS = 50.0


@functools.cache
def preemption_table() -> pl.DataFrame:
    """Returns `preemption.csv`: cloud, accelerator (`*` = any), preemptions_per_hour, source, assumption."""
    return pl.read_csv(
        PREEMPTION_CSV,
        schema={"cloud": pl.String, "accelerator": pl.String, "preemptions_per_hour": pl.Float64, "source": pl.String, "assumption": pl.String},
    )


def preemption_rates(
    pairs: pl.DataFrame,
    *,
    override_per_hour: float | None = None,
    measured: dict[tuple[str, str], tuple[float, float]] | None = None,
) -> pl.DataFrame:
    """Returns `pairs` (cloud, accelerator) with `preemptions_per_hour` and `preemption_source`.

    Precedence: the spec's `resources.preemption_per_hour` override; else a measured rate
    (preemptions / spot hours from the warehouse, for a (cloud, accelerator) with at least
    `MEASURED_MIN_SPOT_HOURS` spot hours); else `preemption.csv` (cloud+accelerator row, then the
    cloud's `*` row, then the `*,*` row).
    """
    table = preemption_table()
    exact = table.filter(pl.col("accelerator") != "*").select(
        "cloud", "accelerator", pl.col("preemptions_per_hour").alias("_r1"), pl.col("source").alias("_s1")
    )
    per_cloud = table.filter((pl.col("accelerator") == "*") & (pl.col("cloud") != "*")).select(
        "cloud", pl.col("preemptions_per_hour").alias("_r2"), pl.col("source").alias("_s2")
    )
    anyrow = table.filter((pl.col("accelerator") == "*") & (pl.col("cloud") == "*"))
    r3 = float(anyrow["preemptions_per_hour"][0]) if anyrow.height else 0.05
    s3 = str(anyrow["source"][0]) if anyrow.height else "assumption"
    out = (
        pairs.join(exact, on=["cloud", "accelerator"], how="left")
        .join(per_cloud, on="cloud", how="left")
        .with_columns(
            preemptions_per_hour=pl.coalesce("_r1", "_r2", pl.lit(r3)),
            preemption_source=pl.concat_str(
                pl.lit("default: "), pl.coalesce("_s1", "_s2", pl.lit(s3))
            ),
        )
        .drop("_r1", "_s1", "_r2", "_s2")
    )
    if measured:
        rows = [
            {"cloud": c, "accelerator": a, "_m": n / h, "_ms": f"measured: {n:g} preemptions in {h:.0f} spot hours"}
            for (c, a), (h, n) in measured.items()
            if h >= MEASURED_MIN_SPOT_HOURS
        ]
        if rows:
            m = pl.DataFrame(rows, schema={"cloud": pl.String, "accelerator": pl.String, "_m": pl.Float64, "_ms": pl.String})
            out = out.join(m, on=["cloud", "accelerator"], how="left").with_columns(
                preemptions_per_hour=pl.coalesce("_m", "preemptions_per_hour"),
                preemption_source=pl.coalesce("_ms", "preemption_source"),
            ).drop("_m", "_ms")
    if override_per_hour is not None:
        out = out.with_columns(
            preemptions_per_hour=pl.lit(float(override_per_hour)),
            preemption_source=pl.lit("spec resources.preemption_per_hour"),
        )
    return out


# --------------------------------------------------------------------------------------------
# Rebuilding offers.csv from a SkyPilot v8 catalog folder (maintainers only)

#: GCP sells GPUs attached to a host VM: total = GPU price + host price in the same region (the
#: way SkyPilot's GCP catalog prices them). Host by (accelerator, count).
_GCP_HOSTS = {
    "A100": {n: f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)},
    "A100-80GB": {n: f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)},
    "H100": {n: f"a3-highgpu-{n}g" for n in (1, 2, 4, 8)},
    "H200": {8: "a3-ultragpu-8g"},
    "B200": {8: "a4-highgpu-8g"},
    "L4": {1: "g2-standard-4", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
    "T4": {1: "n1-highmem-4", 2: "n1-highmem-8", 4: "n1-highmem-16"},
    "V100": {1: "n1-highmem-8", 2: "n1-highmem-16", 4: "n1-highmem-32", 8: "n1-highmem-64"},
}

#: Cloud names as people write them (for price words: "AWS list price from ...").
CLOUD_LABELS = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "lambda": "Lambda", "nebius": "Nebius",
                "vast": "Vast.ai", "kubernetes": "Kubernetes", "local": "this machine"}


def cloud_label(cloud: str) -> str:
    """Returns the name people use for `cloud` (`aws` -> AWS)."""
    return CLOUD_LABELS.get(cloud, cloud)


_BUNDLED = "the SkyPilot catalog snapshot bundled with gpuledger"
#: What each cloud's bundled rows say about their price (offers.csv `source`), and their date.
_SOURCE = {
    "aws": (f"AWS list price from {_BUNDLED} (skypilot-catalog @e385a0d)", "2026-05-20"),
    "nebius": (f"Nebius list price from {_BUNDLED} (skypilot-catalog)", "2026-05-20"),
    "gcp": (f"GCP list price (GPU + host VM) from {_BUNDLED} (anycloud-sh/catalog mirror)", "2026-05-20"),
    "azure": (f"Azure list price from {_BUNDLED} (anycloud-sh/catalog mirror)", "2026-05-20"),
    "lambda": (f"Lambda list price from {_BUNDLED} (anycloud-sh/catalog mirror)", "2026-05-20"),
    "vast": (f"Vast.ai list price from {_BUNDLED} (anycloud-sh/catalog mirror; a spot price of 0.00 read as none)",
             "2026-05-20"),
}
#: The clouds whose SkyPilot `vms.csv` gpuledger reads.
CATALOG_CLOUDS = tuple(_SOURCE)


def offers_from_vms_csv(path: str | Path, cloud: str, source: str, as_of: str) -> pl.DataFrame:
    """Returns offers rows (`OFFER_COLUMNS`) from one SkyPilot v8 `<cloud>/vms.csv`: GPU instances
    with 1, 2, 4 or 8 GPUs of a kind `gpus.csv` knows; per region the cheapest zone (on-demand and
    spot each), as SkyPilot's optimizer picks it. GCP: GPU price + host VM price of the same zone.
    Raises UserError naming the file when it is not such a catalog."""
    from gpuledger.catalog import known_accelerators

    known = set(known_accelerators())
    f64 = pl.Float64
    try:
        df = pl.read_csv(path, infer_schema_length=0)
        num = [pl.col(c).cast(f64, strict=False) for c in ("AcceleratorCount", "vCPUs", "MemoryGiB", "Price", "SpotPrice")]
        df = df.with_columns(num)
    except (pl.exceptions.PolarsError, OSError) as err:
        raise UserError(f"{path}: not a SkyPilot v8 vms.csv catalog ({str(err).splitlines()[0][:160]})") from None
    if cloud == "gcp":
        gpus = df.filter(pl.col("AcceleratorName").is_in(list(_GCP_HOSTS)) & pl.col("InstanceType").is_null())
        hosts = df.filter(pl.col("InstanceType").is_not_null() & pl.col("AcceleratorName").is_null())
        mapping = pl.DataFrame(
            [{"AcceleratorName": a, "AcceleratorCount": float(n), "InstanceType": h} for a, m in _GCP_HOSTS.items() for n, h in m.items()]
        )
        g = gpus.drop("InstanceType", "vCPUs", "MemoryGiB").join(mapping, on=["AcceleratorName", "AcceleratorCount"])
        h = hosts.select("InstanceType", "AvailabilityZone", "vCPUs", "MemoryGiB", pl.col("Price").alias("HP"), pl.col("SpotPrice").alias("HS"))
        df = g.join(h, on=["InstanceType", "AvailabilityZone"]).with_columns(
            Price=pl.col("Price") + pl.col("HP"), SpotPrice=pl.col("SpotPrice") + pl.col("HS")
        )
    df = df.filter(
        pl.col("AcceleratorName").is_in(list(known))
        & pl.col("AcceleratorCount").is_in([1.0, 2.0, 4.0, 8.0])
        & pl.col("Price").is_not_null()
        & (pl.col("Price") > 0)
    )
    if cloud == "vast":
        df = df.with_columns(SpotPrice=pl.when(pl.col("SpotPrice") > 0).then(pl.col("SpotPrice")))
    agg = df.group_by("InstanceType", "Region").agg(
        pl.col("AcceleratorName").first(),
        pl.col("AcceleratorCount").first(),
        pl.col("Price").min(),
        pl.col("SpotPrice").filter(pl.col("SpotPrice") > 0).min(),
        pl.col("vCPUs").first(),
        pl.col("MemoryGiB").first(),
    )
    return agg.select(
        pl.lit(cloud).alias("cloud"),
        pl.col("Region").alias("region"),
        pl.col("InstanceType").alias("instance_type"),
        pl.col("AcceleratorName").alias("accelerator"),
        pl.col("AcceleratorCount").cast(pl.Int64).alias("accelerator_count"),
        pl.col("Price").round(5).alias("usd_per_hour_on_demand"),
        pl.col("SpotPrice").round(5).alias("usd_per_hour_spot"),
        pl.col("vCPUs").alias("vcpus"),
        pl.col("MemoryGiB").alias("memory_gib"),
        pl.lit(source).alias("source"),
        pl.lit(as_of).alias("as_of"),
    ).sort("accelerator", "accelerator_count", "instance_type", "region")


def build_offers_frame(catalog_v8: str | Path) -> pl.DataFrame:
    """Returns the bundled offers rows built from a SkyPilot `catalogs/v8` folder (`offers_from_vms_csv`
    of each cloud's vms.csv, with the bundled snapshot's source and date)."""
    root = Path(catalog_v8)
    frames = [offers_from_vms_csv(root / cloud / "vms.csv", cloud, *_SOURCE[cloud])
              for cloud in CATALOG_CLOUDS if (root / cloud / "vms.csv").exists()]
    return pl.concat(frames).sort("cloud", "accelerator", "accelerator_count", "instance_type", "region")


def _main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--rebuild":
        df = build_offers_frame(argv[1])
        df.write_csv(OFFERS_CSV)
        print(f"wrote {df.height} offers to {OFFERS_CSV}")
        return 0
    print("usage: python -m gpuledger.catalog.offers --rebuild PATH/TO/catalogs/v8", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

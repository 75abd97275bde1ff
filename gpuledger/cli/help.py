"""What `gpuledger COMMAND --help` says: a description and an example per command, and every
option's default. Applied to the parser `gpuledger.cli.build_parser` builds, so that an option added
there gets its default shown without touching this file."""

from __future__ import annotations

import argparse

#: command (or "report KIND") -> (description, example lines)
DOCS: dict[str, tuple[str, list[str]]] = {
    "init": (
        "Make DIR (default: here) a gpuledger project: gpuledger.toml, specs/ (the demo specs, a cloud LoRA "
        "example, a capacity example, the spec schema), trainers/, prefect.yaml, prefect.toml and a "
        ".gitignore line for the run-time folder .gpuledger/. Never overwrites a file: running it again "
        "only adds what is missing. Prints what it wrote and what it kept.",
        ["gpuledger init", "gpuledger init my-experiments"]),
    "demo": (
        "Run the demo on this machine's CPU: validate and plan the demo grid, prepare the demo model, run "
        "the 12-trial LoRA grid, then ASHA over the same points, and write both ROI reports. Runs in the "
        "current project (its specs/lora-grid.yaml and lora-asha.yaml, else the bundled ones), or in a "
        "new project folder ./gpuledger-demo it makes when there is none (and says so).",
        ["gpuledger demo"]),
    "doctor": (
        "Check the set-up, one line per check with how to fix it: Python and the package data, the "
        "project and its run-time folder, the warehouse (readable, writable, schema version, pending "
        "migrations), the Prefect API or its port, SkyPilot and which clouds have credential files (no "
        "network call), the GPUs NVML reports, the age of the bundled price catalog, and PostgreSQL for a "
        "team warehouse. Exit 1 when a check failed.",
        ["gpuledger doctor", "gpuledger doctor --json"]),
    "validate": (
        "Check experiment specs without running anything: every problem of a spec at once, one line each, "
        "as FILE:LINE:COL: field: message. Exit 0 when every spec is valid, 1 otherwise. A spec file must be "
        "a regular file of at most 256 KiB; a grid may have at most 10,000 trials.",
        ["gpuledger validate specs/*.yaml"]),
    "schema": (
        "Print the JSON Schema of the spec language (both kinds: sweep and capacity), or write it to "
        "specs/gpuledger.schema.json, the file the shipped specs name on their "
        "`# yaml-language-server: $schema=` line (editors then complete and check specs).",
        ["gpuledger schema --write", "gpuledger schema > my.schema.json"]),
    "estimate": (
        "Memory per GPU by component (weights, gradients, optimizer, activations, logits, KV cache), "
        "parameters and FLOPs per token of one training or inference setup, each with what it assumes. "
        "Says when the setup is beyond any GPU of the catalog or beyond the model's context.",
        ["gpuledger estimate llama-3.1-8b --method qlora --batch 4 --seq 4096",
         "gpuledger estimate path/to/config.json --method full --gpus 8 --sharding zero3 --json"]),
    "accuracy": (
        "How far the estimator's memory and training time are from measurements: median |error|, mean "
        "error and the share within ±20% (memory) or ±25% (time), per method, framework and GPU, for the "
        "public measurements shipped with gpuledger and for every run of yours in the warehouse (its "
        "trial's planned memory and wall-clock against what it measured). See docs/accuracy.md.",
        ["gpuledger accuracy", "gpuledger accuracy --json", "gpuledger accuracy --html reports/accuracy"]),
    "plan": (
        "Choose the GPU type and count, spot or on-demand, and the schedule of a sweep spec (or the "
        "replicas of a capacity spec), with the price of each choice and its source. Exit 3 when the "
        "budget guard refuses (over budget or past the deadline).",
        ["gpuledger plan specs/lora-grid.yaml", "gpuledger plan specs/llama3-8b-lora-cloud.yaml --json"]),
    "sweep": (
        "Plan, launch, measure and report a sweep: the trials run as Prefect flows (locally or as SkyPilot "
        "managed jobs), their records land in the warehouse, and the ROI report is written. A re-run of an "
        "unchanged spec continues the same sweep.",
        ["gpuledger sweep specs/lora-grid.yaml", "gpuledger sweep specs/lora-grid.yaml --dry-run"]),
    "mcp": (
        "Serve gpuledger's verbs (validate, estimate, plan, prices, sweep, status, report, sql) to an agent over "
        "the Model Context Protocol on stdin/stdout, with the views' documentation as resources. `sweep` "
        "launches only a spec the agent planned first, and is refused before anything launches when the "
        "sweeps launched by agents would spend more than [agent] budget_usd of gpuledger.toml "
        "(or GPULEDGER_AGENT_BUDGET_USD), counted from the ledger. See docs/agents.md.",
        ["gpuledger mcp", "claude mcp add gpuledger -- gpuledger mcp"]),
    "probe": (
        "Measure before you commit: run the sweep's real trial command briefly, one probe per distinct shape "
        "(GPU type and count, sharding, micro-batch, sequence length), on the planned hardware through the "
        "sweep's launcher, under the measuring agent. Each probe's start-up, steady tokens/s and peak memory "
        "are stored (runs with purpose 'probe', view v_probes; their cost is the sweep's spend) and the next "
        "plan of every trial of that shape is extrapolated from it (est_basis 'probe ID DATE'). Exit 3 when "
        "the probes would cross the sweep's budget. See docs/probes.md.",
        ["gpuledger probe specs/lora-grid.yaml", "gpuledger probe specs/lora-grid.yaml --steps 50 --trial 0"]),
    "render-task": (
        "Print the SkyPilot task YAML one trial would be launched with (nothing is launched).",
        ["gpuledger render-task specs/llama3-8b-lora-cloud.yaml --trial 3 > task.yaml"]),
    "capacity": (
        "GPUs, replicas and dollars per month to serve a traffic level within a latency SLO "
        "(a `kind: capacity` spec).",
        ["gpuledger capacity specs/chat-capacity.yaml"]),
    "report": (
        "Write a report (HTML, markdown and CSV) and print where its files are.",
        ["gpuledger report sweep lora-grid", "gpuledger report weekly --week 2026-W05"]),
    "report sweep": (
        "The ROI report of a sweep: best recipe, time- and cost-to-recipe, spend, what-if parallelism, "
        "estimated against measured.",
        ["gpuledger report sweep lora-grid", "gpuledger report sweep lora-grid --sweep-id lora-grid-1a2b3c4d"]),
    "report weekly": (
        "The weekly cost report of one ISO week (Monday to Sunday, UTC): spend by project, owner and "
        "accelerator, the week before, waste and budget burn.",
        ["gpuledger report weekly", "gpuledger report weekly --week 2026-W05 --out /tmp/reports"]),
    "report capacity": (
        "The capacity report of a `kind: capacity` spec.",
        ["gpuledger report capacity specs/chat-capacity.yaml"]),
    "sql": (
        "Run SQL against the warehouse (DuckDB). Read-only unless --write. Wide results are shown one "
        "column per line for each row (vertical) when they do not fit the terminal; --format csv or json "
        "for machines.",
        ["gpuledger sql \"select * from v_sweep_roi\"",
         "gpuledger sql \"select trial_id, params, metric_value from v_trial_results\" --format csv"]),
    "ingest": (
        "Ingest result records from a landing folder into the warehouse (what a sweep does after each "
        "trial); records that cannot be stored go to rejected/ with the reason.",
        ["gpuledger ingest", "gpuledger ingest .gpuledger/landing"]),
    "billing": (
        "The cloud's own bill next to the catalog estimate: ingest FOCUS billing exports, then compare "
        "estimated, billed and effective cost per run and sweep (views v_billed_spend, v_run_billed, "
        "v_sweep_billed, v_billing_attribution).",
        ["gpuledger billing ingest exports/*.csv.gz"]),
    "billing ingest": (
        "Ingest the cloud's own bill: FOCUS 1.0-1.2 exports (AWS Data Exports, GCP's FOCUS view, Azure "
        "Cost Management, OCI) as CSV, gzipped CSV or Parquet. Each file lands whole or not at all; the same "
        "file again changes nothing; a later delivery of the same export (same file name, or --export-name) "
        "restates the billing periods it covers. Line items are attributed to runs by their launch labels "
        "(v_billing_attribution); see v_billed_spend, v_run_billed and v_sweep_billed.",
        ["gpuledger billing ingest exports/focus-2026-02.csv.gz",
         "gpuledger sql \"select * from v_billed_spend\""]),
    "import": (
        "Bring past runs into the ledger so they feed the calibration and the reports: a W&B export (the "
        "Public API's runs with config, summary and metadata, as CSV or JSON lines, or the UI's runs table), "
        "an MLflow export (mlflow.search_runs to CSV or Parquet), a Parquet/CSV table, or an ad-hoc run's "
        "gpuledger-run-*.json. Each run needs a start, a runtime and its GPU type and count; a row without "
        "them is named with what it lacks (exit 1). Importing the same export again changes nothing. "
        "docs/import.md.",
        ["gpuledger import wandb-runs.csv --project team-llm", "gpuledger import mlflow-runs.parquet --json"]),
    "prices": (
        "What the planner would pay per offer (on-demand and spot $/h), each price with its basis: catalog "
        "(the snapshot bundled with gpuledger), skypilot (SkyPilot's catalog cache, or the project's copy, "
        "where newer), override (your discount or prices in gpuledger.toml [prices], or $GPULEDGER_PRICES) "
        "or billed (the effective rate of your FOCUS bill, where at least prices.billed_min_gpu_hours back "
        "it), with its source and date. Nothing is downloaded. See docs/prices.md.",
        ["gpuledger prices --gpu H100 --cloud aws", "gpuledger prices --gpu H100 --json"]),
    "prices update": (
        "Copy a SkyPilot catalog (default: SkyPilot's own cache, ~/.sky/catalogs/v8, refreshed whenever "
        "SkyPilot runs online) into the project's prices/catalog.csv, so a team that commits it plans with "
        "the same prices. A newer SkyPilot cache still wins on each machine.",
        ["gpuledger prices update", "gpuledger prices update --from ~/skypilot-catalog/catalogs/v8"]),
    "warehouse": (
        "The team warehouse (DuckLake: a PostgreSQL catalog and Parquet files on a shared path or S3), "
        "selected by GPULEDGER_WAREHOUSE=ducklake:postgres:<connection string> and "
        "GPULEDGER_WAREHOUSE_DATA=<path or s3://...>.",
        ["gpuledger warehouse push .gpuledger/ledger.duckdb"]),
    "warehouse push": (
        "Copy every table of a local DuckDB ledger FILE into the team warehouse that GPULEDGER_WAREHOUSE "
        "names, idempotently: rows are replaced by key, so pushing twice, or from two processes at once, "
        "duplicates nothing (overlapping writers retry).",
        ["GPULEDGER_WAREHOUSE='ducklake:postgres:dbname=ledger host=db' GPULEDGER_WAREHOUSE_DATA=/shared/ledger "
         "gpuledger warehouse push .gpuledger/ledger.duckdb"]),
    "warehouse maintain": (
        "Keep the warehouse small and fast: metric points of runs older than --metrics-older-than days are "
        "downsampled to one point per --every (mean, min and max kept; final metrics, runs and costs "
        "untouched); on DuckLake, inlined rows are flushed to Parquet, adjacent small files merged, snapshots "
        "older than --expire-older-than days expired and their files deleted. Prints data files and metric "
        "rows before and after. The deployment warehouse-maintenance/weekly runs it on Sundays.",
        ["gpuledger warehouse maintain", "gpuledger warehouse maintain --metrics-older-than 90 --every 20 --json"]),
    "warehouse ingest": (
        "Store the result records that sweeps with [warehouse] ingest = \"service\" landed (on object storage or "
        "a folder: [warehouse] landing) in batches, one commit each, idempotent by record hash; conflicts are "
        "retried with backoff. Landed files are removed (or moved to rejected/ with the reason) only after their "
        "commit. The deployment ingest/team runs it every 30 s; v_ingest_batches records lag and batch sizes.",
        ["gpuledger warehouse ingest", "gpuledger warehouse ingest --seconds 600 --json"]),
    "export": (
        "Export every warehouse table as Parquet files.",
        ["gpuledger export --parquet /tmp/ledger"]),
    "serve": (
        "Start a local Prefect server, a worker and the deployments of prefect.yaml (Ctrl-C stops).",
        ["gpuledger serve", "PREFECT_API_URL=http://prefect.internal:4200/api gpuledger serve --worker-only --worker-limit 2"]),
    "status": (
        "Each sweep's state (running, awaiting_approval, succeeded, ...) and its spend so far: accrued_usd = "
        "its stored runs' measured cost + what its running trials have accrued (price x elapsed, written every "
        "money.accrue_interval_s); a sweep that ended states its final spend, runs and end time instead. A "
        "sweep waiting for approval says who must approve and how. Then every "
        "budget envelope's window: spent, reserved, left (docs/budgets.md).",
        ["gpuledger status", "gpuledger status lora-grid --json"]),
    "approve": (
        "Resume a sweep whose reservation passed an envelope's soft threshold: its paused Prefect flow run "
        "continues and launches. Refused when the envelope names approvers and you are not one of them.",
        ["gpuledger approve lora-grid", "gpuledger approve lora-grid-1a2b3c4d --note 'ok for the paper'"]),
    "reject": (
        "End a sweep that waits for approval: its flow run ends Failed (exit 3 of its `gpuledger sweep`) "
        "without launching, and its reservation is released.",
        ["gpuledger reject lora-grid --note 'use the smaller model first'"]),
}


#: help of options that their `add_argument` left without one (by option string)
OPTION_HELP = {
    "--json": "print JSON instead of text",
    "--out": "folder to write the report into (default: reports/<kind>/...)",
    "--launcher": "override the spec's launcher",
    "--max-parallel": "override resources.max_parallel: trials running at once",
    "--dry-run": "plan and print what would be launched; launch nothing",
    "--method": "what is run: full fine-tuning, LoRA, QLoRA, GRPO/PPO or inference",
    "--precision": "weights/compute precision",
    "--optimizer": "optimizer whose states are held",
    "--grad-ckpt": "gradient checkpointing (activation recomputation)",
    "--flash-attn": "flash attention (no seq x seq score matrix)",
    "--lora-r": "LoRA rank",
    "--gpus": "GPUs the model is spread over",
    "--sharding": "how state is split across --gpus",
    "--prompt-len": "GRPO/PPO or inference: prompt tokens",
    "--completion-len": "GRPO/PPO or inference: generated tokens",
    "--group-size": "GRPO: completions per prompt",
    "--format": "output format",
    "--parquet": "folder to write one Parquet file per table into",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and example's line breaks and shows every option's default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (default is None or default is False or default is argparse.SUPPRESS or "%(default)" in text
                or action.option_strings == [] and action.nargs in ("+", "*")):
            return text
        return f"{text} (default: %(default)s)".strip()


def _wrap(text: str, width: int = 88) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def document(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Gives each command of `parser` its description, example and shown defaults; returns `parser`."""
    parser.formatter_class = HelpFormatter
    parser.epilog = "Run `gpuledger COMMAND --help` for a command's options and an example."

    def apply(name: str, sub: argparse.ArgumentParser) -> None:
        sub.formatter_class = HelpFormatter
        description, examples = DOCS.get(name, (sub.description or "", []))
        sub.description = _wrap(description)
        if examples:
            sub.epilog = "example" + ("s" if len(examples) > 1 else "") + ":\n" + "\n".join(f"  {e}" for e in examples)
        for action in sub._actions:
            if not action.help and action.option_strings:
                action.help = next((OPTION_HELP[o] for o in action.option_strings if o in OPTION_HELP), " ")
        for kind, inner in _subparsers(sub).items():
            apply(f"{name} {kind}", inner)

    for name, sub in _subparsers(parser).items():
        apply(name, sub)
    return parser

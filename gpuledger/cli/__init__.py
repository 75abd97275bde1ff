"""The `gpuledger` command: a thin layer over the library.

Imports are lazy: `validate`, `schema`, `estimate`, `plan` and `sql` never import Prefect or
SkyPilot. Each sub-command lives in `gpuledger/cli/commands/<name>.py` as `run(args) -> int`.
A `UserError` becomes one message on stderr and its exit code; an `OSError` (a path that cannot be
read or written) one message and exit 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import math
import re
import sys

from gpuledger import __version__, vocabulary


class _Parser(argparse.ArgumentParser):
    """Every parser of the CLI: an option is read only by its full name (allow_abbrev=False: argparse's prefix
    matching read `estimate --sequence 8` as --sequence-parallel 8, silently); the aliases a command takes
    are explicit (`estimate --gpu`, `prices --accelerator`)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse exits 2 on bad usage; say what to do
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n(see `{self.prog} --help`)\n")


def _whole_number(text: str) -> int:
    """Returns the whole number of `2048`, `1_000`, `1e9`, `20M` or `1.5B` (`gpuledger.spec.types.parse_count`,
    the one reading of counts that specs use too; a leading minus kept); ArgumentTypeError otherwise."""
    from gpuledger.spec.types import parse_count

    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    try:
        value = sign * parse_count(body.lstrip("-") if sign < 0 else body)
    except ValueError as err:
        msg = str(err)
        raise argparse.ArgumentTypeError(msg if "too large" in msg else f"expected a whole number, got {text!r}"
                                         f" (e.g. 20000000, 20_000_000, 2e7, 20M)") from None
    return value


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parallel(text: str) -> int:
    from gpuledger.spec.models import MAX_PARALLEL as most

    value = _positive_int(text)
    if value > most:
        raise argparse.ArgumentTypeError(f"at most {most} trials run at once (resources.max_parallel), got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > 86_400:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 86400 (one day), got {text}")
    return value


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or value > 36_500:
        raise argparse.ArgumentTypeError(f"must be from 0 to 36500 days, got {text}")
    return value


def _every(text: str) -> int:
    value = _whole_number(text)
    if not 2 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be from 2 to 1000000 points, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or value > 7 * 86400:
        raise argparse.ArgumentTypeError(f"must be from 0 to 604800 seconds, got {text}")
    return value


def _count_of(what: str, most: int):
    """An argparse type: a whole number of `what` from 1 to `most`."""
    def check(text: str) -> int:
        value = _whole_number(text)
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"must be from 1 to {most} {what}, got {value}")
        return value

    return check


def _index(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (trials are numbered from 0), got {value}")
    return value


def _week(text: str) -> str:
    from gpuledger.errors import UserError
    from gpuledger.report.weeks import check_week

    try:
        return check_week(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _sweep_name(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a sweep name (the spec's name: lowercase letters, "
                                         "digits and '-')")
    return text


def _sweep_id(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}-[0-9a-f]{8}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a sweep id (NAME-xxxxxxxx, as `gpuledger plan` prints)")
    return text


def _prefect_port(text: str) -> int:
    from gpuledger.flows.server import port_from

    try:
        return port_from(text, "port")  # type: ignore[return-value]
    except Exception as err:  # UserError -> argparse's one-line message
        raise argparse.ArgumentTypeError(str(err)) from None


@contextlib.contextmanager
def _words_translated_once():
    """While the parser is built, argparse looks up the translation of each of its own words once.

    argparse asks gettext for "positional arguments", "options", "show this help message and exit"...
    at every parser it makes, and gettext, finding no catalogue, searches the locale folders again each
    time (stat calls): about 100 look-ups for gpuledger's 34 parsers, 11-14 ms of every command's
    start on the 2-core dev machine (issue 38). The same words, the same answers, asked once; argparse's
    own function is put back after."""
    plain = getattr(argparse, "_", None)
    if not callable(plain):  # an argparse without the module-level `_`: nothing to do
        yield
        return
    argparse._ = functools.cache(plain)
    try:
        yield
    finally:
        argparse._ = plain


class _Unbuilt:
    """A sub-command's parser that is not built: every call on it (add_argument, add_subparsers,
    add_mutually_exclusive_group, ...) is accepted and does nothing, and returns another one."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self

    def __setattr__(self, name: str, value) -> None:  # `rsub.required = True` on an unbuilt one
        pass


class _OnlyCommand:
    """The sub-command action of `build_parser(command)`: builds the parser of `command` only and hands
    out `_Unbuilt` for the others, so a command's start-up does not pay for the 34 parsers it never
    uses (each `add_argument` makes a HelpFormatter: ~25 ms of every start on the 2-core machine,
    issue 38). `built` says whether `command` was one of them."""

    def __init__(self, action, command: str) -> None:
        self._action, self._command, self.built = action, command, False
        self.required = True

    def add_parser(self, name: str, **kwargs):
        if name != self._command:
            return _Unbuilt()
        self.built = True
        return self._action.add_parser(name, **kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser | None:
    """Returns the CLI's parser: every command's (`--help`, an unknown command), or with `command` the
    one command a run names, built alone (the same parser for that command; None when no command of
    that name exists)."""
    with _words_translated_once():
        return _build_parser(command)


def _command_of(argv: list[str]) -> str | None:
    """Returns the command `argv` names when it starts with one (not an option such as --help)."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def _build_parser(command: str | None = None) -> argparse.ArgumentParser | None:
    p = _Parser(prog="gpuledger", description="Plan, launch, measure and account for GPU experiments.")
    p.add_argument("--version", action="version", version=f"gpuledger {__version__}")
    action = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    action.required = True
    sub = action if command is None else _OnlyCommand(action, command)

    s = sub.add_parser("init", help="make a folder a gpuledger project (never overwrites a file)")
    s.add_argument("dir", nargs="?", default=".", metavar="DIR")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("demo", help="run the demo: a LoRA grid, then ASHA over the same points, both reports")

    s = sub.add_parser("doctor", help="check the set-up: one line per check with a fix; exit 1 on a failure")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("validate", help="check experiment specs; one line per problem")
    s.add_argument("specs", nargs="+", metavar="SPEC")
    s.add_argument("--json", action="store_true", help="one JSON object per spec (path, ok, problems)")

    s = sub.add_parser("schema", help="print (or --write) the JSON Schema of the spec language")
    s.add_argument("--write", action="store_true",
                   help="write specs/gpuledger.schema.json (the file the shipped specs name) instead of printing")

    s = sub.add_parser("estimate", help="memory, compute and time one training/inference setup needs")
    s.add_argument("model", metavar="MODEL", help="registry name or path to an HF config.json")
    s.add_argument("--method", default="lora", type=vocabulary.method_name, choices=vocabulary.METHODS)
    s.add_argument("--precision", default="bf16", type=vocabulary.precision_name, choices=vocabulary.PRECISIONS)
    s.add_argument("--optimizer", default="adamw",
                   choices=vocabulary.OPTIMIZERS)
    s.add_argument("--batch", type=_positive_int, default=1, help="micro-batch per GPU")
    s.add_argument("--seq", type=_positive_int, default=2048, help="sequence length (tokens)")
    s.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None,
                   help="gradient checkpointing (default: on, or the stack's own habit for megatron, nemo, "
                        "torchtitan, nanotron, llm-foundry)")
    s.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=True)
    s.add_argument("--lora-r", type=_positive_int, default=16)
    s.add_argument("--lora-targets", default="q,v", help="comma list (q,k,v,o,gate,up,down) or all-linear")
    s.add_argument("--gpus", type=_positive_int, default=1)
    s.add_argument("--sharding", default="none", choices=vocabulary.SHARDINGS)
    s.add_argument("--prompt-len", type=_positive_int, default=None)
    s.add_argument("--completion-len", type=_positive_int, default=None)
    s.add_argument("--group-size", type=_positive_int, default=None)
    s.add_argument("--framework", default="hf", type=vocabulary.framework_name, choices=vocabulary.FRAMEWORK_NAMES,
                   metavar="{" + ",".join(vocabulary.FRAMEWORKS) + ",axolotl,unsloth,...}",
                   help="training stack: its memory habits and speed (default hf); an engine, or a stack built on "
                        "one (" + ", ".join(vocabulary.FRAMEWORK_STACKS) + "), timed and sized as its engine "
                        "(Unsloth's LoRA/QLoRA steps with its own kernels' measured speed-up)")
    s.add_argument("--device", default="gpu", choices=vocabulary.DEVICES,
                   help="cpu: estimate resident memory of a CPU run (the local demo)")
    if not isinstance(s, _Unbuilt):
        from gpuledger.cli.commands.estimate import add_stack_options

        add_stack_options(s)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("accuracy", help="the estimator's error per method, framework and GPU: public rows and your runs")
    s.add_argument("--json", action="store_true")
    s.add_argument("--html", default=None, metavar="DIR", help="also write accuracy.html (+ .md, CSV) under DIR")
    s.add_argument("--warehouse", default=None, help="warehouse file to read your runs from (default: the project's)")

    s = sub.add_parser("plan", help="choose GPUs, spot/on-demand and schedule; exit 3 over budget")
    s.add_argument("spec", metavar="SPEC")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("sweep", help="plan, launch, measure and report a sweep")
    s.add_argument("spec", metavar="SPEC")
    s.add_argument("--launcher", choices=vocabulary.LAUNCHERS, default=None)
    s.add_argument("--max-parallel", type=_parallel, default=None, metavar="N")
    s.add_argument("--dry-run", action="store_true")
    s.add_argument("--force", action="store_true", help="launch even when the budget guard refuses")
    s.add_argument("--new", action="store_true",
                   help="start a fresh sweep of this spec (a new sweep id) instead of continuing its last one")
    s.add_argument("--json", action="store_true", help="print the sweep's summary as JSON (progress goes to stderr)")
    s.add_argument("--prefect-port", type=_prefect_port, default=None, metavar="PORT",
                   help="the port of this project's `gpuledger serve` (default: $GPULEDGER_PREFECT_PORT, "
                        "else prefect.toml's 4200)")

    s = sub.add_parser("probe", help="run each shape of a sweep briefly and measure it; the next plan uses it")
    s.add_argument("spec", metavar="SPEC")
    s.add_argument("--trial", action="append", default=None, metavar="ID",
                   help="probe only the shape of this trial (id, or index from 0; repeatable)")
    limit = s.add_mutually_exclusive_group()
    limit.add_argument("--steps", type=_positive_int, default=None, metavar="N",
                       help="stop each probe after N logged training steps")
    limit.add_argument("--seconds", type=_positive_float, default=None, metavar="S",
                       help="stop each probe S seconds after its first training step (default when neither "
                            "is given: gpuledger.runtime.probe.DEFAULT_PROBE_SECONDS, 10)")
    s.add_argument("--launcher", choices=["local", "skypilot"], default=None)
    s.add_argument("--max-parallel", type=_parallel, default=None, metavar="N")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("render-task", help="print the SkyPilot task YAML that would be launched")
    s.add_argument("spec", metavar="SPEC")
    s.add_argument("--trial", type=_index, default=0, metavar="N", help="trial index (0-based)")

    s = sub.add_parser("capacity", help="GPUs and $/month to serve a traffic level within an SLO")
    s.add_argument("spec", metavar="SPEC")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("report", help="write a sweep ROI or weekly cost report")
    rsub = s.add_subparsers(dest="report_kind", metavar="KIND", parser_class=_Parser)
    rsub.required = True
    r = rsub.add_parser("sweep", help="ROI report of the latest sweep of NAME")
    r.add_argument("name", metavar="NAME", type=_sweep_name, help="the sweep's name (the spec's name:)")
    r.add_argument("--sweep-id", default=None, type=_sweep_id, help="a given run of it (default: the latest)")
    r.add_argument("--out", default=None, metavar="DIR")
    r.add_argument("--json", action="store_true")
    r = rsub.add_parser("weekly", help="weekly cost report")
    r.add_argument("--week", default=None, metavar="YYYY-Www", type=_week, help="ISO week, e.g. 2026-W05; without it the report picks the week and says which")
    r.add_argument("--out", default=None, metavar="DIR")
    r.add_argument("--json", action="store_true")
    r = rsub.add_parser("capacity", help="capacity report of a capacity spec")
    r.add_argument("spec", metavar="SPEC")
    r.add_argument("--out", default=None, metavar="DIR")
    r.add_argument("--json", action="store_true")

    s = sub.add_parser("sql", help="run SQL against the warehouse (read-only unless --write)")
    s.add_argument("query", metavar="QUERY")
    s.add_argument("--format", choices=["table", "csv", "json"], default="table")
    s.add_argument("--write", action="store_true", help="allow statements that change the warehouse")

    s = sub.add_parser("ingest", help="ingest result records from a landing folder")
    s.add_argument("landing", nargs="?", default=None, metavar="DIR")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("billing", help="the cloud's own bill: ingest FOCUS billing exports")
    bsub = s.add_subparsers(dest="billing_action", metavar="ACTION", parser_class=_Parser)
    bsub.required = True
    b = bsub.add_parser("ingest", help="ingest FOCUS 1.0-1.2 exports (CSV, CSV.gz, Parquet)")
    b.add_argument("paths", nargs="+", metavar="PATH")
    b.add_argument("--export-name", default=None, metavar="NAME",
                   help="what identifies a re-delivery of the same export (default: each file's name)")
    b.add_argument("--json", action="store_true")

    s = sub.add_parser("import", help="past runs (a W&B or MLflow export, a Parquet table) into the ledger")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--format", default=None, choices=("wandb", "mlflow", "table", "record"),
                   help="the export's shape (default: told from its columns)")
    s.add_argument("--project", default=None, metavar="NAME", help="the project the runs belong to (default: "
                   "the file's name; MLflow: the experiment id)")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("prices", help="what the planner would pay per offer, with each price's basis and date")
    s.add_argument("--gpu", "--accelerator", dest="gpu", default=None, metavar="KIND",
                   help="only offers of this GPU kind (e.g. H100); --accelerator is the same option, as in estimate")
    s.add_argument("--cloud", default=None, metavar="NAME", help="only offers of this cloud (e.g. aws)")
    s.add_argument("--json", action="store_true")
    psub = s.add_subparsers(dest="prices_action", metavar="ACTION", parser_class=_Parser)
    u = psub.add_parser("update", help="copy a SkyPilot catalog into the project's prices/ folder")
    u.add_argument("--from", dest="source", default=None, metavar="DIR",
                   help="a catalogs/v8 folder (default: SkyPilot's cache, ~/.sky/catalogs/v8)")

    s = sub.add_parser("warehouse", help="the team warehouse: push a local ledger into DuckLake")
    wsub = s.add_subparsers(dest="warehouse_action", metavar="ACTION", parser_class=_Parser)
    wsub.required = True
    w = wsub.add_parser("push", help="copy a local DuckDB ledger into the warehouse GPULEDGER_WAREHOUSE names")
    w.add_argument("file", metavar="FILE")
    w.add_argument("--json", action="store_true")
    w = wsub.add_parser("maintain", help="compact data files, expire old snapshots, downsample old metric points")
    w.add_argument("--metrics-older-than", dest="metrics_older_than_days", type=_days, default=30.0, metavar="DAYS",
                   help="downsample metric points of runs that ended this many days ago")
    w.add_argument("--every", type=_every, default=10, metavar="N",
                   help="keep one point (mean, min, max) per N raw points")
    w.add_argument("--expire-older-than", dest="expire_older_than_days", type=_days, default=7.0, metavar="DAYS",
                   help="DuckLake: expire snapshots older than this many days")
    w.add_argument("--json", action="store_true")
    w = wsub.add_parser("ingest", help="store the result records sweeps landed for the ingest service, in batches")
    w.add_argument("--seconds", type=_seconds, default=0.0, metavar="S",
                   help="keep polling the landing this long (0: until nothing is waiting)")
    w.add_argument("--batch-records", type=_count_of("records", 100_000), default=None, metavar="N",
                   help="at most N records per batch (one commit each; default 2000)")
    w.add_argument("--landing", default=None, metavar="URL_OR_DIR",
                   help="the landing (default: [warehouse] landing, else beside the data path)")
    w.add_argument("--json", action="store_true")

    s = sub.add_parser("export", help="export every warehouse table")
    s.add_argument("--parquet", required=True, metavar="DIR")
    s.add_argument("--json", action="store_true")

    sub.add_parser("mcp", help="Model Context Protocol server over stdio: the verbs for agents, within a budget")

    s = sub.add_parser("status", help="each sweep's state and spend so far (accrued), and the budget envelopes")
    s.add_argument("sweep", nargs="?", default=None, metavar="SWEEP", help="one sweep, by name or id (default: the latest)")
    s.add_argument("--json", action="store_true")
    for verb, what in (("approve", "resume a sweep that waits for approval past an envelope's soft threshold"),
                       ("reject", "end a sweep that waits for approval; its reservation is released")):
        s = sub.add_parser(verb, help=what)
        s.add_argument("sweep", metavar="SWEEP", help="the waiting sweep, by name or id")
        s.add_argument("--note", default=None, metavar="TEXT", help="why (recorded with the decision)")
        s.add_argument("--json", action="store_true")

    s = sub.add_parser("serve", help="local Prefect server + worker + the deployments of prefect.yaml")
    s.add_argument("--port", type=_prefect_port, default=None, metavar="PORT",
                   help="listen on this port (default: $GPULEDGER_PREFECT_PORT, else prefect.toml's 4200); "
                        "written into prefect.toml, so the prefect commands of this project follow it")
    s.add_argument("--metrics-port", type=_prefect_port, default=None, metavar="PORT",
                   help="also serve Prometheus metrics at http://127.0.0.1:PORT/metrics (default: none)")
    s.add_argument("--worker-only", action="store_true",
                   help="only a worker, for the Prefect server PREFECT_API_URL names (a team's; several may run)")
    s.add_argument("--worker-limit", type=_count_of("flow runs", 1000), default=None, metavar="N",
                   help="with --worker-only: the most flow runs this worker runs at once (default: no limit)")
    if command is not None and not sub.built:
        return None
    from gpuledger.cli.help import document

    return document(p)


#: commands whose module is not named like them (`import` is a Python keyword)
_MODULES = {"import": "imports"}


#: the prompt's quick commands: they start no subprocess and use no pydantic plugin, so pydantic is told
#: not to scan every installed package's entry points for plugins (a tenth of `validate`'s start-up in
#: a venv with Prefect and SkyPilot; benchmarks/cli_startup.py); a user's own setting is kept
_NO_PYDANTIC_PLUGINS = frozenset({"validate", "estimate", "sql", "schema"})


#: commands that only read and print: run as a process of their own they leave without the interpreter's
#: teardown (freeing ~300 modules, pydantic's validators and 31,000 objects: 0.04-0.1 s, about a fifth of
#: `validate`'s start to exit, benchmarks/cli_startup.py); their output is flushed first, nothing else is open
_LEAVE_AT_ONCE = frozenset({"validate", "estimate"})


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command_of(words)) or build_parser()  # an unknown command: the whole list
    args, extra = parser.parse_known_args(words)
    if extra:  # said by the (sub-)command's own parser: its usage and `--help`, not the command list's
        _named_parser(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    own_process = argv is None  # the `gpuledger` command itself, not a caller's `main([...])`
    if args.command in _NO_PYDANTIC_PLUGINS and own_process:
        import os

        os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    code = _run(args)
    if args.command in _LEAVE_AT_ONCE and own_process:
        _leave(code)
    return code


def _named_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """Returns the deepest parser `args` names: `gpuledger report weekly`'s, not `gpuledger`'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _named_parser(chosen, args)
    return parser


def _leave(code: int) -> None:
    """Flushes stdout and stderr and ends the process with `code`, skipping the interpreter's teardown."""
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that left (`| head`), or a closed stream
            stream.flush()
    os._exit(code)


def _run(args) -> int:
    """Runs the parsed command; returns its exit code (a user's problem: one line on stderr, no traceback)."""
    name = _MODULES.get(args.command, args.command.replace("-", "_"))
    from gpuledger.errors import UserError

    try:
        module = importlib.import_module(f"gpuledger.cli.commands.{name}")
        return int(module.run(args) or 0)
    except UserError as err:
        print(f"gpuledger {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # `gpuledger sql ... | head` (an OSError: caught first)
        return 0
    except OSError as err:  # a path that cannot be read or written: the user's environment, not a bug
        where = f" {err.filename}" if getattr(err, "filename", None) else ""
        print(f"gpuledger {args.command}: cannot use{where}: {err.strerror or err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gpuledger {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

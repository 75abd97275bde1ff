"""`gpuledger estimate MODEL [...]`: per-GPU memory by component, params, FLOPs per token."""

from __future__ import annotations

import argparse
import json

from gpuledger import vocabulary
from gpuledger.errors import UserError, validation_message

_ROWS = (("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer"),
         ("optimizer_temporaries", "optim. temp"),
         ("activations", "activations"), ("logits", "logits"), ("kv_cache", "kv_cache"), ("buffers", "buffers"))


def _dynamic_sampling(text: str) -> dict:
    """`--dynamic-sampling pass_rate=0.7,max_num_gen_batches=10`: its fields (checked by the Workload)."""
    from gpuledger.estimate.dynamic_sampling import parse_option

    try:
        return parse_option(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


#: optimised-stack options: (flag, Workload field, argparse kwargs); each effect is documented on the
#: Workload field and in docs/CONTRACTS.md (estimator).
STACK_OPTIONS = (
    ("--compile", "compile", dict(action="store_true", help="torch.compile: pointwise intermediates recomputed")),
    ("--activation-offload", "activation_offload",
     dict(action="store_true", help="saved activations offloaded to CPU (torchtune enable_activation_offloading)")),
    ("--chunked-ce", "chunked_ce", dict(action=argparse.BooleanOptionalAction, default=None,
                                        help="chunked cross-entropy (default: the framework's habit)")),
    ("--double-quant", "double_quant", dict(action=argparse.BooleanOptionalAction, default=None,
                                            help="4-bit base with double quantisation (bnb_4bit_use_double_quant; "
                                                 "default: the framework's habit)")),
    ("--eval-batch", "eval_batch", dict(type=int, default=None,
                                        help="sequences per GPU of the evaluation between steps "
                                             "(per_device_eval_batch_size): its peak counted as a phase")),
    ("--eval-steps", "eval_steps", dict(type=float, default=None,
                                        help="evaluate every N optimizer steps (eval_steps; below 1: that fraction "
                                             "of the run's steps), with --eval-samples: charged in the time")),
    ("--eval-samples", "eval_samples", dict(type=int, default=None,
                                            help="samples each evaluation runs forward (the eval split's size)")),
    ("--fused-ce", "fused_ce", dict(action="store_true", help="fused linear cross-entropy (Liger use_liger_kernel, "
                                    "cut-cross-entropy): the full logits never materialised")),
    ("--optimizer-in-bwd", "optimizer_in_bwd",
     dict(action=argparse.BooleanOptionalAction, default=None,
          help="optimizer step fused into backward: gradients freed per parameter (default: the framework's habit)")),
    ("--grad-accum", "grad_accum", dict(type=int, default=None,
                                        help="micro-batches per optimizer step (default: the framework's habit)")),
    ("--zero-bucket", "zero_bucket_elems",
     dict(type=int, default=None, help="DeepSpeed reduce/all-gather bucket size in elements (default hidden^2)")),
    ("--ref-model", "ref_model", dict(default="auto", choices=vocabulary.REF_MODELS,
                                      help="GRPO/PPO reference model placement")),
    ("--generation", "generation", dict(default="hf", choices=vocabulary.GENERATIONS,
                                        help="GRPO/PPO rollout engine")),
    ("--vllm-gpu-util", "vllm_gpu_memory_utilization",
     dict(type=float, default=0.3, help="vllm_colocate: share of the GPU vLLM pre-allocates")),
    ("--gpu-memory", "gpu_memory_gib", dict(type=float, default=None, help="GPU memory in GiB (vllm_colocate share)")),
    ("--dynamic-sampling", "dynamic_sampling",
     dict(type=_dynamic_sampling, default=None, metavar="pass_rate=P|kept_fraction=Q[,gen_batch_size=N,...]",
          help="GRPO: DAPO's dynamic sampling (verl algorithm.filter_groups): groups with all-equal rewards dropped, "
               "generation batches repeated until the step's prompts are kept (max_num_gen_batches=N caps them; "
               "docs/rl.md)")),
    ("--checkpointing", "checkpointing", dict(default=None, choices=vocabulary.CHECKPOINTINGS,
                                              help="activation checkpointing mode (default: from --grad-ckpt)")),
    ("--packing", "packing", dict(action=argparse.BooleanOptionalAction, default=None,
                                  help="sequences packed (or padded per micro-batch); default: the framework's habit")),
    ("--padding", "padding", dict(default=None, choices=vocabulary.PADDINGS,
                                  help="unpacked runs: pad each micro-batch to its longest sample (default, TRL and "
                                       "the Trainer's collators), every sample to --seq (max_length), or packed (= --packing)")),
    ("--sample-tokens", "sample_tokens",
     dict(type=int, default=None, help="mean real tokens per sample before padding (unpacked runs; default: "
                                       "a typical instruction set's, 250, cut at --seq)")),
    ("--tensor-parallel", "tensor_parallel", dict(type=int, default=None, help="tensor-parallel degree (default 1)")),
    ("--pipeline-parallel", "pipeline_parallel", dict(type=int, default=None, help="pipeline-parallel degree (default 1)")),
    ("--nodes", "nodes", dict(type=int, default=None, help="nodes the GPUs span (default: 8 GPUs per node)")),
    ("--offload", "offload", dict(default=None, choices=vocabulary.OFFLOADS,
                                  help="CPU offload: optimizer (ZeRO offload_optimizer) or params (ZeRO-3 "
                                       "offload_param / FSDP cpu_offload); default none")),
    ("--sequence-parallel", "sequence_parallel",
     dict(type=int, default=None, help="sequence/context parallel degree (Ulysses, ring attention; default 1)")),
    ("--expert-parallel", "expert_parallel",
     dict(type=int, default=None, help="MoE expert parallel degree (default 1)")),
)


def _tokens(text: str) -> float:
    """`--tokens`: a count as specs read it (`gpuledger.spec.types.parse_count`: 20M, 2e7, 20_000_000)."""
    from gpuledger.spec.types import parse_count

    body = text.strip()
    negative = body.startswith("-")  # said by the command itself (exit 1, naming --tokens), as before
    try:
        value = parse_count(body[1:] if negative else body)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return -float(value) if negative else float(value)


def add_stack_options(parser: argparse.ArgumentParser) -> None:
    """Adds the optimised-stack and calibration options to the `estimate` parser."""
    for flag, name, kwargs in STACK_OPTIONS:
        parser.add_argument(flag, dest=name, **kwargs)
    parser.add_argument("--no-calibration", action="store_true",
                        help="ignore the correction learnt from your measured runs in the warehouse")
    parser.add_argument("--warehouse", default=None, help="warehouse file to learn the correction from")
    # --gpu: the spelling `gpuledger prices --gpu` uses for the same thing (an explicit alias: the CLI's parsers
    # read no prefixes, and before that argparse answered `--gpu H100` with "ambiguous option")
    parser.add_argument("--accelerator", "--gpu", dest="accelerator", default=None, action="append", metavar="KIND",
                        help="GPU kind the run will use (picks the correction learnt on that GPU family); with "
                             "--tokens, the kinds to compare (repeat the option; default: every kind of the catalog). "
                             "--gpu is the same option (--gpus is the GPU count)")
    parser.add_argument("--tokens", type=_tokens, default=None, metavar="N",
                        help="training tokens (20000000, 20_000_000, 2e7 or 20M): adds a table over GPU kinds "
                             "and counts (fits, memory, time, $)")


#: Workload fields whose option is not `--` + the field's name with dashes (the rest: STACK_OPTIONS, then
#: the field's own name); the one table of what each option of `estimate` sets, read by `option_of`
_RENAMED = {"model": "MODEL", "micro_batch": "--batch", "seq_len": "--seq", "accelerators": "--accelerator"}


def option_of(field: str) -> str:
    """Returns the `estimate` option that sets the Workload field (or answer keyword) `field`: `seq_len` ->
    `--seq`, `gpu_memory_gib` -> `--gpu-memory`, `accelerators` -> `--accelerator`."""
    if field in _RENAMED:
        return _RENAMED[field]
    for flag, name, _ in STACK_OPTIONS:
        if name == field:
            return flag
    return "--" + field.replace("_", "-")


def workload_from_args(args: argparse.Namespace):
    """Returns the Workload the options describe; UserError with the field and reason if invalid."""
    from pydantic import ValidationError

    from gpuledger.estimate import Workload

    fields = dict(model=args.model, method=args.method, precision=args.precision, optimizer=args.optimizer,
                  micro_batch=args.batch, seq_len=args.seq, grad_ckpt=args.grad_ckpt, flash_attn=args.flash_attn,
                  lora_r=args.lora_r, lora_targets=args.lora_targets, gpus=args.gpus, sharding=args.sharding,
                  prompt_len=args.prompt_len, completion_len=args.completion_len, group_size=args.group_size,
                  device=getattr(args, "device", "gpu"), framework=getattr(args, "framework", "hf"))
    for _, name, kwargs in STACK_OPTIONS:
        value = getattr(args, name, kwargs.get("default", False if kwargs.get("action") == "store_true" else None))
        if value is not None and not (value is False and kwargs.get("action") == "store_true"):
            fields[name] = value  # a switch not given is the framework's habit (Workload's default, or its stack's)
    try:
        return Workload(**fields)
    except ValidationError as err:
        problems = []
        for e in err.errors():
            flag, inner = (str(e["loc"][0]), ".".join(str(x) for x in e["loc"][1:])) if e["loc"] else ("", "")
            msg = validation_message(e)
            problems.append(f"{option_of(flag)}{' ' + inner if inner else ''}: {msg}" if e["loc"] else msg)
        raise UserError("; ".join(problems)) from None


def render(est) -> str:
    """Returns the human table of an Estimate."""
    m, notes = est.memory_gib, est.notes
    w = est.workload
    unit = "GiB" if w.device == "gpu" else "GiB (CPU RSS)"
    lines = [f"{w.model}: {w.method}, {w.precision}, batch {w.micro_batch} x seq {w.seq_len}, "
             f"{w.gpus} GPU(s){'' if w.sharding == 'none' else ' ' + w.sharding}, device {w.device}",
             f"params: {est.params_total:,} total ({'exact' if est.exact else 'estimate'}), "
             f"{est.params_trainable:,} trainable",
             f"flops/token: {est.flops_per_token:.3e}", "",
             f"{'component':12} {unit:>14}  assumes"]
    for key, label in _ROWS:
        lines.append(f"{label:12} {m[key]:14.3f}  {notes.get(key, '')}")
    lines.append(f"{'allocated':12} {m['allocated']:14.3f}  sum of the above (torch.cuda.max_memory_allocated)")
    lines.append(f"{'reserved':12} {m['reserved']:14.3f}  + allocator fragmentation (max_memory_reserved)")
    lines.append(f"{'device':12} {m['device']:14.3f}  "
                 + ("+ CUDA context (what nvidia-smi shows)" if w.device == "gpu" else "+ interpreter (resident memory)"))
    if est.phases_gib:
        lines.append("")
        lines.append(f"peak phase: {est.peak_phase} (allocated GiB per phase: "
                     + ", ".join(f"{k} {v:.2f}" for k, v in est.phases_gib.items()) + ")")
    lines.append("")
    lines.extend(f"- {a}" for a in est.assumptions)
    return "\n".join(lines)


def render_gpu_table(options: list[dict], tokens: float) -> str:
    """Returns the --tokens table: one line per GPU kind x count, the cheapest and fastest marked."""
    from gpuledger.plan.formats import fmt_band, fmt_duration, fmt_usd

    lines = [f"{tokens:,.0f} training tokens: which GPU (time by gpuledger/estimate/throughput.py, moved by the "
             "measured error of its kind of run, with its P10-P90 band; $ = time x the cheapest catalog offer with "
             "that many GPUs)"]
    for mark, key in (("cheapest", "cheapest"), ("fastest", "fastest")):
        for o in (o for o in options if o[key]):
            usd = (f"{fmt_band(o['cost_usd'], fmt_usd)} on demand" if o["cost_usd"] is not None
                   else "no on-demand offer")
            lines.append(f"  {mark}: {o['gpus']} x {o['accelerator']} ({o['sharding']}), "
                         f"{fmt_band(o['time_s'], fmt_duration, o['time_band']['says'])}, {usd}")
    lines.append(f"{'GPU':10} {'n':>2} {'shard':5} {'fits':4} {'peak GiB':>9} {'P90 GiB':>8} {'time P50':>9} "
                 f"{'P10-P90':>17} {'tok/s/GPU':>9} {'$ on-demand':>11} {'$ spot':>8}  note")
    for o in options:
        fits = ("risk" if o.get("memory_note") else "yes") if o["fits"] else "no"
        tb = o["time_s"]
        t = fmt_duration(tb["p50"]) if tb is not None else "-"
        span = f"{fmt_duration(tb['p10'])}-{fmt_duration(tb['p90'])}" if tb is not None else "-"
        p90 = f"{o['peak_memory_gib_p90']:.1f}" if o["peak_memory_gib_p90"] is not None else "-"
        od = f"{o['usd_on_demand']:,.2f}" if o["usd_on_demand"] is not None else "-"
        sp = f"{o['usd_spot']:,.2f}" if o["usd_spot"] is not None else "-"
        if o.get("spot_note"):
            sp += "*"
        marks = [m for m, k in (("CHEAPEST", "cheapest"), ("FASTEST", "fastest")) if o[k]]
        risk = f"OOM risk ~{o['oom_risk']:.0%} (P90 over the usable memory)" if o["fits"] and o.get("memory_note") else ""
        note = " ".join([*marks, o["reason"] or "", risk]).strip()
        peak = f"{o['peak_memory_gib']:.1f}" if o["peak_memory_gib"] is not None else "-"
        tps = f"{o['tokens_per_s_per_gpu']:,.0f}" if o["tokens_per_s_per_gpu"] is not None else "-"
        lines.append(f"{o['accelerator']:10} {o['gpus']:2d} {o['sharding'] or '':5} {fits:4} {peak:>9} {p90:>8} {t:>9} "
                     f"{span:>17} {tps:>9} {od:>11} {sp:>8}  {note}")
    for o in (o for o in options if o.get("rl") and (o["cheapest"] or o["fastest"])):
        r = o["rl"]
        groups = ", ".join(f"{name} {g['gpus']}x {g['accelerator']}" for name, g in r["groups"].items())
        phases = ", ".join(f"{k} {fmt_duration(v)}" for k, v in r["phases_s"].items() if v > 0)
        lines.append(f"- RL step on {o['gpus']} x {o['accelerator']}: {r['placement']} ({groups}; {r['engine']}"
                     f"{', async' if r['async'] else ''}), {r['steps']:,.0f} steps of {fmt_duration(r['step_s'])} "
                     f"(model, before the band): {phases} (docs/rl.md)")
        if r.get("dynamic_sampling"):
            lines.append(f"  {r['dynamic_sampling']['note']}")
        if r.get("roles"):
            lines.append("  " + rl_answer(o))
    dearer = [o for o in options if o.get("spot_note")]
    lines.extend(f"- * {o['gpus']} x {o['accelerator']}: {o['spot_note']}" for o in dearer)
    rests = sorted({(o["accelerator"], o["gpus"], o["time_band"]["says"]) for o in options if o.get("time_band")})
    lines.extend(f"- band of {n} x {acc}: {says}" for acc, n, says in rests)
    calibrated = sorted({(o["accelerator"], o["time_calibration"]) for o in options if o.get("time_calibration")})
    lines.extend(f"- {acc}: {note}" for acc, note in calibrated)
    if not calibrated:
        lines.append("- time not calibrated: fewer than 5 of your runs of this method and framework on a GPU family "
                     "(or --no-calibration)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from gpuledger.api import Ledger

    w = workload_from_args(args)
    try:
        out = Ledger().estimate_answer(w, tokens=getattr(args, "tokens", None), accelerators=args.accelerator,
                                       calibration=not args.no_calibration, warehouse=args.warehouse)
    except UserError as err:
        text = str(err)  # the answer names its arguments; the command says them as its options
        raise UserError("--" + text if text.startswith(("tokens:", "accelerator:")) else text) from None
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(render(Ledger().estimate(w)))
    calib, mband = out["calibration"], out.get("memory_band")
    if calib["applied"]:
        print(f"- device after calibration: {calib['device_gib']:.3f} GiB ({calib['note']})")
    else:
        print(f"- {calib['note']}")
    if mband is not None:
        d = mband["device_gib"]
        print(f"- device P10-P90: {d['p10']:.2f} - {d['p90']:.2f} GiB (P50 {d['p50']:.2f}; {mband['says']})")
    for line in out["warnings"]:
        print(f"warning: {line}")
    if "options" in out:
        print()
        print(render_gpu_table(out["options"], out["tokens"]))
        if out["sample_lengths"]:
            print(f"- {out['sample_lengths']}")
        print(f"- {out['run_costs']}")
    return 0


def rl_answer(o: dict) -> str:
    """One line answering an RL option: which GPUs generate the rollouts, which train, how long, what $ by role."""
    from gpuledger.plan.formats import fmt_duration, fmt_usd

    r, t = o["rl"], o["time_s"]
    g = r["groups"]
    tr = g["trainer"]
    ro = g.get("rollout")
    where = (f"rollouts on {ro['gpus']} x {ro['accelerator']}, training on {tr['gpus']} x {tr['accelerator']}" if ro else
             f"rollouts and training on the same {tr['gpus']} x {tr['accelerator']} (colocated, {r['engine']})")
    roles = ", ".join(f"{name} {fmt_duration(v['seconds'])} {fmt_usd(v['usd'])}" for name, v in r["roles"].items()
                      if v.get("usd") is not None)
    usd = f"${o['usd_on_demand']:,.2f}" if o.get("usd_on_demand") is not None else "no price"
    return (f"answer: {where}; {fmt_duration(t['p50'])} (P10 {fmt_duration(t['p10'])} - P90 {fmt_duration(t['p90'])}), "
            f"{usd} on demand; by role: {roles}")


"""Hostile spec inputs are answered about as fast as a good spec: time of `parse_spec` on each attack
of issue #17, side by side with the shipped demo spec, and the ratio.

    python benchmarks/spec_inputs.py [--repeats R]

Attacks: an 800-byte alias bomb (9 levels of 9 aliases: 387 million strings once expanded; PyYAML
shares the aliased lists, but the walk that keeps each value's position, pydantic's validation and
any serialisation expand it: the unbounded `validate` grew past 3.8 GB), 5,000 nested `[`, 5,000 nested `{a: `, three 100-value grid lists
(a million trials), 150 aliases. Each must be refused (SpecError) and the goal is a ratio of at most
10 against parsing `specs/lora-grid.yaml`, i.e. well under a second on any machine that parses a spec.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from gpuledger.spec import SpecError, parse_spec

REPO = Path(__file__).resolve().parent.parent
GOAL_RATIO = 10.0


def bomb(levels: int = 9) -> str:
    lol = '"lol-lol-lol-lol-lol-lol-lol-lol-lol-lol-lol"'
    lines = [f"a: &a [{', '.join([lol] * 9)}]"]
    names = "abcdefghijklmnop"
    for prev, name in zip(names[: levels - 1], names[1:levels], strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + "\n"


def attacks() -> dict[str, str]:
    good = (REPO / "specs" / "lora-grid.yaml").read_text()
    lists = "\n".join(f"    p{i}: [{', '.join(str(v) for v in range(100))}]" for i in range(3))
    grid = good.split("  params:\n")[0] + "  params:\n" + lists + "\n  objective: {metric: eval_loss}\n"
    return {
        "alias bomb (800 B)": bomb(),
        "5,000 nested [": "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "5,000 nested {a:": "a: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
        "3 x 100-value grid": grid,
        "150 aliases": "x: &x 1\ny: [" + ", ".join(["*x"] * 150) + "]\n",
    }


def timed(text: str, repeats: int, refused: bool) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        try:
            parse_spec(text, "bench.yaml")
            ok = True
        except SpecError:
            ok = False
        times.append(time.perf_counter() - t0)
        assert ok != refused, "an attack was accepted" if refused else "the good spec was refused"
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    good = (REPO / "specs" / "lora-grid.yaml").read_text()
    base = timed(good, args.repeats, refused=False)
    print(f"{'input':24} {'median ms':>10} {'ratio':>7}")
    print(f"{'specs/lora-grid.yaml':24} {base * 1e3:10.2f} {1.0:7.2f}")
    worst = 0.0
    for name, text in attacks().items():
        t = timed(text, args.repeats, refused=True)
        worst = max(worst, t / base)
        print(f"{name:24} {t * 1e3:10.2f} {t / base:7.2f}")
    print(f"worst ratio {worst:.2f} (goal <= {GOAL_RATIO:g}): {'met' if worst <= GOAL_RATIO else 'MISSED'}")
    return 0 if worst <= GOAL_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())

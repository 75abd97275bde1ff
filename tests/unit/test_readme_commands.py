"""The README's command table lists exactly the CLI's commands (every `build_parser` sub-command,
with its sub-commands for `report`, `billing` and `warehouse`), so that neither drifts."""

from __future__ import annotations

import argparse
import re

from gpuledger.cli import build_parser

#: a row of the table: a line of its code block, or a markdown table row, that starts with the command
ROW = re.compile(r"^(?:\|\s*`)?gpuledger ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def cli_commands() -> set[str]:
    """Returns every command as typed: `sweep`, `report weekly`, `billing ingest`, ..."""

    def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def required(parser: argparse.ArgumentParser) -> bool:
        return any(isinstance(a, argparse._SubParsersAction) and a.required for a in parser._actions)

    out = set()
    for name, sub in subcommands(build_parser()).items():
        inner = subcommands(sub)
        out |= {f"{name} {kind}" for kind in inner}
        if not inner or not required(sub):  # `prices` lists, `prices update` copies
            out.add(name)
    return out


def readme_commands(text: str) -> set[str]:
    """Returns the commands of the README's "Commands" heading, up to the next heading (its table
    or code block)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^#+\s+Commands\b", line))
    section = []
    for line in lines[start + 1:]:
        if re.match(r"^#+\s", line):  # the table is the section's own text, before any sub-heading
            break
        section.append(line)
    with_kinds = {c.split()[0] for c in cli_commands() if " " in c}
    found = set()
    for line in section:
        m = ROW.match(line.strip())
        if m:
            found.add(f"{m.group(1)} {m.group(2)}" if m.group(1) in with_kinds and m.group(2) else m.group(1))
    return found


def test_the_readme_command_table_is_the_cli(repo_root):
    table = readme_commands((repo_root / "README.md").read_text(encoding="utf-8"))
    commands = cli_commands()
    assert len(commands) >= 19
    assert commands - table == set(), "commands missing from the README's command table"
    assert table - commands == set(), "the README's command table names commands the CLI does not have"


def test_a_missing_row_is_noticed():
    text = "# x\n## Commands\n```\ngpuledger sweep SPEC\ngpuledger report weekly\n```\n## Next\ngpuledger demo\n"
    assert readme_commands(text) == {"sweep", "report weekly"}
    table = "## Commands\n| command | what |\n|---|---|\n| `gpuledger billing ingest PATH` | bills |\n"
    assert readme_commands(table) == {"billing ingest"}

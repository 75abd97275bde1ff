"""`gpuledger schema [--write]`: the JSON Schema of both spec kinds, for editor completion.

`--write` writes it to `specs/gpuledger.schema.json` of the project (of the working directory outside
one), the file each spec names on its first line, `# yaml-language-server: $schema=gpuledger.schema.json`.
The package's own copy (SCHEMA_FILE, what `gpuledger init` copies) is checked current by a test."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from gpuledger.files import write_text_atomic
from gpuledger.spec import json_schema

#: the package's copy, beside the specs `gpuledger init` copies into a project
SCHEMA_FILE = Path(str(resources.files("gpuledger.scaffold").joinpath("specs", "gpuledger.schema.json")))
#: the first line of a spec that editors (the YAML language server) read
MODELINE = "# yaml-language-server: $schema=gpuledger.schema.json"


def schema_text() -> str:
    """Returns the schema as the file holds it (sorted keys, two-space indent, final newline)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def project_schema_file() -> Path:
    """Returns where `--write` writes: `specs/gpuledger.schema.json` of the project (found as every
    command finds it), else of the working directory."""
    from gpuledger import settings

    return (settings.find_project() or Path.cwd()) / "specs" / SCHEMA_FILE.name


def run(args) -> int:
    if getattr(args, "write", False):
        target = project_schema_file()
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, schema_text())
        print(f"wrote {target}")
    else:
        print(schema_text(), end="")
    return 0

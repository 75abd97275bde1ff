"""`gpuledger schema [--write]`: the JSON Schema of both spec kinds, for editor completion.

`--write` writes it to `specs/gpuledger.schema.json` (SCHEMA_FILE), the file each shipped spec names
on its first line, `# yaml-language-server: $schema=gpuledger.schema.json`; a test checks that the
file is current."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from gpuledger.spec import json_schema

#: where editors find the schema: beside the specs that name it
SCHEMA_FILE = Path(str(resources.files("gpuledger.scaffold").joinpath("specs", "gpuledger.schema.json")))
#: the first line of a spec that editors (the YAML language server) read
MODELINE = "# yaml-language-server: $schema=gpuledger.schema.json"


def schema_text() -> str:
    """Returns the schema as the file holds it (sorted keys, two-space indent, final newline)."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def run(args) -> int:
    if getattr(args, "write", False):
        SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
        print(f"wrote {SCHEMA_FILE}")
    else:
        print(schema_text(), end="")
    return 0

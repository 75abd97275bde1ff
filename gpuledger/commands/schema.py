"""`gpuledger schema`: the JSON Schema of both spec kinds, for editor completion."""

from __future__ import annotations

import json

from gpuledger.spec import json_schema


def run(args) -> int:
    print(json.dumps(json_schema(), indent=2))
    return 0

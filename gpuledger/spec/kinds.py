"""What makes two stored specs the same kind of experiment (the planner's measured curves,
`gpuledger.inputs.ledger.measured_curves`; the report's grid twin, `gpuledger.report.adaptive_data`)."""

from __future__ import annotations

from gpuledger.spec.models import Train


def same_train_json(a: str | None, b: str | None) -> bool:
    """True when two stored `train` sections (JSON text) are the same training settings read through today's
    `Train` model: a field added since either was stored takes its default, so it does not split a kind of
    experiment (the planner's measured curves, the report's grid twin)."""
    import json

    from pydantic import ValidationError

    if a is None or b is None:
        return False
    if a == b:
        return True
    try:
        return Train.model_validate(json.loads(a)).model_dump(mode="json") == \
            Train.model_validate(json.loads(b)).model_dump(mode="json")
    except (TypeError, ValueError, ValidationError):
        return False

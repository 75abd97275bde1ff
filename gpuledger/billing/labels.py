"""The labels every launch puts on what it creates, so the cloud's bill (FOCUS `Tags`) names the run.

SkyPilot passes `resources.labels` to the instances it starts (AWS tags, GCP labels, Azure tags);
cloud billing exports carry them in FOCUS `Tags`. Keys and values keep to the strictest cloud's rule
(GCP: lower-case letters, digits, '-' and '_', at most 63 characters). The views that attribute line
items to runs read the same keys (`gpuledger/warehouse/sql/views/v_billing_attribution.sql`).
"""

from __future__ import annotations

import re

SWEEP = "gpuledger-sweep"
TRIAL = "gpuledger-trial"
SWEEP_NAME = "gpuledger-sweep-name"
#: the role an instance holds in its trial when the trial's roles run on instances of their own (an RL job
#: group, gpuledger/launch/skypilot_group.py): trainer | rollout (gpuledger.vocabulary.BILLING_ROLES)
ROLE = "gpuledger-role"


def label_value(text: str) -> str:
    """Returns `text` as a label value every cloud accepts."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def launch_labels(*, sweep_id: str, trial_id: str, sweep_name: str, role: str | None = None) -> dict[str, str]:
    """Returns the labels of one trial's cloud resources (`role`: that instance's role in the trial)."""
    out = {SWEEP: label_value(sweep_id), TRIAL: label_value(trial_id), SWEEP_NAME: label_value(sweep_name)}
    return {**out, ROLE: label_value(role)} if role else out

"""What a training script already speaks, reporting to gpuledger in one line (docs/api.md):

- `gpuledger.integrations.transformers`: `GpuledgerCallback`, a Transformers `TrainerCallback` (also
  for TRL's trainers, which are Trainers), and `report_to="gpuledger"` once the module is imported;
- `gpuledger.integrations.lightning`: `GpuledgerLogger`, a Lightning `Logger` (when Lightning is installed);
- `gpuledger.track`: `init / log / finish`, W&B-shaped (`import gpuledger.track as wandb`).

Each reports through `gpuledger.track`: inside a sweep to the agent, outside one as an ad-hoc run
stored in the ledger (`gpuledger.runtime.adhoc`). None of them is a dependency of gpuledger: each
module imports its framework, and only it.
"""

"""What `gpuledger init` writes into a new project (package data, read with `importlib.resources`):
`gpuledger.toml`, `specs/` (the demo grid and ASHA specs, the cloud LoRA example, a capacity example,
the spec JSON Schema), `trainers/` (the PEFT trainer of the cloud example: the user's own code from
then on), `prefect.yaml` (deployments whose entrypoints are module paths of the installed package) and
`prefect.toml`. The gpuledger checkout is itself a project: its root links to these files."""

"""Code that runs inside a job, shipped with the package and started as `python -m gpuledger.trainers.X`:

- `demo_lora`: the demo's LoRA trainer (numpy, CPU): a tiny character GPT (`tinygpt`) pretrained once on
  a generated corpus (`make_corpus`), then adapted per trial; reports through `gpuledger.track`;
- `serve_bench`: the serving benchmark of an inference trial: starts an engine (`tiny_serve`, the
  numpy demo server with continuous batching, or vLLM/SGLang), loads it (`loadgen`), reports metrics.

The PEFT trainer of the cloud example is not here: `gpuledger init` copies it into a project
(gpuledger/scaffold/trainers/peft_lora.py) as the user's own code.
"""

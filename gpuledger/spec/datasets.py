"""Named request-length datasets a capacity spec may give as `traffic.prompt_tokens: {dataset: NAME}`,
with their published moments (the capacity planner draws lengths from them: gpuledger.capacity.lengths)."""

from __future__ import annotations

#: Published moments of benchmark datasets (mean tokens per request; cv by judgement from the
#: published histograms, which span about two orders of magnitude):
#: ShareGPT and Alpaca as the vLLM paper used them (Kwon et al., "Efficient Memory Management for
#: Large Language Model Serving with PagedAttention", SOSP 2023, §6.1 and Fig. 11: ShareGPT mean input
#: 161.31 and output 337.99 tokens; Alpaca 19.31 and 58.45).
DATASETS: dict[str, dict[str, tuple[float, float]]] = {
    "sharegpt": {"prompt": (161.31, 1.0), "output": (337.99, 0.9)},
    "alpaca": {"prompt": (19.31, 0.6), "output": (58.45, 0.8)},
}
DATASET_SOURCE = "vLLM paper (Kwon et al., SOSP 2023) §6.1, Fig. 11; cv by judgement from its histograms"


def dataset_mean(name: str, kind: str) -> float:
    """Returns the mean tokens of a dataset's prompts (`kind` "prompt") or outputs ("output")."""
    return DATASETS[name][kind][0]

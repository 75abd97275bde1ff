"""gpuledger: plan, launch, measure and account for GPU experiments."""
__version__ = "0.1.0"

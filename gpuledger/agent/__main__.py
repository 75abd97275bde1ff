"""`python -m gpuledger.agent ...`: the measuring agent (gpuledger/agent/__init__.py)."""

from gpuledger.agent import main

raise SystemExit(main())

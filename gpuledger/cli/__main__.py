"""`python -m gpuledger.cli ...`: the same as the `gpuledger` command."""

from gpuledger.cli import main

raise SystemExit(main())

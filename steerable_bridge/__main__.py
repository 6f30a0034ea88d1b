"""`python -m steerable_bridge ...`: the same as the `steerable-bridge` command."""

from steerable_bridge.cli import main

raise SystemExit(main())

"""`python -m otel_agents ...`: the `otel-agents` command, where its script is not on PATH."""

from otel_agents.cli._main import main

raise SystemExit(main())

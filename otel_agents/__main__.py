"""`python -m otel_agents ...`: the `otel-agents` command, where its script is not on PATH."""

if __name__ == "__main__":
    from otel_agents.cli._main import main

    raise SystemExit(main())

"""How otel-agents works behind its public names, in layers that import only downward (pyproject.toml)."""

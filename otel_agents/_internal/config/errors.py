"""The one error a bad setting raises."""


class ConfigError(ValueError):
    """A setting has a value otel-agents cannot use; the message names the setting and the value."""

    # Public as `otel_agents.ConfigError`: tracebacks, `repr` and pickling name it there, not here.
    __module__ = "otel_agents"

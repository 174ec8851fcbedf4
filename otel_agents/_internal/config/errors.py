"""The one error a bad setting raises."""


class ConfigError(ValueError):
    """A setting has a value otel-agents cannot use; the message names the setting and the value."""

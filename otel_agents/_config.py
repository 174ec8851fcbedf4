"""Settings: argument, then environment variable, then default; bad values raise `ConfigError`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

RuntimeSpans = Literal["off", "nested"]

OTEL_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
OTEL_RESOURCE_ATTRIBUTES: Final = "OTEL_RESOURCE_ATTRIBUTES"
OTEL_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
OTEL_AGENTS_RUNTIME_SPANS: Final = "OTEL_AGENTS_RUNTIME_SPANS"

DEFAULT_SERVICE_NAME: Final = "otel-agents"
_RUNTIME_SPANS_VALUES: Final = ("off", "nested")


class ConfigError(ValueError):
    """A setting has a value otel-agents cannot use; the message names the setting and the value."""


@dataclass(frozen=True)
class Settings:
    service_name: str
    runtime_spans: RuntimeSpans
    disabled: bool


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def _bool(environ: Mapping[str, str], name: str) -> bool:
    value = _env(environ, name)
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(f"{name}={value!r}: expected 'true' or 'false'")


def _runtime_spans(argument: str | None, environ: Mapping[str, str]) -> RuntimeSpans:
    if argument is not None:
        source, value = "runtime_spans", argument
    else:
        source, value = OTEL_AGENTS_RUNTIME_SPANS, _env(environ, OTEL_AGENTS_RUNTIME_SPANS) or "off"
    lowered = value.lower() if isinstance(value, str) else value
    if lowered == "off":
        return "off"
    if lowered == "nested":
        return "nested"
    raise ConfigError(f"{source}={value!r}: expected one of {', '.join(_RUNTIME_SPANS_VALUES)}")


def _service_name(argument: str | None, environ: Mapping[str, str]) -> str:
    if argument is not None:
        if not isinstance(argument, str) or not argument.strip():
            raise ConfigError(f"service_name={argument!r}: expected a non-empty string")
        return argument
    from_env = _env(environ, OTEL_SERVICE_NAME)
    if from_env is not None:
        return from_env
    for pair in (_env(environ, OTEL_RESOURCE_ATTRIBUTES) or "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == "service.name" and value.strip():
            return value.strip()
    return DEFAULT_SERVICE_NAME


def resolve_settings(
    *,
    service_name: str | None = None,
    runtime_spans: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting, validating each variable even when an argument wins over it."""
    env = os.environ if environ is None else environ
    env_runtime_spans = _runtime_spans(None, env)  # validated even when the argument wins
    return Settings(
        service_name=_service_name(service_name, env),
        runtime_spans=env_runtime_spans if runtime_spans is None else _runtime_spans(runtime_spans, env),
        disabled=_bool(env, OTEL_SDK_DISABLED),
    )

"""Settings: argument, then environment variable, then default; bad values raise `ConfigError`.

Every variable of the settings table is validated at `configure()`, also when an argument wins
over it or the feature it controls is not in use, so a typo is found at start-up, not in production.
OTLP header values are secrets: errors name the variable and the entry's position, never its text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from urllib.parse import unquote, urlparse

from otel_agents._internal.genai.content import CONTENT_MODES, ContentMode, ContentPolicy

RuntimeSpans = Literal["off", "nested"]
Protocol = Literal["grpc", "http/protobuf"]

OTEL_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
OTEL_RESOURCE_ATTRIBUTES: Final = "OTEL_RESOURCE_ATTRIBUTES"
OTEL_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
OTEL_TRACES_EXPORTER: Final = "OTEL_TRACES_EXPORTER"
OTEL_METRICS_EXPORTER: Final = "OTEL_METRICS_EXPORTER"
OTEL_TRACES_SAMPLER: Final = "OTEL_TRACES_SAMPLER"
OTEL_TRACES_SAMPLER_ARG: Final = "OTEL_TRACES_SAMPLER_ARG"
OTEL_AGENTS_RUNTIME_SPANS: Final = "OTEL_AGENTS_RUNTIME_SPANS"
OTEL_AGENTS_STORE: Final = "OTEL_AGENTS_STORE"
OTEL_AGENTS_STORE_MAX_MB: Final = "OTEL_AGENTS_STORE_MAX_MB"
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT: Final = "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"
OTEL_AGENTS_CONTENT_MAX_CHARS: Final = "OTEL_AGENTS_CONTENT_MAX_CHARS"
DEFAULT_CONTENT_MAX_CHARS: Final = 4096
OTEL_EXPORTER_PROMETHEUS_HOST: Final = "OTEL_EXPORTER_PROMETHEUS_HOST"
OTEL_EXPORTER_PROMETHEUS_PORT: Final = "OTEL_EXPORTER_PROMETHEUS_PORT"
DEFAULT_PROMETHEUS: Final = ("127.0.0.1", 9464)

OTLP: Final = "OTEL_EXPORTER_OTLP"
"""Prefix of the OTLP variables: `{OTLP}_ENDPOINT`, `{OTLP}_TRACES_ENDPOINT`, ..."""

DEFAULT_SERVICE_NAME: Final = "otel-agents"
DEFAULT_PROTOCOL: Final[Protocol] = "http/protobuf"
DEFAULT_STORE_MAX_MB: Final = 200.0

_SAMPLERS: Final = frozenset(
    {
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    }
)
_TRACES_EXPORTERS: Final = ("otlp", "console", "none")
_METRICS_EXPORTERS: Final = ("otlp", "console", "prometheus", "none")
_BSP_INTEGERS: Final = (
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_EXPORT_TIMEOUT",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
)


class ConfigError(ValueError):
    """A setting has a value otel-agents cannot use; the message names the setting and the value."""


@dataclass(frozen=True)
class Signal:
    """Where one signal (traces or metrics) goes over OTLP."""

    endpoint: str | None
    """The full URL (HTTP) or address (gRPC) to send to; None: nothing configured."""
    protocol: Protocol
    headers: Mapping[str, str] | None
    """From the `headers` argument; None: the exporter reads the variables itself."""


@dataclass(frozen=True)
class Settings:
    service_name: str
    runtime_spans: RuntimeSpans
    disabled: bool = False
    traces_exporters: tuple[str, ...] = ()
    """Resolved: any of `otlp`, `console`, `store`; empty when nothing is exported."""
    metrics_exporters: tuple[str, ...] = ()
    traces: Signal = field(default_factory=lambda: Signal(None, DEFAULT_PROTOCOL, None))
    metrics: Signal = field(default_factory=lambda: Signal(None, DEFAULT_PROTOCOL, None))
    store_dir: Path | None = None
    store_max_bytes: int = int(DEFAULT_STORE_MAX_MB * 1024 * 1024)
    content: ContentPolicy = field(default_factory=ContentPolicy)
    prometheus: tuple[str, int] | None = None
    """Where to serve metrics for Prometheus to scrape; None: no endpoint."""


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def _bool(environ: Mapping[str, str], name: str) -> bool | None:
    value = _env(environ, name)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(f"{name}={value!r}: expected 'true' or 'false'")


def _number(environ: Mapping[str, str], name: str, *, integer: bool = False, minimum: float = 0) -> float | None:
    value = _env(environ, name)
    if value is None:
        return None
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise ConfigError(f"{name}={value!r}: expected {kind}") from None
    if number < minimum or number != number:
        raise ConfigError(f"{name}={value!r}: expected a number of at least {minimum:g}")
    return number


def _runtime_spans(argument: str | None, environ: Mapping[str, str]) -> RuntimeSpans:
    from_env = _env(environ, OTEL_AGENTS_RUNTIME_SPANS)
    checked: list[tuple[str, object]] = [(OTEL_AGENTS_RUNTIME_SPANS, from_env or "off")]
    if argument is not None:
        checked.append(("runtime_spans", argument))
    resolved: RuntimeSpans = "off"
    for source, value in checked:
        lowered = value.lower() if isinstance(value, str) else value
        if lowered == "off":
            resolved = "off"
        elif lowered == "nested":
            resolved = "nested"
        else:
            raise ConfigError(f"{source}={value!r}: expected 'off' or 'nested'")
    return resolved


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


def _resource_attributes(environ: Mapping[str, str]) -> None:
    value = _env(environ, OTEL_RESOURCE_ATTRIBUTES)
    for position, pair in enumerate((value or "").split(","), start=1):
        if pair.strip() and ("=" not in pair or not pair.partition("=")[0].strip()):
            raise ConfigError(f"{OTEL_RESOURCE_ATTRIBUTES}: entry {position} ({pair.strip()!r}) is not key=value")


def _exporters(name: str, allowed: tuple[str, ...], environ: Mapping[str, str]) -> tuple[str, ...] | None:
    value = _env(environ, name)
    if value is None:
        return None
    names = tuple(part.strip().lower() for part in value.split(",") if part.strip())
    for exporter in names:
        if exporter not in allowed:
            raise ConfigError(f"{name}={value!r}: {exporter!r} is not one of {', '.join(allowed)}")
    if "none" in names and len(names) > 1:
        raise ConfigError(f"{name}={value!r}: 'none' cannot be combined with other exporters")
    return names


def _protocol(source: str, value: object) -> Protocol:
    lowered = value.strip().lower() if isinstance(value, str) else value
    if lowered == "grpc":
        return "grpc"
    if lowered == "http/protobuf":
        return "http/protobuf"
    hint = " (the Python SDK has no http/json exporter)" if lowered == "http/json" else ""
    raise ConfigError(f"{source}={value!r}: expected 'grpc' or 'http/protobuf'{hint}")


def parse_headers(source: str, value: str) -> dict[str, str]:
    """`k1=v1,k2=v2` (values URL-encoded) as the OTLP variables write headers."""
    headers: dict[str, str] = {}
    for position, pair in enumerate(value.split(","), start=1):
        if not pair.strip():
            continue
        key, sep, item = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{source}: entry {position} is not key=value (value not shown: headers are secrets)")
        headers[unquote(key.strip()).lower()] = unquote(item.strip())
    return headers


def _headers_argument(headers: object) -> dict[str, str] | None:
    if headers is None:
        return None
    if isinstance(headers, str):
        return parse_headers("headers", headers)
    if isinstance(headers, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        return {k.lower(): v for k, v in headers.items()}
    raise ConfigError("headers: expected a mapping of str to str or a 'k=v,k2=v2' string (value not shown)")


def _url(source: str, value: str, *, grpc: bool) -> str:
    parsed = urlparse(value if "://" in value or not grpc else f"http://{value}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"{source}={value!r}: expected an http:// or https:// URL")
    try:
        parsed.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise ConfigError(f"{source}={value!r}: the port is not a number from 0 to 65535") from None
    return value


def _signal(
    signal: Literal["traces", "metrics"],
    endpoint: str | None,
    protocol: str | None,
    headers: dict[str, str] | None,
    environ: Mapping[str, str],
) -> Signal:
    upper = signal.upper()
    protocol_sources: list[tuple[str, str | None]] = [
        (f"{OTLP}_PROTOCOL", _env(environ, f"{OTLP}_PROTOCOL")),
        (f"{OTLP}_{upper}_PROTOCOL", _env(environ, f"{OTLP}_{upper}_PROTOCOL")),
        ("protocol", protocol),
    ]
    resolved_protocol: Protocol = DEFAULT_PROTOCOL
    for source, value in protocol_sources:
        if value is not None:
            resolved_protocol = _protocol(source, value)
    grpc = resolved_protocol == "grpc"

    generic = _env(environ, f"{OTLP}_ENDPOINT")
    specific = _env(environ, f"{OTLP}_{upper}_ENDPOINT")
    for source, value in ((f"{OTLP}_ENDPOINT", generic), (f"{OTLP}_{upper}_ENDPOINT", specific)):
        if value is not None:
            _url(source, value, grpc=grpc)
    resolved: str | None
    if endpoint is not None:
        if not isinstance(endpoint, str) or not endpoint.strip():
            raise ConfigError(f"endpoint={endpoint!r}: expected a URL")
        resolved = _with_path(_url("endpoint", endpoint.strip(), grpc=grpc), signal, grpc)
    elif specific is not None:
        resolved = specific
    elif generic is not None:
        resolved = _with_path(generic, signal, grpc)
    else:
        resolved = None

    for name in (f"{OTLP}_HEADERS", f"{OTLP}_{upper}_HEADERS"):
        value = _env(environ, name)
        if value is not None:
            parse_headers(name, value)
    for name in (f"{OTLP}_TIMEOUT", f"{OTLP}_{upper}_TIMEOUT"):
        _number(environ, name)
    for name in (f"{OTLP}_INSECURE", f"{OTLP}_{upper}_INSECURE"):
        _bool(environ, name)
    for name in (f"{OTLP}_CERTIFICATE", f"{OTLP}_{upper}_CERTIFICATE"):
        value = _env(environ, name)
        if value is not None and not Path(value).is_file():
            raise ConfigError(f"{name}={value!r}: no such file")
    return Signal(resolved, resolved_protocol, headers)


def _with_path(base: str, signal: str, grpc: bool) -> str:
    """A generic endpoint is a base URL: HTTP appends `/v1/{signal}`; gRPC uses it as given."""
    return base if grpc else f"{base.rstrip('/')}/v1/{signal}"


def default_store_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/otel-agents/store`, else `~/.local/share/otel-agents/store`."""
    env = os.environ if environ is None else environ
    base = _env(env, "XDG_DATA_HOME")
    root = Path(base) if base else Path.home() / ".local" / "share"
    return root / "otel-agents" / "store"


def _store(argument: object, environ: Mapping[str, str]) -> tuple[Path | None, bool]:
    """(directory, explicitly asked for); a None directory: the store is off."""
    from_env = _env(environ, OTEL_AGENTS_STORE)
    if argument is False:
        return None, True
    if argument is not None and argument is not True:
        if not isinstance(argument, (str, os.PathLike)) or not str(argument).strip():
            raise ConfigError(f"store={argument!r}: expected a directory path, or False for no store")
        return Path(argument).expanduser(), True
    if from_env is not None:
        return Path(from_env).expanduser(), True
    return default_store_dir(environ), argument is True


def _content_mode(source: str, value: object) -> ContentMode:
    if isinstance(value, bool):
        return "SPAN_ONLY" if value else "NO_CONTENT"
    if isinstance(value, str):
        upper = value.strip().upper()
        if upper == "TRUE":
            return "SPAN_ONLY"
        if upper == "FALSE":
            return "NO_CONTENT"
        for mode in CONTENT_MODES:
            if upper == mode:
                return mode
    raise ConfigError(f"{source}={value!r}: expected one of {', '.join(CONTENT_MODES)}, true or false")


def _content(capture: object, redact: object, environ: Mapping[str, str]) -> ContentPolicy:
    name = OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
    from_env = _env(environ, name)
    mode: ContentMode = _content_mode(name, from_env) if from_env is not None else "NO_CONTENT"
    if capture is not None:
        mode = _content_mode("capture_content", capture)
    if redact is not None and not callable(redact):
        raise ConfigError(f"redact={redact!r}: expected a function taking a text and returning a text")
    limits = [
        _number(environ, limit, integer=True, minimum=1)
        for limit in (OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, OTEL_AGENTS_CONTENT_MAX_CHARS)
    ]
    max_chars = next((int(limit) for limit in limits if limit is not None), DEFAULT_CONTENT_MAX_CHARS)
    return ContentPolicy(mode=mode, max_chars=max_chars, redact=redact)


def _prometheus(
    argument: object, metrics_exporters: tuple[str, ...], environ: Mapping[str, str]
) -> tuple[str, int] | None:
    host = _env(environ, OTEL_EXPORTER_PROMETHEUS_HOST)
    if host is not None and not re.fullmatch(r"[A-Za-z0-9._:\-\[\]]+", host):
        raise ConfigError(f"{OTEL_EXPORTER_PROMETHEUS_HOST}={host!r}: expected a host name or address")
    port_value = _number(environ, OTEL_EXPORTER_PROMETHEUS_PORT, integer=True)
    if port_value is not None and not 0 <= port_value <= 65535:
        raise ConfigError(
            f"{OTEL_EXPORTER_PROMETHEUS_PORT}={environ[OTEL_EXPORTER_PROMETHEUS_PORT]!r}: expected a port"
        )
    from_env = (host or DEFAULT_PROMETHEUS[0], int(port_value) if port_value is not None else DEFAULT_PROMETHEUS[1])
    if argument is None:
        return from_env if "prometheus" in metrics_exporters else None
    if argument is False:
        return None
    if argument is True:
        return from_env
    if (
        isinstance(argument, tuple)
        and len(argument) == 2
        and isinstance(argument[0], str)
        and argument[0]
        and isinstance(argument[1], int)
        and not isinstance(argument[1], bool)
        and 0 <= argument[1] <= 65535
    ):
        return (argument[0], argument[1])
    raise ConfigError(f"prometheus={argument!r}: expected (host, port), True for the defaults, or False")


def resolve_settings(
    *,
    service_name: str | None = None,
    runtime_spans: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: object = None,
    store: object = None,
    capture_content: object = None,
    redact: object = None,
    prometheus: object = None,
    span_exporter_given: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting, validating each variable even when an argument wins over it."""
    env = os.environ if environ is None else environ
    _resource_attributes(env)
    disabled = bool(_bool(env, OTEL_SDK_DISABLED))
    resolved_runtime_spans = _runtime_spans(runtime_spans, env)
    name = _service_name(service_name, env)

    sampler = _env(env, OTEL_TRACES_SAMPLER)
    if sampler is not None and sampler.lower() not in _SAMPLERS:
        raise ConfigError(f"{OTEL_TRACES_SAMPLER}={sampler!r}: expected one of {', '.join(sorted(_SAMPLERS))}")
    ratio = _number(env, OTEL_TRACES_SAMPLER_ARG)
    if ratio is not None and ratio > 1:
        raise ConfigError(f"{OTEL_TRACES_SAMPLER_ARG}={env[OTEL_TRACES_SAMPLER_ARG]!r}: expected a ratio from 0 to 1")
    for bsp in _BSP_INTEGERS:
        _number(env, bsp, integer=True, minimum=1 if bsp != "OTEL_BSP_EXPORT_TIMEOUT" else 0)

    content = _content(capture_content, redact, env)
    header_map = _headers_argument(headers)
    traces = _signal("traces", endpoint, protocol, header_map, env)
    metrics = _signal("metrics", endpoint, protocol, header_map, env)

    store_dir, store_explicit = _store(store, env)
    max_mb = _number(env, OTEL_AGENTS_STORE_MAX_MB)
    if max_mb is not None and max_mb <= 0:
        raise ConfigError(f"{OTEL_AGENTS_STORE_MAX_MB}={env[OTEL_AGENTS_STORE_MAX_MB]!r}: expected a size above 0")

    traces_env = _exporters(OTEL_TRACES_EXPORTER, _TRACES_EXPORTERS, env)
    metrics_env = _exporters(OTEL_METRICS_EXPORTER, _METRICS_EXPORTERS, env)
    traces_exporters: list[str] = []
    if not span_exporter_given:
        chosen = traces_env if traces_env is not None else (("otlp",) if traces.endpoint else ())
        traces_exporters = [e for e in chosen if e != "none"]
    wanted = store_explicit or (not span_exporter_given and not traces_exporters)
    if store_dir is not None and traces_env != ("none",) and wanted:
        traces_exporters.append("store")
    else:
        store_dir = None
    if metrics_env is not None:
        metrics_exporters = tuple(e for e in metrics_env if e != "none")
    else:
        metrics_exporters = ("otlp",) if metrics.endpoint else ()
    prometheus_at = _prometheus(prometheus, metrics_exporters, env)
    metrics_exporters = tuple(e for e in metrics_exporters if e != "prometheus")

    return Settings(
        service_name=name,
        runtime_spans=resolved_runtime_spans,
        disabled=disabled,
        traces_exporters=tuple(traces_exporters),
        metrics_exporters=metrics_exporters,
        traces=traces,
        metrics=metrics,
        store_dir=store_dir,
        store_max_bytes=int((max_mb if max_mb is not None else DEFAULT_STORE_MAX_MB) * 1024 * 1024),
        content=content,
        prometheus=prometheus_at,
    )

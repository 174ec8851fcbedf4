"""Settings: argument, then environment variable, then default; bad values raise `ConfigError`.

Each setting, its variables, validation and default are rows of the table in `params`; this module
combines their values into the `Settings` that `configure()` builds its pipeline from. Every
variable is validated at `configure()`, also when an argument wins over it or the feature it
controls is not in use, so a typo is found at start-up, not in production. OTLP header values are
secrets: errors name the variable and the entry's position, never its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlparse

from otel_agents._internal.config.errors import ConfigError
from otel_agents._internal.config.params import (
    BATCHING,
    CAPTURE_CONTENT,
    CONTENT_MAX_CHARS,
    DATA_HOME,
    DEFAULT_EXIT_TIMEOUT_S,
    DEFAULT_OTLP_TIMEOUT_S,
    DEFAULT_PROTOCOL,
    DEFAULT_SERVICE_NAME,
    DEFAULT_STORE_MAX_MB,
    EXIT_TIMEOUT_S,
    KEEP_RUNS,
    METRIC_ATTRIBUTES,
    METRICS_EXPORTER,
    OTLP_METRICS,
    OTLP_TRACES,
    OUTCOME,
    PRICES,
    PROMETHEUS,
    PROMETHEUS_HOST,
    PROMETHEUS_PORT,
    REDACT,
    RESOURCE_ATTRIBUTES,
    RUN_PARENT,
    RUNTIME_SPANS,
    SAMPLE_MAX_SPANS_PER_RUN,
    SAMPLE_MAX_WAITING_SPANS,
    SAMPLE_RUNS,
    SDK_DISABLED,
    SDK_MAX_EXPORT_BATCH_SIZE,
    SERVICE_NAME,
    SPAN_QUEUE_SIZE,
    STORE,
    STORE_MAX_MB,
    STREAM_USAGE,
    TRACES_EXPORTER,
    TRACES_SAMPLER,
    TRACES_SAMPLER_ARG,
    Otlp,
    Param,
    environment,
    variable_text,
)
from otel_agents._internal.config.parsers import Protocol, RunParent, RuntimeSpans, StreamUsage, parse_headers
from otel_agents._internal.config.parsers import keep_runs as keep_runs_rules
from otel_agents._internal.genai.content import ContentPolicy
from otel_agents._internal.genai.keeping import DEFAULT_KEEP_RUNS, KeepRules
from otel_agents._internal.genai.prices import PriceTable

__all__ = [
    "ConfigError",
    "RuntimeSpans",
    "Settings",
    "Signal",
    "default_store_dir",
    "parse_headers",
    "resolve_settings",
    "store_dir",
]


@dataclass(frozen=True)
class Signal:
    """Where one signal (traces or metrics) goes over OTLP."""

    endpoint: str | None
    """The full URL (HTTP) or address (gRPC) to send to; None: nothing configured."""
    protocol: Protocol
    headers: Mapping[str, str] | None
    """From the `headers` argument; None: the exporter reads the variables itself."""


@dataclass(frozen=True)
class Sampling:
    """Which runs the exporters get (the store keeps every run): `ratio` of the ordinary ones, by
    trace id, and every run `rules` keep, whole."""

    ratio: float = 1.0
    rules: KeepRules = field(default_factory=KeepRules)
    max_spans_per_run: int = SAMPLE_MAX_SPANS_PER_RUN.default or 1
    max_waiting_spans: int = SAMPLE_MAX_WAITING_SPANS.default or 1

    @property
    def on(self) -> bool:
        """Whether any run may be left out (a ratio below 1): else nothing waits."""
        return self.ratio < 1


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
    store_named_by: str | None = None
    """What chose `store_dir`: `store` (the argument) or `OTEL_AGENTS_STORE`; None: the default."""
    store_max_bytes: int = int(DEFAULT_STORE_MAX_MB * 1024 * 1024)
    content: ContentPolicy = field(default_factory=ContentPolicy)
    prometheus: tuple[str, int] | None = None
    """Where to serve metrics for Prometheus to scrape; None: no endpoint."""
    exporter_timeout_s: float = DEFAULT_OTLP_TIMEOUT_S
    """The OTLP traces exporter's timeout as the SDK reads it: shutdown waits this plus a grace."""
    metric_attributes: tuple[str, ...] = ()
    """Keys of `run_attributes(attributes=...)` that label the run metrics (OTEL_AGENTS_METRIC_ATTRIBUTES)."""
    span_queue_size: int | None = None
    """OTEL_BSP_MAX_QUEUE_SIZE: how many spans a batch processor holds; None: `SPAN_QUEUE_SIZE`."""
    span_batch_size: int | None = None
    """OTEL_BSP_MAX_EXPORT_BATCH_SIZE: how many spans a batch processor exports at once (kept traces
    joined into one export included); None: `SDK_MAX_EXPORT_BATCH_SIZE`."""
    stream_usage: StreamUsage = "off"
    """OTEL_AGENTS_STREAM_USAGE: `request` asks AutoGen's OpenAI clients for usage on streamed calls."""
    run_parent: RunParent = "current"
    """OTEL_AGENTS_RUN_PARENT: `link` makes each run the root of its own trace, linked to the span
    current where it starts."""
    exit_timeout_s: float = DEFAULT_EXIT_TIMEOUT_S
    """OTEL_AGENTS_EXIT_TIMEOUT_S: how long the process's exit (and a SIGTERM) waits for export."""
    sampling: Sampling = field(default_factory=Sampling)
    """OTEL_AGENTS_SAMPLE_RUNS, OTEL_AGENTS_KEEP_RUNS and the bounds of what waits."""
    outcome: Any = None
    """What says a run's outcome as it ends: `configure(outcome=...)`'s function, or
    OTEL_AGENTS_OUTCOME's `module:function` (imported at the first run's end); None: nothing."""


_SPAN_QUEUE_SIZE: Final = next(p for p in BATCHING if p.variables == ("OTEL_BSP_MAX_QUEUE_SIZE",))
_SPAN_BATCH_SIZE: Final = next(p for p in BATCHING if p.variables == ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE",))


def _batching(env: Mapping[str, str]) -> tuple[int | None, int | None]:
    """The span queue size and export batch size set, if any, once every batching variable is
    checked (the SDK refuses an export batch larger than its queue with a bare ValueError: refused
    here, named)."""
    values = {param: param.from_environ(env) for param in BATCHING}
    queue, batch = values[_SPAN_QUEUE_SIZE], values[_SPAN_BATCH_SIZE]
    if (batch or SDK_MAX_EXPORT_BATCH_SIZE) > (queue or SPAN_QUEUE_SIZE):
        batch_text = batch or f"{SDK_MAX_EXPORT_BATCH_SIZE} (the SDK's default)"
        queue_text = queue or f"{SPAN_QUEUE_SIZE} (otel-agents' default)"
        raise ConfigError(
            f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE={batch_text} is more than OTEL_BSP_MAX_QUEUE_SIZE={queue_text}: "
            "a batch must fit in the queue"
        )
    return queue, batch


def _service_name(argument: object, environ: Mapping[str, str]) -> str:
    """The argument, else OTEL_SERVICE_NAME, else `service.name` of OTEL_RESOURCE_ATTRIBUTES, else the default."""
    if argument is not None:
        return SERVICE_NAME.checked(argument)
    from_env = SERVICE_NAME.from_environ(environ)
    if from_env is not None:
        return from_env
    for key, value in RESOURCE_ATTRIBUTES.from_environ(environ) or ():
        if key == "service.name" and value:
            return value
    return DEFAULT_SERVICE_NAME


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
    otlp: Otlp,
    signal: Literal["traces", "metrics"],
    endpoint: object,
    protocol: object,
    headers: dict[str, str] | None,
    environ: Mapping[str, str],
) -> Signal:
    resolved_protocol = otlp.protocol.value(protocol, environ)
    grpc = resolved_protocol == "grpc"

    for name in otlp.endpoint.variables:  # an endpoint's form depends on the protocol
        text = variable_text(environ, name)
        if text is not None:
            _url(name, text, grpc=grpc)
    found = otlp.endpoint.lookup(environ)
    resolved: str | None
    if endpoint is not None:
        resolved = _with_path(_url("endpoint", otlp.endpoint.checked(endpoint), grpc=grpc), signal, grpc)
    elif found is not None:
        variable, text = found
        specific = variable == otlp.endpoint.variables[0]
        resolved = text if specific else _with_path(text, signal, grpc)
    else:
        resolved = None

    exporter_reads: tuple[Param[Any], ...] = (otlp.headers, otlp.timeout, otlp.insecure, otlp.certificate)
    for param in exporter_reads:
        param.from_environ(environ)  # validated here; the exporter reads them itself
    return Signal(resolved, resolved_protocol, headers)


def _with_path(base: str, signal: str, grpc: bool) -> str:
    """A generic endpoint is a base URL: HTTP appends `/v1/{signal}`; gRPC uses it as given."""
    return base if grpc else f"{base.rstrip('/')}/v1/{signal}"


def default_store_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/otel-agents/store`, else `$HOME/.local/share/otel-agents/store`."""
    base = DATA_HOME.from_environ(environment() if environ is None else environ)
    # neither variable set: the home directory the password database gives (HOME is unset here)
    root = base if base is not None else Path.home() / ".local" / "share"
    return root / "otel-agents" / "store"


def store_dir(argument: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The directory the CLI reads: `--store`, else OTEL_AGENTS_STORE, else the default."""
    env = environment() if environ is None else environ
    chosen = STORE.resolve(argument or None, env)
    return chosen if isinstance(chosen, Path) else default_store_dir(env)


def _store(argument: object, environ: Mapping[str, str]) -> tuple[Path | None, bool, str | None]:
    """(directory, explicitly asked for, what named it); a None directory: the store is off."""
    chosen = STORE.resolve(argument, environ)
    if chosen is None or chosen is True:
        return default_store_dir(environ), chosen is True, None
    if isinstance(chosen, Path):
        return chosen, True, STORE.argument_name if argument is not None else STORE.variables[0]
    return None, True, None  # store=False


def _content(capture: object, redact: object, environ: Mapping[str, str]) -> ContentPolicy:
    mode = CAPTURE_CONTENT.value(capture, environ)
    function = REDACT.resolve(redact, environ)
    return ContentPolicy(mode=mode, max_chars=CONTENT_MAX_CHARS.value(None, environ), redact=function)


def _prometheus(
    argument: object, metrics_exporters: tuple[str, ...], environ: Mapping[str, str]
) -> tuple[str, int] | None:
    from_env = (PROMETHEUS_HOST.value(None, environ), PROMETHEUS_PORT.value(None, environ))
    if argument is None:
        return from_env if "prometheus" in metrics_exporters else None
    chosen = PROMETHEUS.checked(argument)
    if isinstance(chosen, bool):
        return from_env if chosen else None
    return chosen


def _sampling(sample_runs: object, keep_runs: object, environ: Mapping[str, str]) -> Sampling:
    """The ratio, the rules (the argument's list replaces the variable's; a callable alone is added
    to them), and the bounds; every variable validated."""
    ratio = SAMPLE_RUNS.value(sample_runs, environ)
    from_env = KEEP_RUNS.from_environ(environ)
    if from_env is None:
        set_empty = KEEP_RUNS.variables[0] in environ  # set and blank: no rule
        from_env = KeepRules() if set_empty else keep_runs_rules("default", KEEP_RUNS.default or DEFAULT_KEEP_RUNS)
    rules: KeepRules = from_env
    if keep_runs is not None:
        given = KEEP_RUNS.checked(keep_runs)
        if isinstance(given, KeepRules):
            rules = given
        else:  # a callable: after the rules
            rules = KeepRules(rules=rules.rules, callables=(*rules.callables, given))
    return Sampling(
        ratio=ratio,
        rules=rules,
        max_spans_per_run=SAMPLE_MAX_SPANS_PER_RUN.value(None, environ),
        max_waiting_spans=SAMPLE_MAX_WAITING_SPANS.value(None, environ),
    )


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
    sample_runs: object = None,
    keep_runs: object = None,
    outcome: object = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every setting, validating each variable even when an argument wins over it.

    `environ`: the variables to read (default: a snapshot of the process's, `params.environment()`).
    """
    env = environment() if environ is None else environ
    RESOURCE_ATTRIBUTES.from_environ(env)
    disabled = SDK_DISABLED.value(None, env)
    resolved_runtime_spans = RUNTIME_SPANS.value(runtime_spans, env)
    name = _service_name(service_name, env)
    for param in (TRACES_SAMPLER, TRACES_SAMPLER_ARG):
        param.from_environ(env)  # validated here; the SDK reads them itself
    span_queue_size, span_batch_size = _batching(env)

    content = _content(capture_content, redact, env)
    header_map = OTLP_TRACES.headers.checked(headers) if headers is not None else None
    traces = _signal(OTLP_TRACES, "traces", endpoint, protocol, header_map, env)
    metrics = _signal(OTLP_METRICS, "metrics", endpoint, protocol, header_map, env)

    store_at, store_explicit, store_named_by = _store(store, env)
    max_mb = STORE_MAX_MB.value(None, env)
    metric_attributes = METRIC_ATTRIBUTES.from_environ(env) or ()

    traces_env = TRACES_EXPORTER.from_environ(env)
    metrics_env = METRICS_EXPORTER.from_environ(env)
    traces_exporters: list[str] = []
    store_by_name = False  # OTEL_TRACES_EXPORTER=otel_agents_store
    if not span_exporter_given:
        chosen = traces_env if traces_env is not None else (("otlp",) if traces.endpoint else ())
        store_by_name = "store" in chosen
        traces_exporters = [e for e in chosen if e not in ("none", "store")]
    wanted = store_explicit or store_by_name or (not span_exporter_given and not traces_exporters)
    # OTEL_TRACES_EXPORTER=none turns the store off too, unless the argument asks for it (arguments win)
    switched_off = traces_env == ("none",) and (store is None or store is False)
    if store_at is not None and not switched_off and wanted:
        traces_exporters.append("store")
    else:
        store_at = None
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
        store_dir=store_at,
        store_named_by=store_named_by if store_at is not None else None,
        store_max_bytes=int(max_mb * 1024 * 1024),
        content=content,
        prometheus=prometheus_at,
        exporter_timeout_s=OTLP_TRACES.timeout.value(None, env),
        metric_attributes=metric_attributes,
        span_queue_size=span_queue_size,
        span_batch_size=span_batch_size,
        stream_usage=STREAM_USAGE.value(None, env),
        run_parent=RUN_PARENT.value(None, env),
        exit_timeout_s=EXIT_TIMEOUT_S.value(None, env),
        sampling=_sampling(sample_runs, keep_runs, env),
        outcome=OUTCOME.resolve(outcome, env),
    )


def load_prices(argument: object, environ: Mapping[str, str] | None = None) -> PriceTable:
    """`prices` (a path or mapping), else `OTEL_AGENTS_PRICES`, over `genai-prices`' data.

    The variable's file is read and checked even when the argument wins.
    """
    return PriceTable(PRICES.resolve(argument, environment() if environ is None else environ))

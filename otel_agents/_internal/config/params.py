"""Every setting as data: one table, `PARAMS`, that `configure()`, the CLI and the tests read.

Each `Param` names its `configure()` argument (if any), its environment variables in precedence order
(standard `OTEL_*` first; the first one set wins), how a variable's text is parsed and validated, how
an argument is checked (both with the functions of `parsers.py`), and the default. A value resolves
as: argument, then variable, then default; every variable set is validated, also when the argument
wins. A bad value raises `ConfigError`
naming the argument or variable and the value (OTLP header values are secrets: never shown).

`environment()` is the one place otel-agents reads the process environment. It returns a snapshot
of the table's variables. `configure()` takes one and hands it to everything it resolves; what
resolves settings outside `configure()` (the view of the global providers when `configure()` was
never called, a `LoopGuard` when it is built, the CLI) takes its own snapshot through it.
The settings table of docs/configuration.md is checked against `PARAMS` by tests/test_settings_table.py.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Generic, Literal, TypeVar

from otel_agents._internal import process_state
from otel_agents._internal.config import parsers
from otel_agents._internal.config.errors import ConfigError
from otel_agents._internal.config.parsers import Number, Protocol, RunParent, RuntimeSpans, StreamUsage
from otel_agents._internal.genai import keeping
from otel_agents._internal.genai.content import CONTENT_MODES, ContentMode
from otel_agents._internal.genai.prices import Price

T = TypeVar("T")
logger = logging.getLogger(__name__)

OURS: Final = "OTEL_AGENTS_"
"""Our variables: a bad one is a warning at `configure()` (the standard `OTEL_*` ones, which the SDK
reads too, are refused there)."""
OTLP: Final = "OTEL_EXPORTER_OTLP"
"""Prefix of the OTLP variables: `{OTLP}_ENDPOINT`, `{OTLP}_TRACES_ENDPOINT`, ..."""


@dataclass(frozen=True, kw_only=True)
class Param(Generic[T]):
    """One setting: where its value comes from, how it is validated, and its default."""

    setting: str
    """The row of the settings table (docs/configuration.md) it belongs to."""
    argument: str | None = None
    """The `configure()` argument that wins over the variables; `loop_limits.max_messages` is a field."""
    variables: tuple[str, ...] = ()
    """Environment variables in precedence order: the first one set wins, every one set is validated."""
    parse: Callable[[str, str], T] | None = None
    """`(variable, stripped text) -> value`; raises `ConfigError` naming the variable and the text."""
    check: Callable[[str, object], T] | None = None
    """`(argument, value) -> value` for the argument; None: checked where it is combined with others."""
    default: T | None = None
    """The value when neither is set; None: unset (the rule is off, or another library decides)."""
    kind: str = ""
    """The type or allowed values, as the docs say them."""
    sdk_reads: bool = False
    """The OpenTelemetry SDK or its exporters read these variables too; otel-agents validates them."""
    items: bool = False
    """A comma list whose bad entries are left out, one warning each, the rest kept (outside `strict`)."""

    @property
    def argument_name(self) -> str:
        """The name an error shows for the argument: `max_messages` for `loop_limits.max_messages`."""
        return (self.argument or "").rpartition(".")[2]

    def lookup(self, environ: Mapping[str, str]) -> tuple[str, T] | None:
        """(variable, value) of the first variable set; every variable set is validated. A value
        that cannot be used raises `ConfigError` where `environ` is strict (the CLI, a plain
        mapping); elsewhere (`configure()`, zero code) it is one warning naming the variable, the
        value and the default used, and the variable counts as unset, as the OpenTelemetry
        specification asks of environment variables."""
        found: tuple[str, T] | None = None
        strict = getattr(environ, "strict", True)
        for name in self.variables:
            text = variable_text(environ, name)
            if text is None or self.parse is None:
                continue
            try:
                value = self.parse(name, text)
            except ConfigError as error:
                if strict or not name.startswith(OURS):  # the SDK reads the standard ones itself
                    raise
                kept = self._usable_items(name, text) if self.items else None
                if kept is None:
                    _warn_once(f"otel-agents: {error}; {name} is ignored: {self._default_text()}")
                    continue
                value = kept
            if found is None:
                found = (name, value)
        return found

    def _usable_items(self, name: str, text: str) -> T | None:
        """A comma list's entries that can be used, each other one warned about and left out; None
        when none can (or the rest together cannot: the caller warns of the whole)."""
        assert self.parse is not None
        good, bad = [], []
        for position, item in enumerate((part.strip() for part in text.split(",")), start=1):
            try:
                if not item:
                    raise ConfigError(f"{name}={text!r}: entry {position} is empty")
                self.parse(name, item)
            except ConfigError as error:
                bad.append(f"otel-agents: {error}; that entry is left out, the rest kept")
                continue
            good.append(item)
        try:
            value = self.parse(name, ",".join(good)) if good else None
        except ConfigError:
            return None
        if value is not None:
            for warning in bad:
                _warn_once(warning)
        return value

    def _default_text(self) -> str:
        if self.default is None:
            return "it is treated as unset"
        default = self.default if isinstance(self.default, (str, int, float)) else str(self.default)
        return f"the default is used ({default!r})"

    def from_environ(self, environ: Mapping[str, str]) -> T | None:
        """The value of the first variable set, else None; every variable set is validated."""
        found = self.lookup(environ)
        return found[1] if found is not None else None

    def checked(self, argument: object) -> T:
        """The argument, checked."""
        if self.check is None:
            raise TypeError(f"{self.argument_name or self.variables[0]} takes no argument here")
        return self.check(self.argument_name, argument)

    def value(self, argument: object, environ: Mapping[str, str]) -> T:
        """`resolve` for a setting that has a default."""
        resolved = self.resolve(argument, environ)
        if resolved is None:
            raise TypeError(f"{self.argument_name or self.variables[0]} has no default")
        return resolved

    def resolve(self, argument: object, environ: Mapping[str, str]) -> T | None:
        """The argument (checked), else the first variable set, else the default.

        The variables are validated first, also when the argument wins.
        """
        from_env = self.from_environ(environ)
        if argument is not None:
            return self.checked(argument)
        return from_env if from_env is not None else self.default


def variable_text(environ: Mapping[str, str], name: str) -> str | None:
    """The variable's text, stripped; None when unset or blank."""
    value = environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


# The table.

DEFAULT_SERVICE_NAME: Final = "otel-agents"
DEFAULT_PROTOCOL: Final[Protocol] = "http/protobuf"
DEFAULT_OTLP_TIMEOUT_S: Final = 10.0
DEFAULT_CONTENT_MAX_CHARS: Final = 4096
DEFAULT_STORE_MAX_MB: Final = 200.0
DEFAULT_PROMETHEUS: Final = ("127.0.0.1", 9464)
DEFAULT_MAX_REPEATS: Final = 3
DEFAULT_EXIT_TIMEOUT_S: Final = 2.0

SERVICE_NAME: Final = Param[str](
    setting="service name, resource",
    argument="service_name",
    variables=("OTEL_SERVICE_NAME",),
    parse=parsers.text,
    check=parsers.service_name,
    default=DEFAULT_SERVICE_NAME,
    kind="text; unset: `service.name` of OTEL_RESOURCE_ATTRIBUTES, else the default",
)
RESOURCE_ATTRIBUTES: Final = Param[tuple[tuple[str, str], ...]](
    setting="service name, resource",
    variables=("OTEL_RESOURCE_ATTRIBUTES",),
    parse=parsers.key_values,
    kind="`key=value` pairs, comma-separated",
    sdk_reads=True,
)
SDK_DISABLED: Final = Param[bool](
    setting="kill switch",
    variables=("OTEL_SDK_DISABLED",),
    parse=parsers.boolean,
    default=False,
    kind="true or false; true: nothing recorded, taps pass items through",
)
SPAN_EXPORTER: Final = Param[object](
    setting="exporters",
    argument="span_exporter",
    check=parsers.span_exporter,
    kind="a SpanExporter; replaces the default destination (OTEL_TRACES_EXPORTER is then not used)",
)
METRIC_READERS: Final = Param[Iterable[object]](
    setting="exporters",
    argument="metric_readers",
    check=parsers.metric_readers,
    kind="a list of MetricReader, added to those of OTEL_METRICS_EXPORTER",
)
TRACES_EXPORTER: Final = Param[tuple[str, ...]](
    setting="exporters",
    variables=("OTEL_TRACES_EXPORTER",),
    parse=parsers.exporters(("otlp", "console", parsers.STORE_EXPORTER, "none")),
    kind="comma list of otlp, console, otel_agents_store (the embedded store), none; unset: otlp when an "
    "endpoint is set, else the embedded store",
)
METRICS_EXPORTER: Final = Param[tuple[str, ...]](
    setting="exporters",
    variables=("OTEL_METRICS_EXPORTER",),
    parse=parsers.exporters(("otlp", "console", "prometheus", "none")),
    kind="comma list of otlp, console, prometheus, none; unset: otlp when an endpoint is set",
)


@dataclass(frozen=True)
class Otlp:
    """The OTLP settings of one signal; each reads `{OTLP}_{SIGNAL}_X`, then `{OTLP}_X`."""

    endpoint: Param[str]
    protocol: Param[Protocol]
    headers: Param[dict[str, str]]
    timeout: Param[float]
    insecure: Param[bool]
    certificate: Param[Path]

    @property
    def params(self) -> tuple[Param[Any], ...]:
        return (self.endpoint, self.protocol, self.headers, self.timeout, self.insecure, self.certificate)


def _otlp(signal: Literal["traces", "metrics"]) -> Otlp:
    upper = signal.upper()

    def names(suffix: str) -> tuple[str, ...]:
        return (f"{OTLP}_{upper}_{suffix}", f"{OTLP}_{suffix}")

    return Otlp(
        endpoint=Param(
            setting="OTLP",
            argument="endpoint",
            variables=names("ENDPOINT"),
            parse=parsers.text,
            check=parsers.endpoint,
            kind=f"a URL (gRPC: also host:port), checked against the protocol; the generic variable is a base "
            f"URL (HTTP appends /v1/{signal}), the signal one is used as given",
        ),
        protocol=Param(
            setting="OTLP",
            argument="protocol",
            variables=names("PROTOCOL"),
            parse=parsers.protocol,
            check=parsers.protocol,
            default=DEFAULT_PROTOCOL,
            kind="grpc or http/protobuf",
        ),
        headers=Param(
            setting="OTLP",
            argument="headers",
            variables=names("HEADERS"),
            parse=parsers.parse_headers,
            check=parsers.headers,
            kind="`k=v,k2=v2`, values URL-encoded; never shown in errors",
            sdk_reads=True,
        ),
        timeout=Param(
            setting="OTLP",
            variables=names("TIMEOUT"),
            parse=parsers.seconds,
            default=DEFAULT_OTLP_TIMEOUT_S,
            kind="seconds, as the Python SDK reads it; shutdown waits this long plus a grace",
            sdk_reads=True,
        ),
        insecure=Param(
            setting="OTLP",
            variables=names("INSECURE"),
            parse=parsers.boolean,
            kind="true or false (gRPC)",
            sdk_reads=True,
        ),
        certificate=Param(
            setting="OTLP",
            variables=names("CERTIFICATE"),
            parse=parsers.existing_file,
            kind="an existing file",
            sdk_reads=True,
        ),
    )


OTLP_TRACES: Final = _otlp("traces")
OTLP_METRICS: Final = _otlp("metrics")

SPAN_QUEUE_SIZE: Final = 8192
"""Spans otel-agents' batch processor holds when `OTEL_BSP_MAX_QUEUE_SIZE` is unset: four times the
SDK's 2048, so that a burst (a publish cascade, or an export thread kept from running on a busy
machine) is not dropped; about 3 KB a queued span, some 26 MB at most."""
SDK_MAX_EXPORT_BATCH_SIZE: Final = 512
"""Spans it exports at once when `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` is unset; never more than the queue."""
BATCHING: Final = tuple(
    Param[int](
        setting="batching",
        variables=(name,),
        parse=parsers.whole(0 if name == "OTEL_BSP_EXPORT_TIMEOUT" else 1),
        default=SPAN_QUEUE_SIZE if name == "OTEL_BSP_MAX_QUEUE_SIZE" else None,
        kind=(
            f"a whole number (spans); unset: {SPAN_QUEUE_SIZE} (the SDK's is 2048)"
            if name == "OTEL_BSP_MAX_QUEUE_SIZE"
            else "a whole number (milliseconds, spans); unset: the SDK's default"
        ),
        sdk_reads=True,
    )
    for name in (
        "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_BSP_EXPORT_TIMEOUT",
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    )
)
TRACES_SAMPLER: Final = Param[str](
    setting="sampling",
    variables=("OTEL_TRACES_SAMPLER",),
    parse=parsers.sampler,
    kind=f"one of {', '.join(sorted(parsers.SAMPLERS))}; unset: the SDK's parentbased_always_on",
    sdk_reads=True,
)
TRACES_SAMPLER_ARG: Final = Param[float](
    setting="sampling",
    variables=("OTEL_TRACES_SAMPLER_ARG",),
    parse=parsers.ratio,
    kind="a ratio from 0 to 1",
    sdk_reads=True,
)
CAPTURE_CONTENT: Final = Param[ContentMode](
    setting="content capture",
    argument="capture_content",
    variables=("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",),
    parse=parsers.content_mode,
    check=parsers.content_mode,
    default="NO_CONTENT",
    kind=f"one of {', '.join(CONTENT_MODES)} (any case); true: SPAN_ONLY, false: NO_CONTENT",
)
REDACT: Final = Param[Callable[[str], str]](
    setting="content capture",
    argument="redact",
    check=parsers.redact,
    kind="a function taking a text and returning a text",
)
CONTENT_MAX_CHARS: Final = Param[int](
    setting="content size",
    variables=("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_AGENTS_CONTENT_MAX_CHARS"),
    parse=parsers.whole(1),
    default=DEFAULT_CONTENT_MAX_CHARS,
    kind="a whole number of characters, at least 1",
    sdk_reads=True,
)
RUNTIME_SPANS: Final = Param[RuntimeSpans](
    setting="AutoGen runtime spans",
    argument="runtime_spans",
    variables=("OTEL_AGENTS_RUNTIME_SPANS",),
    parse=parsers.runtime_spans,
    check=parsers.runtime_spans,
    default="auto",
    kind="auto (inside AgentChat runs as off; elsewhere, autogen-core apps, as nested), off or nested (any case)",
)
STREAM_USAGE: Final = Param[StreamUsage](
    setting="streamed-call usage",
    variables=("OTEL_AGENTS_STREAM_USAGE",),
    parse=parsers.stream_usage,
    default="off",
    kind="off, or request: ask AutoGen's OpenAI clients for usage on streamed calls (stream_options.include_usage)",
)
RUN_PARENT: Final = Param[RunParent](
    setting="where a run's trace starts",
    variables=("OTEL_AGENTS_RUN_PARENT",),
    parse=parsers.run_parent,
    default="current",
    kind="current (a child of the span current where the run starts) or link (the root of its own "
    "trace, linked to that span)",
)
EXIT_TIMEOUT_S: Final = Param[float](
    setting="how long exit and SIGTERM wait for export",
    variables=("OTEL_AGENTS_EXIT_TIMEOUT_S",),
    parse=parsers.seconds,
    default=DEFAULT_EXIT_TIMEOUT_S,
    kind="seconds, at least 0",
)
STORE: Final = Param[Path | bool](
    setting="embedded store",
    argument="store",
    variables=("OTEL_AGENTS_STORE",),
    parse=parsers.path,
    check=parsers.store,
    kind="a directory; False: no store; unset: the user data directory's otel-agents/store",
)
STORE_MAX_MB: Final = Param[float](
    setting="embedded store",
    variables=("OTEL_AGENTS_STORE_MAX_MB",),
    parse=parsers.size_mb,
    default=DEFAULT_STORE_MAX_MB,
    kind="megabytes, above 0",
)
DATA_HOME: Final = Param[Path](
    setting="embedded store",
    variables=("XDG_DATA_HOME", "HOME"),
    parse=parsers.data_home,
    kind="the user data directory: $XDG_DATA_HOME, else $HOME/.local/share (neither set: the "
    "password database's home directory)",
)
PRICES: Final[Param[Mapping[str, Price]]] = Param(
    setting="prices",
    argument="prices",
    variables=("OTEL_AGENTS_PRICES",),
    parse=parsers.price_file,
    check=parsers.prices,
    kind="a JSON or TOML file (the argument: a path or a mapping) of USD per million tokens, winning "
    "per model over genai-prices' data",
)
PROMETHEUS: Final = Param[tuple[str, int] | bool](
    setting="Prometheus endpoint",
    argument="prometheus",
    check=parsers.prometheus,
    kind="(host, port), True for the variables' host and port, or False; unset: on when "
    "OTEL_METRICS_EXPORTER names prometheus",
)
PROMETHEUS_HOST: Final = Param[str](
    setting="Prometheus endpoint",
    variables=("OTEL_EXPORTER_PROMETHEUS_HOST",),
    parse=parsers.host,
    default=DEFAULT_PROMETHEUS[0],
    kind="a host name or address",
)
PROMETHEUS_PORT: Final = Param[int](
    setting="Prometheus endpoint",
    variables=("OTEL_EXPORTER_PROMETHEUS_PORT",),
    parse=parsers.port,
    default=DEFAULT_PROMETHEUS[1],
    kind="a port, 0 to 65535",
)

DEFAULT_SAMPLE_MAX_SPANS_PER_RUN: Final = 2048
"""Spans one run may hold waiting for its decision; a run that passes it is kept from then on.
A waiting span takes about 3 KB (`python -m benchmarks.sampling`: 3.0 to 3.1 KB), so some 6 MB a
run: a run of some 700 turns."""
DEFAULT_SAMPLE_MAX_WAITING_SPANS: Final = 8192
"""Spans all runs may hold waiting; past it the oldest waiting run is kept and sent. Some 25 MB, the
envelope of the span queue (`SPAN_QUEUE_SIZE`): 16 two-agent runs open at once hold 280 spans, so
this covers some 450 such runs open at once; past that the oldest are sent rather than memory grow."""

SAMPLE_RUNS: Final = Param[float](
    setting="share of ordinary runs exported",
    argument="sample_runs",
    variables=("OTEL_AGENTS_SAMPLE_RUNS",),
    parse=parsers.ratio,
    check=parsers.sample_ratio,
    default=1.0,
    kind="a ratio from 0 to 1; 1: every run, and nothing waits",
)
KEEP_RUNS: Final = Param[Any](
    setting="runs always kept whole",
    argument="keep_runs",
    variables=("OTEL_AGENTS_KEEP_RUNS",),
    parse=parsers.keep_runs,
    check=parsers.keep_runs_argument,
    items=True,
    default=keeping.DEFAULT_KEEP_RUNS,
    kind="a comma list of error, loop, cancelled, unknown_usage, cost>USD, duration>SECONDS, tokens>N "
    "(set and empty: no rule); the argument also takes a callable of an otel_agents.RunSummary",
)
SAMPLE_MAX_SPANS_PER_RUN: Final = Param[int](
    setting="what may wait",
    variables=("OTEL_AGENTS_SAMPLE_MAX_SPANS_PER_RUN",),
    parse=parsers.whole(1),
    default=DEFAULT_SAMPLE_MAX_SPANS_PER_RUN,
    kind="a whole number above 0: spans one run holds waiting (past it, the run is kept)",
)
SAMPLE_MAX_WAITING_SPANS: Final = Param[int](
    setting="what may wait",
    variables=("OTEL_AGENTS_SAMPLE_MAX_WAITING_SPANS",),
    parse=parsers.whole(1),
    default=DEFAULT_SAMPLE_MAX_WAITING_SPANS,
    kind="a whole number above 0: spans all runs hold waiting (past it, the oldest waiting run is kept)",
)

OUTCOME: Final = Param[Any](
    setting="a run's outcome",
    argument="outcome",
    variables=("OTEL_AGENTS_OUTCOME",),
    parse=parsers.function_reference,
    check=parsers.outcome_callable,
    kind="module:function (imported at the first run's end); the argument: a function (sync or async) of "
    "the TaskResult or Response a run returned, returning a label, (label, score) or None",
)

METRIC_ATTRIBUTES: Final = Param[tuple[str, ...]](
    setting="metric labels from run attributes",
    variables=("OTEL_AGENTS_METRIC_ATTRIBUTES",),
    parse=parsers.metric_attributes,
    items=True,
    kind=f"comma list of at most {parsers.MAX_METRIC_ATTRIBUTES} keys given to run_attributes(attributes=...), e.g. "
    "tenant; each becomes a label of the run metrics (keys: letters, digits, _ . -; gen_ai.*, otel_agents.*, "
    "exported_*, le, quantile, job, instance reserved); unset: no such labels",
)


def _loop_threshold(field: str, variable: str, kind: str, default: int | None = None) -> Param[Number]:
    parse, check = parsers.threshold(field)
    return Param[Number](
        setting="loop thresholds",
        argument=f"loop_limits.{field}",
        variables=(variable,),
        parse=parse,
        check=check,
        default=default,
        kind=kind,
    )


LOOP_THRESHOLDS: Final[Mapping[str, Param[Number]]] = MappingProxyType(
    {
        "max_messages": _loop_threshold("max_messages", "OTEL_AGENTS_MAX_MESSAGES", "a whole number above 0"),
        "max_repeats": _loop_threshold(
            "max_repeats", "OTEL_AGENTS_MAX_REPEATS", "a whole number, at least 2", DEFAULT_MAX_REPEATS
        ),
        "token_budget": _loop_threshold("token_budget", "OTEL_AGENTS_TOKEN_BUDGET", "a whole number above 0"),
        "cost_budget_usd": _loop_threshold("cost_budget_usd", "OTEL_AGENTS_COST_BUDGET_USD", "USD, above 0"),
        "time_budget_s": _loop_threshold("time_budget_s", "OTEL_AGENTS_TIME_BUDGET_S", "seconds, above 0"),
    }
)
"""By the `LoopLimits` field each threshold sets; unset: the rule is off (repeats: 3)."""

PARAMS: Final[tuple[Param[Any], ...]] = (
    SERVICE_NAME,
    RESOURCE_ATTRIBUTES,
    SDK_DISABLED,
    SPAN_EXPORTER,
    METRIC_READERS,
    TRACES_EXPORTER,
    METRICS_EXPORTER,
    *OTLP_TRACES.params,
    *OTLP_METRICS.params,
    *BATCHING,
    TRACES_SAMPLER,
    TRACES_SAMPLER_ARG,
    SAMPLE_RUNS,
    KEEP_RUNS,
    SAMPLE_MAX_SPANS_PER_RUN,
    SAMPLE_MAX_WAITING_SPANS,
    OUTCOME,
    CAPTURE_CONTENT,
    REDACT,
    CONTENT_MAX_CHARS,
    RUNTIME_SPANS,
    STREAM_USAGE,
    RUN_PARENT,
    EXIT_TIMEOUT_S,
    STORE,
    STORE_MAX_MB,
    DATA_HOME,
    PRICES,
    PROMETHEUS,
    PROMETHEUS_HOST,
    PROMETHEUS_PORT,
    METRIC_ATTRIBUTES,
    *LOOP_THRESHOLDS.values(),
)
"""Every setting, in the order of the settings table of docs/configuration.md."""

VARIABLES: Final = frozenset(name for param in PARAMS for name in param.variables)


class Environment(dict[str, str]):
    """A snapshot of variables. `strict`: a value that cannot be used raises `ConfigError` (the
    CLI); else it is warned about once and treated as unset (`configure()`, zero code)."""

    def __init__(self, values: Mapping[str, str], *, strict: bool) -> None:
        super().__init__(values)
        self.strict = strict


def environment(names: Iterable[str] | None = None, *, strict: bool = False) -> Environment:
    """A snapshot of the table's variables (or of `names`, variables that are not settings of ours
    but change what a dependency does) as the process has them now.

    The one place otel-agents reads `os.environ`; each `configure()` takes one and hands it down.
    """
    chosen = VARIABLES if names is None else names
    return Environment({name: os.environ[name] for name in chosen if name in os.environ}, strict=strict)


def set_variable(name: str, value: str) -> None:
    """Set a variable another library reads (`os.environ`, for the processes this one starts too)."""
    os.environ[name] = value


_warned: set[str] = set()
"""The warnings about variables given once each (a process resolves its settings more than once),
at most `_WARNINGS_KEPT`."""
_WARNINGS_KEPT: Final = 256
process_state.hold(__name__, "_warned", bound="256 warnings", size=lambda: len(_warned), forget=_warned.clear)


def _warn_once(text: str) -> None:
    if text not in _warned:
        if len(_warned) < _WARNINGS_KEPT:
            _warned.add(text)
        logger.warning(text)

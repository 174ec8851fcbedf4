"""The parsers and checks of the settings table (`params.PARAMS`): each takes the variable's text
or the argument and returns the value, or raises `ConfigError` naming the variable or argument and
the value (OTLP header values are secrets: never shown)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Final, Literal, cast
from urllib.parse import unquote

from otel_agents._internal.config.errors import ConfigError
from otel_agents._internal.config.price_files import prices_from_argument, prices_from_file
from otel_agents._internal.genai.content import CONTENT_MODES, ContentMode
from otel_agents._internal.genai.keeping import KeepRule, KeepRules, RunSummary, parse_rule
from otel_agents._internal.genai.prices import Price

RuntimeSpans = Literal["auto", "off", "nested"]
StreamUsage = Literal["off", "request"]
RunParent = Literal["current", "link"]
Protocol = Literal["grpc", "http/protobuf"]
Number = int | float


# Parsers of a variable's text: `(variable, text) -> value`, raising ConfigError naming both.


def text(name: str, text: str) -> str:
    return text


def path(name: str, text: str) -> Path:
    return Path(text).expanduser()


def directory(name: str, text: str) -> Path:
    return Path(text)


def data_home(name: str, text: str) -> Path:
    """The user data directory that `XDG_DATA_HOME`, else `HOME`, names."""
    return Path(text) if name != "HOME" else Path(text) / ".local" / "share"


def boolean(name: str, text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(f"{name}={text!r}: expected 'true' or 'false'")


_LARGEST_WHOLE: Final = 2**31 - 1
"""The largest whole number a setting takes (a queue size, milliseconds): the SDK's queue cannot be
larger than the platform's sizes anyway."""


def number(*, integer: bool = False, minimum: float = 0) -> Callable[[str, str], Number]:
    def parse(name: str, text: str) -> Number:
        try:
            number: Number = int(text) if integer else float(text)
        except ValueError:
            kind = "a whole number" if integer else "a number"
            raise ConfigError(f"{name}={text!r}: expected {kind}") from None
        if (isinstance(number, float) and not math.isfinite(number)) or number < minimum:  # NaN, infinities
            raise ConfigError(f"{name}={text!r}: expected a finite number of at least {minimum:g}")
        if integer and number > _LARGEST_WHOLE:
            shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}..."
            raise ConfigError(f"{name}={shown}: expected a whole number of at most {_LARGEST_WHOLE}")
        return number

    return parse


def whole(minimum: int) -> Callable[[str, str], int]:
    parse = number(integer=True, minimum=minimum)
    return lambda name, text: int(parse(name, text))


def seconds(name: str, text: str) -> float:
    return float(number()(name, text))


def ratio(name: str, text: str) -> float:
    ratio = float(number()(name, text))
    if ratio > 1:
        raise ConfigError(f"{name}={text!r}: expected a ratio from 0 to 1")
    return ratio


def size_mb(name: str, text: str) -> float:
    size = float(number()(name, text))
    if size <= 0:
        raise ConfigError(f"{name}={text!r}: expected a size above 0")
    return size


def port(name: str, text: str) -> int:
    port = int(number(integer=True)(name, text))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{name}={text!r}: expected a port")
    return port


def host(name: str, text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._:\-\[\]]+", text):
        raise ConfigError(f"{name}={text!r}: expected a host name or address")
    return text


def key_values(name: str, text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for position, pair in enumerate(text.split(","), start=1):
        if not pair.strip():
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{name}: entry {position} ({pair.strip()!r}) is not key=value")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def existing_file(name: str, text: str) -> Path:
    if not Path(text).is_file():
        raise ConfigError(f"{name}={text!r}: no such file")
    return Path(text)


STORE_EXPORTER: Final = "otel_agents_store"
"""The embedded store's name as a traces exporter (`OTEL_TRACES_EXPORTER=otel_agents_store`, the
`opentelemetry_traces_exporter` entry point): `store` in the settings."""


def exporters(allowed: tuple[str, ...]) -> Callable[[str, str], tuple[str, ...]]:
    def parse(name: str, text: str) -> tuple[str, ...]:
        names = tuple(part.strip().lower() for part in text.split(",") if part.strip())
        for exporter in names:
            if exporter not in allowed:
                raise ConfigError(f"{name}={text!r}: {exporter!r} is not one of {', '.join(allowed)}")
        if "none" in names and len(names) > 1:
            raise ConfigError(f"{name}={text!r}: 'none' cannot be combined with other exporters")
        return tuple("store" if exporter == STORE_EXPORTER else exporter for exporter in names)

    return parse


SAMPLERS: Final = frozenset(
    {
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    }
)


def sampler(name: str, text: str) -> str:
    if text.lower() not in SAMPLERS:
        raise ConfigError(f"{name}={text!r}: expected one of {', '.join(sorted(SAMPLERS))}")
    return text.lower()


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


def price_file(name: str, text: str) -> Mapping[str, Price]:
    return prices_from_file(name, text)


MAX_METRIC_ATTRIBUTES: Final = 8
"""At most this many run attributes become metric labels: each multiplies the run metrics' series."""
_METRIC_ATTRIBUTE_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
_RESERVED_LABELS: Final = frozenset({"le", "quantile", "job", "instance"})
"""Prometheus labels that a run attribute must not become: bucket bounds, quantiles, the target."""
_RESERVED_LABEL_PREFIXES: Final = ("gen_ai_", "otel_agents_", "otel_scope_", "exported_", "__")
"""... and label families: ours, the SDK's scope, what Prometheus renames on a clash (`exported_instance`
is a process's service.instance.id behind the Collector)."""


def metric_label(key: str) -> str:
    """The Prometheus label a metric attribute key becomes (what OpenTelemetry's exporters write)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", key)


def metric_attributes(name: str, text: str) -> tuple[str, ...]:
    """`tenant,region`: run attribute keys (as given to `run_attributes(attributes=...)`) that become
    labels of the run metrics; at most `MAX_METRIC_ATTRIBUTES`, none reserved, none twice."""
    keys = tuple(part.strip() for part in text.split(","))
    if len(keys) > MAX_METRIC_ATTRIBUTES:
        raise ConfigError(
            f"{name}={text!r}: {len(keys)} keys, at most {MAX_METRIC_ATTRIBUTES} (every label multiplies the "
            "number of series)"
        )
    labels: dict[str, str] = {}
    for position, key in enumerate(keys, start=1):
        if not key:
            raise ConfigError(f"{name}={text!r}: entry {position} is empty (expected a comma list of keys)")
        if not _METRIC_ATTRIBUTE_KEY.fullmatch(key):
            raise ConfigError(
                f"{name}={text!r}: {key!r} is not a key of letters, digits, '_', '.' or '-' starting with a "
                "letter or '_' (at most 128 characters)"
            )
        label = metric_label(key)
        if label in _RESERVED_LABELS or label.startswith(_RESERVED_LABEL_PREFIXES):
            raise ConfigError(
                f"{name}={text!r}: {key!r} is reserved (it would be the label {label!r}; gen_ai.*, otel_agents.*, "
                "otel_scope_*, exported_*, __*, le, quantile, job and instance are not run attributes)"
            )
        if label in labels:
            raise ConfigError(f"{name}={text!r}: {key!r} and {labels[label]!r} are both the label {label!r}")
        labels[label] = key
    return keys


# Parsers that take an argument or a variable's text alike: `(source, value) -> value`.


def runtime_spans(source: str, value: object) -> RuntimeSpans:
    lowered = value.lower() if isinstance(value, str) else value
    if lowered in ("auto", "off", "nested"):
        return lowered
    raise ConfigError(f"{source}={value!r}: expected 'auto', 'off' or 'nested'")


def stream_usage(source: str, value: str) -> StreamUsage:
    lowered = value.lower()
    if lowered in ("off", "request"):
        return cast(StreamUsage, lowered)
    raise ConfigError(f"{source}={value!r}: expected 'off' or 'request'")


def run_parent(source: str, value: str) -> RunParent:
    lowered = value.lower()
    if lowered in ("current", "link"):
        return cast(RunParent, lowered)
    raise ConfigError(f"{source}={value!r}: expected 'current' or 'link'")


def protocol(source: str, value: object) -> Protocol:
    lowered = value.strip().lower() if isinstance(value, str) else value
    if lowered == "grpc":
        return "grpc"
    if lowered == "http/protobuf":
        return "http/protobuf"
    hint = " (the Python SDK has no http/json exporter)" if lowered == "http/json" else ""
    raise ConfigError(f"{source}={value!r}: expected 'grpc' or 'http/protobuf'{hint}")


def content_mode(source: str, value: object) -> ContentMode:
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


# Checks of an argument: `(argument, value) -> value`.


def service_name(source: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{source}={value!r}: expected a non-empty string")
    return value


def headers(source: str, value: object) -> dict[str, str]:
    if isinstance(value, str):
        return parse_headers(source, value)
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return {k.lower(): v for k, v in value.items()}
    raise ConfigError(f"{source}: expected a mapping of str to str or a 'k=v,k2=v2' string (value not shown)")


def endpoint(source: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{source}={value!r}: expected a URL")
    return value.strip()


def store(source: str, value: object) -> Path | bool:
    if isinstance(value, bool):
        return value
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ConfigError(f"{source}={value!r}: expected a directory path, or False for no store")
    return Path(value).expanduser()


def redact(source: str, value: object) -> Callable[[str], str]:
    if not callable(value):
        raise ConfigError(f"{source}={value!r}: expected a function taking a text and returning a text")
    return cast("Callable[[str], str]", value)


def span_exporter(source: str, value: object) -> object:
    if not callable(getattr(value, "export", None)):
        raise ConfigError(f"{source}={value!r}: expected a SpanExporter")
    return value


def metric_readers(source: str, value: object) -> Iterable[object]:
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, Iterable)
        or not all(hasattr(reader, "collect") for reader in value)
    ):
        raise ConfigError(f"{source}={value!r}: expected a list of MetricReader")
    return value


def prometheus(source: str, value: object) -> tuple[str, int] | bool:
    if isinstance(value, bool):
        return value
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and value[0]
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
        and 0 <= value[1] <= 65535
    ):
        return (value[0], value[1])
    raise ConfigError(f"{source}={value!r}: expected (host, port), True for the defaults, or False")


def prices(source: str, value: object) -> Mapping[str, Price]:
    return prices_from_argument(source, value)


def threshold_value(name: str, value: object, source: str, shown: str) -> Number:
    integer = name in ("max_messages", "max_repeats", "token_budget")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise ConfigError(f"{source}={shown}: expected {'a whole number' if integer else 'a number'}")
    if name == "max_repeats":
        if value < 2:
            raise ConfigError(f"{source}={shown}: expected at least 2")
    elif not value > 0:  # also refuses NaN
        raise ConfigError(f"{source}={shown}: expected a number above 0")
    return value


def threshold(field: str) -> tuple[Callable[[str, str], Number], Callable[[str, object], Number]]:
    """(parse, check) of one loop threshold: a whole number or a number, above 0 (repeats: >= 2)."""
    integer = field in ("max_messages", "max_repeats", "token_budget")

    def parse(name: str, text: str) -> Number:
        try:
            value: Number = int(text) if integer else float(text)
        except ValueError:
            raise ConfigError(f"{name}={text!r}: expected {'a whole number' if integer else 'a number'}") from None
        return threshold_value(field, value, name, repr(text))

    def check(source: str, value: object) -> Number:
        return threshold_value(field, value, source, repr(value))

    return parse, check


def keep_runs(name: str, text: str) -> KeepRules:
    """`OTEL_AGENTS_KEEP_RUNS`: a comma list of rules (`error,loop,cost>1`)."""
    return KeepRules(rules=_rules(name, text))


def _rules(source: str, text: str) -> tuple[KeepRule, ...]:
    rules = []
    for position, part in enumerate(text.split(","), start=1):
        if not part.strip():
            if text.strip():
                raise ConfigError(f"{source}={text!r}: entry {position} is empty (expected a comma list of rules)")
            continue
        try:
            rules.append(parse_rule(source, part))
        except ValueError as error:
            raise ConfigError(f"{source}={text!r}: {error}") from None
    return tuple(rules)


def keep_runs_argument(source: str, value: object) -> KeepRules | Callable[[RunSummary], object]:
    """`configure(keep_runs=...)`: a comma list of rules, a callable of a `RunSummary` (added to the
    variable's rules, else the default's), or a list of rules and callables (which replaces them)."""
    if callable(value):
        return cast("Callable[[RunSummary], object]", value)
    if isinstance(value, str):
        return KeepRules(rules=_rules(source, value))
    if isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        rules: list[KeepRule] = []
        callables: list[Callable[[RunSummary], object]] = []
        for entry in value:
            if callable(entry):
                callables.append(entry)
            elif isinstance(entry, str):
                rules.extend(_rules(source, entry))
            else:
                raise ConfigError(f"{source}: {entry!r} is neither a rule nor a callable of a RunSummary")
        return KeepRules(rules=tuple(rules), callables=tuple(callables))
    raise ConfigError(
        f"{source}={value!r}: expected a comma list of rules, a callable of an otel_agents.RunSummary, "
        "or a list of both"
    )


def sample_ratio(source: str, value: object) -> float:
    """`configure(sample_runs=...)`: a number from 0 to 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:  # NaN fails too
        raise ConfigError(f"{source}={value!r}: expected a ratio from 0 to 1")
    return float(value)


_REFERENCE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def function_reference(name: str, text: str) -> str:
    """`module:function` (imported when first needed, not here)."""
    if not _REFERENCE.fullmatch(text):
        raise ConfigError(f"{name}={text!r}: expected module:function, e.g. myapp.outcomes:judge")
    return text


def outcome_callable(source: str, value: object) -> Callable[..., object]:
    if not callable(value):
        raise ConfigError(
            f"{source}={value!r}: expected a function of the run's TaskResult or Response returning a label, "
            "(label, score) or None"
        )
    return value

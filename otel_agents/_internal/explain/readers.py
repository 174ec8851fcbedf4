"""Where a run's spans are read from, each as `Span`s for the one analysis (the embedded store:
`otel_agents._internal.export.store.explained`): Jaeger's query API (`/api/v3/traces/{trace_id}`, OTLP JSON), an OTLP
JSON file, and the SDK's `ReadableSpan`s in process."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from otel_agents._internal.explain.errors import ExplainError, NotOtlpJson, RunNotFound, Unreachable
from otel_agents._internal.explain.model import Span, SpanEvent
from otel_agents._internal.explain.otlp_json import spans_of_text

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


JAEGER_TIMEOUT_S: Final = 10.0
_HEX: Final = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Read:
    """What a reader read: the spans, the run to explain among them (None: the only one), and how
    errors name where they came from."""

    spans: list[Span]
    run: str | None
    where: str


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def plain_attributes(values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: _plain(v) for k, v in (values or {}).items()}


def is_trace_id(text: str) -> bool:
    """Whether `text` is a whole trace id (32 lowercase hexadecimal digits)."""
    return len(text) == 32 and set(text) <= _HEX


# --- an OTLP JSON file ---------------------------------------------------------------------------


def read_file(path: Path, run: str | None = None) -> Read:
    """The spans of an OTLP JSON file: Jaeger's `/api/v3/traces` answer saved, or OTLP/JSON lines
    (one `ExportTraceServiceRequest` a line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise NotOtlpJson(f"{path} is not OTLP JSON: not UTF-8 text") from None
    except OSError as error:
        raise ExplainError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        spans = spans_of_text(text)
    except NotOtlpJson as error:
        raise NotOtlpJson(f"{path} is not OTLP JSON: {error}") from None
    return Read(spans, run, str(path))


# --- Jaeger --------------------------------------------------------------------------------------


def _trace_id(text: str) -> str:
    cleaned = text.strip().lower()
    if not cleaned or len(cleaned) > 32 or not set(cleaned) <= _HEX:
        raise RunNotFound(f"{text!r} is not a trace id (up to 32 hexadecimal digits)")
    return cleaned.rjust(32, "0")


def server_url(url: str, option: str, what: str) -> str:
    """`url` without a trailing slash when it is the base URL of a server (http or https, a host, no
    query, fragment or credentials: the web page shows it on every page); ValueError naming `option`."""
    cleaned = url.strip()
    parsed = urllib.parse.urlsplit(cleaned)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise ValueError(f"{option} {url!r}: expected the base URL of {what}, http://HOST:PORT")
    if parsed.username is not None or parsed.password is not None:
        raise ValueError(f"{option}: a URL with credentials in it is refused (the page shows its servers' URLs)")
    try:
        parsed.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ValueError(f"{option} {url!r}: the port is not a number from 0 to 65535") from None
    return cleaned.rstrip("/")


def jaeger_url(base: str, trace_id: str) -> str:
    """Where Jaeger's query API (its UI's base URL, or the query service's) answers for a trace."""
    try:
        checked = server_url(base, "--jaeger", "Jaeger's UI or query API")
    except ValueError as error:
        raise ExplainError(str(error)) from None
    return f"{checked}/api/v3/traces/{trace_id}"


def read_jaeger(base: str, trace: str, run: str | None = None, *, timeout_s: float = JAEGER_TIMEOUT_S) -> Read:
    """The trace as Jaeger's `/api/v3/traces/{trace_id}` answers it (OTLP JSON). RunNotFound when
    Jaeger has no such trace, Unreachable when it cannot be asked."""
    trace_id = _trace_id(trace)
    url = jaeger_url(base, trace_id)
    missing = f"no trace {trace_id} in Jaeger at {base}" + _whole_id_hint(trace, base)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise RunNotFound(missing) from None
        detail = _error_message(error.read())
        if 400 <= error.code < 500:
            raise ExplainError(f"Jaeger at {base} refused {url}: {error.code} {detail}".rstrip()) from None
        raise Unreachable(f"Jaeger at {base} answered {error.code} {detail}".rstrip()) from None
    except OSError as error:  # URLError, a refused connection, a timeout
        reason = getattr(error, "reason", None) or error
        raise Unreachable(f"cannot reach Jaeger at {base}: {reason}") from None
    try:
        text = body.decode("utf-8")
        spans = spans_of_text(text)
    except (UnicodeDecodeError, NotOtlpJson) as error:
        raise NotOtlpJson(f"Jaeger at {base} did not answer with OTLP JSON ({error}): is it Jaeger's?") from None
    if not spans:  # some versions answer an unknown trace with an empty result
        raise RunNotFound(missing)
    return Read(spans, run, f"trace {trace_id}")


def _whole_id_hint(given: str, base: str) -> str:
    """Said where the id given was short: Jaeger finds a trace by its whole id, never a prefix."""
    if len(given.strip()) >= 32:
        return ""
    return (
        f" (Jaeger looks a trace up by its whole id, 32 hexadecimal digits, not a prefix; its traces of a "
        f"service: {base.strip().rstrip('/')}/api/traces?service=NAME)"
    )


def _error_message(body: bytes) -> str:
    """The message of a Jaeger error answer, in one line."""
    try:
        answer = json.loads(body)
        message = answer.get("error", {}).get("message") if isinstance(answer, dict) else None
    except (ValueError, AttributeError):
        message = None
    text = message if isinstance(message, str) else body.decode("utf-8", "replace")
    return " ".join(text.split())[:200]


# --- in process ----------------------------------------------------------------------------------


def readable_span(span: ReadableSpan) -> Span:
    context = span.context
    if context is None:
        raise ExplainError(f"span {span.name!r} has no span context")
    return Span(
        name=span.name,
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        attributes=dict(span.attributes or {}),
        events=tuple(SpanEvent(e.name, e.timestamp or 0, dict(e.attributes or {})) for e in span.events),
        status=span.status.status_code.name,
    )


def readable_spans(spans: Iterable[ReadableSpan]) -> list[Span]:
    return [readable_span(span) for span in spans]

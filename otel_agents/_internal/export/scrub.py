"""The scrubber: what of a span leaves the process. With content capture off, user content that
AutoGen's own spans carry too (exception messages and stack traces in events, status descriptions,
the runtime's `message` attribute) is removed; with it on, those texts are redacted and bounded.
Either way, text that UTF-8 cannot encode (lone surrogates: a `surrogateescape`d byte, half an
emoji pair) becomes U+FFFD: OTLP's encoder drops such an attribute with an error, and refuses the
batch for such a span name; SQLite refuses it too."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Status

from otel_agents._internal import keys as sc
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.genai.content import ContentPolicy

_STACKTRACE: Final = "exception.stacktrace"
_EXCEPTION_TEXT: Final = ("exception.message", _STACKTRACE)
_CONTENT_ATTRIBUTES: Final = ag.RUNTIME_CONTENT_ATTRIBUTES | frozenset(
    {
        sc.MESSAGE_CONTENT,
        sc.INPUT_VALUE,  # a run's task and answer (ours with capture on; OpenInference's instrumentations')
        sc.OUTPUT_VALUE,
        sc.GEN_AI_INPUT_MESSAGES,
        sc.GEN_AI_OUTPUT_MESSAGES,
        "gen_ai.system_instructions",  # written by other GenAI instrumentations, not by us
        sc.GEN_AI_TOOL_CALL_ARGUMENTS,
        sc.GEN_AI_TOOL_CALL_RESULT,
        *_EXCEPTION_TEXT,
    }
)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""What UTF-8 cannot encode in a Python text: OTLP's protobuf encoder (and SQLite) refuse it."""
_REPLACEMENT: Final = "\ufffd"


def scrub(span: ReadableSpan, policy: ContentPolicy) -> ReadableSpan:
    """The span without user content the policy does not let out, its texts encodable (the same
    object if it needs neither)."""
    attributes = span.attributes or {}
    events = span.events
    fixed = _encodable(span, attributes, events)
    if fixed is not span:
        span, attributes, events = fixed, fixed.attributes or {}, fixed.events
    if policy.enabled:
        return _redacted(span, policy)
    has_content = not _CONTENT_ATTRIBUTES.isdisjoint(attributes)
    has_exception_text = bool(events) and any(
        key in _EXCEPTION_TEXT for event in events for key in (event.attributes or {})
    )
    if not has_content and not has_exception_text and not span.status.description:
        return span
    return _copy(
        span,
        attributes={k: v for k, v in attributes.items() if k not in _CONTENT_ATTRIBUTES},
        events=[
            Event(e.name, {k: v for k, v in (e.attributes or {}).items() if k not in _CONTENT_ATTRIBUTES}, e.timestamp)
            for e in span.events
        ],
        status=Status(span.status.status_code, None),
    )


def _redacted(span: ReadableSpan, policy: ContentPolicy) -> ReadableSpan:
    """With capture on: exception texts and status descriptions (AutoGen's spans carry them too)
    redacted, when there is a redact function, and cut to the size limit, as all content is."""
    exception_texts = any(key in _EXCEPTION_TEXT for event in span.events for key in (event.attributes or {}))
    if not exception_texts and not span.status.description:
        return span
    events = [
        Event(
            e.name,
            {
                k: policy.text(v, keep_end=k == _STACKTRACE) if k in _EXCEPTION_TEXT and isinstance(v, str) else v
                for k, v in (e.attributes or {}).items()
            },
            e.timestamp,
        )
        for e in span.events
    ]
    description = span.status.description
    status = Status(span.status.status_code, policy.text(description) if description else None)
    return _copy(span, attributes=span.attributes, events=events, status=status)


def _joined(values: Any) -> str:
    return "".join(v for v in values if type(v) is str)


def _text(value: Any) -> str:
    return value if type(value) is str else _joined(value)


def _fixed(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(_REPLACEMENT, value)
    if isinstance(value, tuple | list):
        return tuple(_SURROGATE.sub(_REPLACEMENT, v) if isinstance(v, str) else v for v in value)
    return value


def _fixed_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {_fixed(k): _fixed(v) for k, v in (attributes or {}).items()}


def encodable(span: ReadableSpan) -> ReadableSpan:
    """The span with every lone surrogate of its name, attributes, events and status replaced (the
    same object when it has none: the usual case, found in one pass over its attribute values and
    one `isascii()` of its texts joined). Attribute keys are not looked at (they are names)."""
    return _encodable(span, span.attributes or {}, span.events)


def _encodable(span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[Event]) -> ReadableSpan:
    # a plain dict at C speed (BoundedAttributes.copy(), through the span's read-only view), not
    # the view's item by item, lock and all
    values = attributes.copy().values() if hasattr(attributes, "copy") else dict(attributes).values()
    texts = [v if type(v) is str else _joined(v) for v in values if type(v) is str or type(v) is tuple]
    texts.append(span.name)
    description = span.status.description
    if description:
        texts.append(description)
    for event in events:  # few spans have events
        texts.append(event.name)
        texts += [_text(v) for v in (event.attributes or {}).values() if type(v) is str or type(v) is tuple]
    joined = "".join(texts)
    if joined.isascii() or _SURROGATE.search(joined) is None:
        return span
    return _copy(
        span,
        name=_fixed(span.name),
        attributes=_fixed_attributes(attributes),
        events=[Event(_fixed(e.name), _fixed_attributes(e.attributes), e.timestamp) for e in span.events],
        status=Status(span.status.status_code, _fixed(description) if description is not None else None),
    )


def _copy(
    span: ReadableSpan, *, attributes: Any, events: Sequence[Event], status: Status, name: str | None = None
) -> ReadableSpan:
    return ReadableSpan(
        name=span.name if name is None else name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )

"""The scrubber: what of a span leaves the process. With content capture off, user content that
AutoGen's own spans carry too (exception messages and stack traces in events, status descriptions,
the runtime's `message` attribute) is removed; with it on, those texts are redacted and bounded.
Either way, text that UTF-8 cannot encode (lone surrogates: a `surrogateescape`d byte, half an
emoji pair) becomes U+FFFD: OTLP's encoder drops such an attribute with an error, and refuses the
batch for such a span name; SQLite refuses it too."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
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
    return scrub_span(span, policy if policy.enabled else None)


def scrub_span(span: ReadableSpan, capturing: ContentPolicy | None) -> ReadableSpan:
    """`scrub`, the policy's `enabled` (a property) asked once by the caller, not for each span:
    `capturing` is the policy when it lets content out, else None. Every exported span comes here,
    so `_all_ascii`'s test is made inline, and the attributes read as in `_plain`."""
    # its attributes read once, as a plain dict at C speed (BoundedAttributes.copy(), through the
    # span's read-only view), not the view's item by item, lock and all
    try:
        attributes: dict[str, Any] = span.attributes.copy()  # type: ignore[union-attr]
    except AttributeError:
        attributes = _plain(span.attributes)
    events = span.events
    description = span.status.description
    ascii_only = not events and span.name.isascii() and not (description and not description.isascii())
    if ascii_only:
        for value in attributes.values():
            kind = type(value)
            if kind is str:
                if not value.isascii():
                    ascii_only = False
                    break
            elif kind not in _SCALARS and (kind is not tuple or not _ascii_items(value)):
                ascii_only = False
                break
    if not ascii_only:  # a text may hold a lone surrogate: looked for
        fixed = _encodable(span, attributes, events)
        if fixed is not span:
            span, attributes, events = fixed, _plain(fixed.attributes), fixed.events
            description = span.status.description
    if capturing is not None:
        return _redacted(span, capturing)
    has_content = not _CONTENT_ATTRIBUTES.isdisjoint(attributes)
    has_exception_text = bool(events) and any(
        key in _EXCEPTION_TEXT for event in events for key in (event.attributes or {})
    )
    if not has_content and not has_exception_text and not description:
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


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if not attributes:
        return {}
    return attributes.copy() if hasattr(attributes, "copy") else dict(attributes)


def _all_ascii(span: ReadableSpan, attributes: dict[str, Any], events: Sequence[Event]) -> bool:
    """Whether the span's name, status description and attribute values are all ASCII texts (or no
    texts), and it has no events: the usual span, which holds no lone surrogate. `str.isascii()`
    reads a flag CPython keeps with each text: no text is scanned or copied here. A value's type
    is told by identity and a set lookup: a mapping, a list or a text of a str subclass is looked
    at in full."""
    if events or not span.name.isascii():
        return False
    description = span.status.description
    if description and not description.isascii():
        return False
    for value in attributes.values():
        kind = type(value)
        if kind is str:
            if not value.isascii():
                return False
        elif kind not in _SCALARS and (kind is not tuple or not _ascii_items(value)):
            return False
    return True


def _ascii_items(value: tuple[Any, ...]) -> bool:
    for item in value:
        kind = type(item)
        if kind is str:
            if not item.isascii():
                return False
        elif kind not in _SCALARS:
            return False
    return True


_SCALARS: Final = frozenset({int, float, bool, bytes, type(None)})


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


def _texts(value: Any) -> Iterator[str]:
    """Every text in an attribute value: itself, or those of a sequence or mapping (the SDK's
    extended attributes nest them)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(key)
            yield from _texts(item)


def _fixed(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(_REPLACEMENT, value)
    if isinstance(value, tuple | list):
        return tuple(_fixed(v) for v in value)
    if isinstance(value, Mapping):
        return {_fixed(k): _fixed(v) for k, v in value.items()}
    return value


def _fixed_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {_fixed(k): _fixed(v) for k, v in (attributes or {}).items()}


def encodable(span: ReadableSpan) -> ReadableSpan:
    """The span with every lone surrogate of its name, attributes, events and status replaced (the
    same object when it has none: the usual case, an ASCII span, found without scanning a text).
    Attribute keys are not looked at (they are names)."""
    attributes = _plain(span.attributes)
    events = span.events
    return span if _all_ascii(span, attributes, events) else _encodable(span, attributes, events)


def _encodable(span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[Event]) -> ReadableSpan:
    texts = [text for value in attributes.values() for text in _texts(value)]
    texts.append(span.name)
    description = span.status.description
    if description:
        texts.append(description)
    for event in events:
        texts.append(event.name)
        texts += [text for value in (event.attributes or {}).values() for text in _texts(value)]
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

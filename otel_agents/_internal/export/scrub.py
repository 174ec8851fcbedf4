"""The scrubber: what of a span leaves the process. With content capture off, user content that
AutoGen's own spans carry too (exception messages and stack traces in events, status descriptions,
the runtime's `message` attribute) is removed; with it on, those texts are redacted and bounded."""

from __future__ import annotations

from collections.abc import Sequence
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


def scrub(span: ReadableSpan, policy: ContentPolicy) -> ReadableSpan:
    """The span without user content the policy does not let out (the same object if it has none)."""
    attributes = span.attributes or {}
    if policy.enabled:
        return _redacted(span, policy)
    has_content = not _CONTENT_ATTRIBUTES.isdisjoint(attributes)
    events = span.events
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


def _copy(span: ReadableSpan, *, attributes: Any, events: Sequence[Event], status: Status) -> ReadableSpan:
    return ReadableSpan(
        name=span.name,
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

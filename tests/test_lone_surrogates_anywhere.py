"""Lone surrogates anywhere in a span's attribute values leave the process as U+FFFD: the SDK keeps a
mapping, a sequence of sequences and a text of a `str` subclass as attribute values, and the guard
looks into each of them as it does into a plain text (tests/test_odd_input.py has whole runs)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_agents._internal.export.scrub import encodable, scrub
from otel_agents._internal.genai.content import ContentPolicy

LONE = "a \ud800 b"
REPLACED = "a \ufffd b"


class Text(str):
    """A text of a `str` subclass, as an application's enum or wrapper gives one."""


def recorded(attributes: dict[str, Any]) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer(__name__).start_as_current_span("work") as span:
        span.set_attributes(attributes)
    (finished,) = exporter.get_finished_spans()
    return finished


@pytest.mark.parametrize(
    ("value", "exported"),
    [
        ({"note": LONE}, {"note": REPLACED}),
        (((LONE, "b"), ("c",)), ((REPLACED, "b"), ("c",))),
        ((1, LONE), (1, REPLACED)),
        (Text(LONE), REPLACED),
    ],
    ids=["in a mapping", "in a sequence of sequences", "in a mixed sequence", "a str subclass"],
)
@pytest.mark.parametrize("guard", ["content scrub", "store"])
def test_a_lone_surrogate_nested_in_an_attribute_value_is_exported_as_a_replacement_character(
    value: Any, exported: Any, guard: str
) -> None:
    span = recorded({"otel_agents.test.value": value, "otel_agents.test.plain": "ok"})
    out = scrub(span, ContentPolicy()) if guard == "content scrub" else encodable(span)

    assert dict(out.attributes or {}) == {"otel_agents.test.value": exported, "otel_agents.test.plain": "ok"}
    encode_spans([out]).SerializeToString()


def test_a_span_of_ascii_texts_and_numbers_is_exported_as_it_is() -> None:
    span = recorded({"gen_ai.agent.name": "writer", "gen_ai.usage.input_tokens": 20, "ratio": 0.5, "ok": True})
    assert scrub(span, ContentPolicy()) is span
    assert encodable(span) is span


def test_non_ascii_text_without_lone_surrogates_is_exported_as_it_is() -> None:
    span = recorded({"gen_ai.agent.name": "rédacteur ✍", "tags": ("été", "冬")})
    assert scrub(span, ContentPolicy()) is span
    assert encodable(span) is span

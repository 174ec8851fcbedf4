"""The spans of a run (ours, and AutoGen's runtime spans when `nested`) leave the recorder as the SDK's would."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util import types

import otel_agents
from otel_agents._internal.tracing.recorded_spans import RecordedSpan, SpanRecorder
from tests.support.spans import Tree, one_trace
from tests.support.teams import writers_room

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PROCESS_ATTRIBUTES = {
    "messaging.operation": "process",
    "messaging.destination": "writer",
    "sender_agent_type": "group_chat_manager",
    "recipient_agent_class": "ChatAgentContainer",
    "message_context": '{"is_rpc": false}',
}


class DropsPublish(Sampler):
    """Records every span but `autogen publish ...`, and tags what it records."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        if name.startswith("autogen publish"):
            return SamplingResult(Decision.DROP, None, parent.trace_state)
        return SamplingResult(
            Decision.RECORD_AND_SAMPLE, {**(attributes or {}), "sampled.by": "test"}, parent.trace_state
        )

    def get_description(self) -> str:
        return "DropsPublish"


class SeesStarts(SpanProcessor):
    """A user's processor: tags every span it sees start."""

    def __init__(self) -> None:
        self.started: list[Any] = []
        self.read: list[dict[str, Any]] = []

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        self.started.append(span)
        self.read.append(
            {read: getattr(span, read) for read in self.READS}
            | {"status": span.status.status_code, "attributes": dict(span.attributes)}
        )
        span.set_attribute("seen.on_start", True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True  # nothing held (older SDKs' base class returns None, which reads as a failure)

    READS = ("name", "parent", "kind", "resource", "instrumentation_scope", "end_time", "events", "links")


def pipeline(
    sampler: Sampler | None = None, limits: SpanLimits | None = None
) -> tuple[trace.Tracer, InMemorySpanExporter, SeesStarts]:
    """An SDK tracer with the SDK's default sampler (parent-based, always on) unless told otherwise."""
    provider = TracerProvider(sampler=sampler, span_limits=limits or SpanLimits())
    exporter = InMemorySpanExporter()
    starts = SeesStarts()
    provider.add_span_processor(starts)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("autogen SingleThreadedAgentRuntime", "0.7.5"), exporter, starts


def started_both_ways(
    tracer: trace.Tracer,
    name: str,
    attributes: types.Attributes,
    links: Sequence[Link] = (),
    trace_state: TraceState | None = None,
    parent_sampled: bool = True,
) -> tuple[trace.Span, trace.Span]:
    """(the SDK's span, the recorder's span), started alike under the same parent."""
    flags = TraceFlags(TraceFlags.SAMPLED if parent_sampled else TraceFlags.DEFAULT)
    parent_span = trace.NonRecordingSpan(SpanContext(0x1234, 0x5678, False, flags, trace_state or TraceState()))
    context = trace.set_span_in_context(parent_span)
    recorder = SpanRecorder.of(tracer)
    assert recorder is not None
    by_sdk = tracer.start_span(name, context, SpanKind.CONSUMER, attributes, links)
    by_recorder = recorder.start(name, parent_span.get_span_context(), context, SpanKind.CONSUMER, attributes, links)
    assert by_recorder is not None
    return by_sdk, by_recorder


def exported(span: ReadableSpan) -> dict[str, Any]:
    """What an exporter sees, but the ids and clocks the two paths cannot share."""
    return {
        "name": span.name,
        "kind": span.kind,
        "trace_id": span.context.trace_id if span.context else None,
        "flags": span.context.trace_flags if span.context else None,
        "trace_state": span.context.trace_state.to_header() if span.context else None,
        "parent": span.parent,
        "attributes": dict(span.attributes or {}),
        "dropped_attributes": span.dropped_attributes,
        "events": [(e.name, dict(e.attributes or {})) for e in span.events],
        "dropped_events": span.dropped_events,
        "links": [(link.context, dict(link.attributes or {}), link.dropped_attributes) for link in span.links],
        "dropped_links": span.dropped_links,
        "status": (span.status.status_code, span.status.description),
        "resource": dict(span.resource.attributes),
        "scope": span.instrumentation_scope,
        "timed": span.start_time is not None and span.end_time is not None and span.start_time <= span.end_time,
    }


def both_exported(exporter: InMemorySpanExporter) -> tuple[dict[str, Any], dict[str, Any]]:
    by_sdk, by_recorder = exporter.get_finished_spans()
    return exported(by_sdk), exported(by_recorder)


def do_to_both(spans: tuple[trace.Span, trace.Span], *actions: Callable[[trace.Span], Any]) -> None:
    for span in spans:
        for action in actions:
            action(span)


def test_a_recorded_span_exports_as_the_sdks_span_does() -> None:
    tracer, exporter, _ = pipeline()
    link = Link(SpanContext(0x99, 0x98, False, TraceFlags(TraceFlags.SAMPLED)))
    state = TraceState([("vendor", "kept")])
    spans = started_both_ways(tracer, "autogen process writer", PROCESS_ATTRIBUTES, [link], trace_state=state)
    assert isinstance(spans[1], RecordedSpan), "the recorder's own span, not the SDK's"
    do_to_both(spans, lambda span: span.end())

    by_sdk, by_recorder = both_exported(exporter)
    assert by_recorder == by_sdk
    assert by_recorder["attributes"]["messaging.destination"] == "writer"
    assert by_recorder["links"][0][0] == link.context and by_recorder["timed"]
    assert by_recorder["trace_state"] == "vendor=kept"


def test_what_callers_do_to_a_recorded_span_is_recorded_as_the_sdk_records_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="otel_agents._internal.tracing.recorded_spans")
    tracer, exporter, _ = pipeline()
    spans = started_both_ways(tracer, "autogen process critic", PROCESS_ATTRIBUTES)
    try:
        raise ValueError("the handler failed")
    except ValueError as error:
        failure = error
    extra = SpanContext(0x77, 0x76, False)
    do_to_both(
        spans,
        lambda span: span.set_attribute("turn", 3),
        lambda span: span.set_attribute("invalid", None),  # type: ignore[arg-type]
        lambda span: span.set_attributes({"tags": ["a", "b"], "ratio": 0.5}),
        lambda span: span.add_event("retry", {"attempt": 2}),
        lambda span: span.record_exception(failure, {"handled": False}),
        lambda span: span.set_status(Status(StatusCode.ERROR, "ValueError: the handler failed")),
        lambda span: span.set_status(StatusCode.UNSET),  # ignored
        lambda span: span.add_link(extra, {"why": "retry"}),
        lambda span: span.update_name("autogen process critic (retried)"),
        lambda span: span.end(),
        lambda span: span.set_attribute("after", "the end"),  # ignored, with a warning
        lambda span: span.end(),  # ignored, with a warning
    )

    by_sdk, by_recorder = both_exported(exporter)
    assert by_recorder == by_sdk
    assert by_recorder["status"] == (StatusCode.ERROR, "ValueError: the handler failed")
    assert [name for name, _ in by_recorder["events"]] == ["retry", "exception"]
    assert by_recorder["events"][1][1]["exception.message"] == "the handler failed"
    assert "after" not in by_recorder["attributes"]
    assert not spans[1].is_recording()
    after_the_end = [
        r.getMessage()
        for r in caplog.records
        if r.name == "otel_agents._internal.tracing.recorded_spans" and "ended span" in r.getMessage()
    ]
    assert len(after_the_end) == 2, "a warning for each call after the end, as the SDK gives"


def test_a_recorded_span_used_as_a_block_ends_with_the_error_that_escaped_it() -> None:
    tracer, exporter, _ = pipeline()
    for span in started_both_ways(tracer, "execute_tool lookup", {"gen_ai.tool.name": "lookup"}):
        with pytest.raises(KeyError), span:
            raise KeyError("city")

    by_sdk, by_recorder = both_exported(exporter)
    assert by_recorder == by_sdk
    assert by_recorder["status"] == (StatusCode.ERROR, "KeyError: 'city'")
    assert by_recorder["events"][0][1]["exception.escaped"] == "True"


def test_values_of_every_kind_are_kept_as_the_sdk_keeps_them() -> None:
    limits = SpanLimits(max_span_attributes=5, max_span_attribute_length=8)
    tracer, exporter, _ = pipeline(limits=limits)  # its processor sets a fourth attribute at the start
    spans = started_both_ways(tracer, "message writer", {"index": 1, "latency_ms": 2.5, "cached": False})
    do_to_both(
        spans,
        lambda span: span.set_attribute("finish_reasons", ("stop",)),
        lambda span: span.set_attribute("index", 2),  # set again: the most recent, so kept below
        lambda span: span.set_attribute("tokens", [3, 4]),  # a list: a tuple, as the SDK makes it
        lambda span: span.set_attribute("text", "longer than eight"),  # cut to eight
        lambda span: span.set_attribute("", "no key"),  # dropped
        lambda span: span.end(),
    )

    by_sdk, by_recorder = both_exported(exporter)
    assert by_recorder == by_sdk
    assert by_recorder["attributes"] == {
        "seen.on_start": True,
        "finish_reasons": ("stop",),
        "index": 2,
        "tokens": (3, 4),
        "text": "longer t",
    }
    assert by_recorder["dropped_attributes"] > 0  # counted as the SDK counts them (compared above)


def test_a_recorded_span_keeps_to_the_span_limits() -> None:
    limits = SpanLimits(max_span_attributes=3, max_span_attribute_length=6, max_events=1, max_links=1)
    tracer, exporter, _ = pipeline(limits=limits)
    links = [Link(SpanContext(0x99, n, False)) for n in (1, 2)]
    spans = started_both_ways(tracer, "autogen send critic", PROCESS_ATTRIBUTES, links)
    do_to_both(
        spans,
        lambda span: span.add_event("first"),
        lambda span: span.add_event("second"),
        lambda span: span.end(),
    )

    by_sdk, by_recorder = both_exported(exporter)
    assert by_recorder == by_sdk
    # five of AutoGen's, one set by a processor at the start: the three set last are kept, cut to six
    assert by_recorder["attributes"] == {
        "recipient_agent_class": "ChatAg",
        "message_context": '{"is_r',
        "seen.on_start": True,
    }
    assert by_recorder["dropped_attributes"] == 3
    assert (by_recorder["dropped_events"], by_recorder["dropped_links"]) == (1, 1)


@pytest.mark.parametrize("name", ["autogen process writer", "autogen publish group_topic"])
def test_the_tracers_sampler_decides_for_a_recorded_span(name: str) -> None:
    tracer, exporter, _ = pipeline(sampler=DropsPublish())
    state = TraceState([("vendor", "kept")])
    by_sdk, by_recorder = started_both_ways(tracer, name, PROCESS_ATTRIBUTES, trace_state=state)
    for span in (by_sdk, by_recorder):
        span.end()

    assert by_recorder.is_recording() is by_sdk.is_recording() is False  # both ended, or never recorded
    assert by_recorder.get_span_context().trace_flags == by_sdk.get_span_context().trace_flags
    assert by_recorder.get_span_context().trace_state == state
    finished = exporter.get_finished_spans()
    if name.startswith("autogen publish"):
        assert not finished and not by_recorder.get_span_context().trace_flags.sampled
    else:
        by_sdk_exported, by_recorder_exported = (exported(span) for span in finished)
        assert by_recorder_exported == by_sdk_exported
        assert by_recorder_exported["attributes"]["sampled.by"] == "test"


def test_a_run_dropped_by_the_default_sampler_records_no_runtime_span() -> None:
    tracer, exporter, starts = pipeline()
    spans = started_both_ways(tracer, "autogen process writer", PROCESS_ATTRIBUTES, parent_sampled=False)
    for span in spans:
        span.end()
    assert not exporter.get_finished_spans() and not starts.started
    assert [span.is_recording() for span in spans] == [False, False]
    assert spans[1].get_span_context().span_id != 0x5678, "a span id of its own all the same"


@pytest.mark.parametrize("sampler", [TraceIdRatioBased(0.0), TraceIdRatioBased(1.0), ParentBased(ALWAYS_ON)])
def test_other_samplers_keep_or_drop_a_recorded_span_as_they_would_the_sdks(sampler: Sampler) -> None:
    tracer, exporter, _ = pipeline(sampler=sampler)
    kept = sampler.get_description() != "TraceIdRatioBased{0.0}"
    spans = started_both_ways(
        tracer, "autogen process writer", PROCESS_ATTRIBUTES, trace_state=TraceState([("v", "1")])
    )
    for span in spans:
        span.end()
    assert len(exporter.get_finished_spans()) == (2 if kept else 0)
    if kept:
        by_sdk, by_recorder = both_exported(exporter)
        assert by_recorder == by_sdk
    else:
        assert [span.get_span_context().trace_flags for span in spans] == [TraceFlags(0), TraceFlags(0)]


def test_span_processors_see_a_recorded_span_start_and_may_change_it() -> None:
    tracer, exporter, starts = pipeline()
    for span in started_both_ways(tracer, "autogen ack writer", None):
        span.end()

    assert type(starts.started[1]) is RecordedSpan
    by_sdk_open, by_recorder_open = starts.read  # what a processor reads of a span as it starts
    assert by_recorder_open == by_sdk_open
    assert by_recorder_open["name"] == "autogen ack writer" and by_recorder_open["end_time"] is None
    by_sdk, by_recorder = both_exported(exporter)
    assert by_recorder == by_sdk and by_recorder["attributes"] == {"seen.on_start": True}


def test_only_the_sdks_own_tracer_gets_a_recorder(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SpanRecorder.of(trace.NoOpTracer()) is None
    tracer, _, _ = pipeline()
    assert SpanRecorder.of(tracer) is not None
    monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
    assert SpanRecorder.of(tracer) is None, "the SDK's own span metrics need its own path"
    monkeypatch.delenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED")

    class OtherReadableSpan(ReadableSpan):  # as a later SDK might make it
        def __init__(self, name: str, **kwargs: Any) -> None:
            kwargs.pop("instrumentation_scope")
            kwargs["scope"] = None
            super().__init__(name, **kwargs)

    monkeypatch.setattr("otel_agents._internal.tracing.recorded_spans.ReadableSpan", OtherReadableSpan)
    assert SpanRecorder.of(tracer) is None, "a span end that would fail: the SDK's path instead"


def shape(tree: Tree) -> list[tuple[Any, ...]]:
    """Every span of the run by name, parent name, kind, links, and the attributes of runtime spans."""
    names = {span.context.span_id: span.name for span in tree.spans if span.context is not None}
    rows = []
    for span in tree.spans:
        parent = tree.parent(span)
        attributes = {k: UUID.sub("<uuid>", str(v)) for k, v in (span.attributes or {}).items()}
        if not span.name.startswith("autogen "):  # ours: run ids and latencies differ from run to run
            attributes = {k: v for k, v in attributes.items() if k in ("gen_ai.agent.name", "seen.on_start")}
        linked = sorted(names.get(link.context.span_id, "elsewhere") for link in span.links)
        rows.append((span.name, parent.name if parent else None, span.kind, sorted(attributes.items()), linked))
    return sorted(rows, key=repr)


async def nested_run(*, sdk_path: bool) -> tuple[Tree, SeesStarts]:
    """A nested run of a two-agent team, its runtime spans through the recorder or the SDK's path."""
    with pytest.MonkeyPatch.context() as patch:
        if sdk_path:
            patch.setattr(SpanRecorder, "of", classmethod(lambda cls, tracer: None))
        exporter = InMemorySpanExporter()
        telemetry = otel_agents.configure(span_exporter=exporter, runtime_spans="nested")
        starts = SeesStarts()
        sdk_provider = telemetry.sdk_tracer_provider
        assert isinstance(sdk_provider, TracerProvider)
        sdk_provider.add_span_processor(starts)
        try:
            async for _ in otel_agents.tap(writers_room(max_messages=4).run_stream(task="go")):
                pass
            assert telemetry.force_flush()
            return one_trace(exporter.get_finished_spans()), starts
        finally:
            telemetry.shutdown()


async def test_a_nested_run_records_the_same_trace_through_the_recorder_as_through_the_sdk() -> None:
    through_recorder, starts = await nested_run(sdk_path=False)
    through_sdk, _ = await nested_run(sdk_path=True)

    assert shape(through_recorder) == shape(through_sdk)
    runtime_spans = through_recorder.named("autogen ")
    assert len(runtime_spans) >= 20
    recorded = {span.get_span_context().span_id for span in starts.started if isinstance(span, RecordedSpan)}
    assert recorded == {span.context.span_id for span in through_recorder.spans} - {
        through_recorder.root.context.span_id
    }, "every span of the run but its root (no parent) went through the recorder"
    assert all(span.attributes.get("seen.on_start") is True for span in runtime_spans)


async def test_a_nested_run_keeps_the_span_limits_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "5")
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, runtime_spans="nested")
    try:
        async for _ in otel_agents.tap(writers_room(max_messages=2).run_stream(task="go")):
            pass
        assert telemetry.force_flush()
        runtime_spans = one_trace(exporter.get_finished_spans()).named("autogen process")
    finally:
        telemetry.shutdown()
    assert runtime_spans
    for span in runtime_spans:
        values = [v for v in (span.attributes or {}).values() if isinstance(v, str)]
        assert values and all(len(v) <= 5 for v in values), span.attributes

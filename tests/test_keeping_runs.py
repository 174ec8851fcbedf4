"""Keeping the runs that matter: whole runs sampled in the process (DESIGN section 3, "Keeping the
runs that matter"), on real SDK providers with in-memory exporters; tests/test_keeping_runs_in_jaeger.py
holds the same through a real Jaeger."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased
from opentelemetry.trace import SpanContext

import otel_agents
from otel_agents._internal.config.settings import Sampling, resolve_settings
from otel_agents._internal.export.health import Health
from otel_agents._internal.export.pipeline import BoundedBatchSpanProcessor, make_processor
from otel_agents._internal.export.sampling import RunSamplingProcessor
from otel_agents._internal.export.store.reader import Store
from tests.support.config import assert_configure_refuses
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.spans import traces
from tests.support.teams import openai_client, writers_room


class Batches(SpanExporter):
    """Keeps each batch it is given as it was given."""

    def __init__(self) -> None:
        self.batches: list[list[ReadableSpan]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS

    @property
    def spans(self) -> list[ReadableSpan]:
        return [span for batch in self.batches for span in batch]


def roots(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [span for span in spans if span.parent is None]


def sampler(telemetry: otel_agents.Telemetry) -> RunSamplingProcessor:
    (found,) = [p for p in telemetry._processors if isinstance(p, RunSamplingProcessor)]
    return found


# --- settings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("OTEL_AGENTS_SAMPLE_RUNS", "1.5", "expected a ratio from 0 to 1"),
        ("OTEL_AGENTS_SAMPLE_RUNS", "-0.1", "expected a finite number of at least 0"),
        ("OTEL_AGENTS_KEEP_RUNS", "error,slow", "'slow' is not a rule"),
        ("OTEL_AGENTS_KEEP_RUNS", "cost>", "'cost>' needs a number after '>'"),
        ("OTEL_AGENTS_KEEP_RUNS", "tokens>many", "'many' is not a number"),
        ("OTEL_AGENTS_SAMPLE_MAX_SPANS_PER_RUN", "0", "OTEL_AGENTS_SAMPLE_MAX_SPANS_PER_RUN='0'"),
        ("OTEL_AGENTS_SAMPLE_MAX_WAITING_SPANS", "2.5", "expected a whole number"),
    ],
)
def test_a_bad_value_is_refused_at_configure_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    """Changed 2026-12-04 (CHANGELOG): refused by the CLI's strict read; at configure(), one warning
    saying the same and the default used (tests/support/config.py)."""
    assert_configure_refuses(monkeypatch, {variable: value}, said, span_exporter=InMemorySpanExporter(), store=False)
    assert_configure_refuses(
        monkeypatch, {variable: value}, f"{variable}=", span_exporter=InMemorySpanExporter(), store=False
    )


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"sample_runs": 2}, "sample_runs=2: expected a ratio from 0 to 1"),
        ({"sample_runs": True}, "sample_runs=True"),
        ({"keep_runs": "error,,loop"}, "entry 2 is empty"),
        ({"keep_runs": ["error", 3]}, "3 is neither a rule nor a callable"),
    ],
)
def test_a_bad_argument_is_refused_naming_it(arguments: dict[str, Any], said: str) -> None:
    with pytest.raises(otel_agents.ConfigError, match=said):
        otel_agents.configure(span_exporter=InMemorySpanExporter(), store=False, **arguments)


async def test_with_every_run_exported_nothing_waits_and_nothing_is_added() -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, store=False)
    assert not [p for p in telemetry._processors if isinstance(p, RunSamplingProcessor)]
    await writers_room(max_messages=3).run(task="go")
    (run,) = roots(exporter.get_finished_spans() if telemetry.force_flush() else [])
    assert not [k for k in run.attributes or {} if k.startswith("otel_agents.sample.")]


# --- which runs the exporters get ---------------------------------------------------------------


async def test_a_failed_run_goes_whole_an_ordinary_one_not_and_the_store_keeps_both(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    exported = Batches()
    telemetry = otel_agents.configure(span_exporter=exported, store=tmp_path, sample_runs=0)
    await writers_room(max_messages=3, name="ordinary").run(task="go")
    openai_server.script = [Reply("draft"), Reply("down", status=500)]
    writer = AssistantAgent("writer", model_client=openai_client(openai_server))
    critic = AssistantAgent("critic", model_client=openai_client(openai_server))
    failing = RoundRobinGroupChat([writer, critic], termination_condition=MaxMessageTermination(4), name="failing")
    with pytest.raises(RuntimeError):
        await failing.run(task="go")
    assert telemetry.force_flush()

    (tree,) = traces(exported.spans).values()
    assert tree.root.name == "invoke_workflow failing"
    assert tree.root.attributes["otel_agents.sample.kept_because"] == "error"
    assert tree.root.attributes["otel_agents.sample.ratio"] == 0.0
    assert len(tree.named("chat")) == openai_server.request_count == 2, "whole: every call of the run"
    assert [len(batch) for batch in exported.batches] == [len(tree.spans)], "one batch of its own"
    stored = sorted(run.team or "" for run in Store(tmp_path).runs())
    assert stored == ["failing", "ordinary"], "the store keeps every run"


async def test_a_kept_run_is_one_batch_that_the_queue_does_not_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")  # the queue's batches: two spans each
    exported = Batches()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="tokens>10")
    await writers_room(max_messages=7).run(task="go")
    assert telemetry.force_flush()
    assert len(exported.batches) == 1 and len(exported.batches[0]) > 2
    assert exported.batches[0][-1].name == "invoke_workflow writers-room"


def kept_runs_to(
    exporters: Sequence[SpanExporter], sizes: Sequence[int], batch_sizes: Sequence[int | None] = ()
) -> tuple[TracerProvider, list[BoundedBatchSpanProcessor], list[int]]:
    """A provider whose run sampler (ratio 0) sends to `exporters` (each with its export batch size
    from `batch_sizes`, else the environment's), and one run a size, each kept (`error`), of that
    many spans (its run span last), ended before any flush; the processors, and the runs' trace ids."""
    settings = resolve_settings(span_exporter_given=True, store=False)  # as the environment makes them
    processors = [
        make_processor(exporter, replace(settings, span_batch_size=size) if size else settings, Health())
        for exporter, size in itertools.zip_longest(exporters, batch_sizes)
    ]
    provider = TracerProvider()
    provider.add_span_processor(RunSamplingProcessor(processors, Sampling(0.0)))
    tracer = provider.get_tracer("the-app")
    trace_ids = []
    for number, size in enumerate(sizes):
        with tracer.start_as_current_span("run", attributes={"otel_agents.run.id": str(number)}) as run:
            for step in range(size - 1):
                with tracer.start_as_current_span(f"step {step}"):
                    pass
            run.set_attribute("otel_agents.sample.kept_because", "error")
            trace_ids.append(run.get_span_context().trace_id)
    return provider, processors, trace_ids


def assert_each_run_whole_in_one_export_in_order(
    batches: Sequence[Sequence[ReadableSpan]], trace_ids: list[int]
) -> None:
    each_export = [[span.context.trace_id for span in batch] for batch in batches]
    assert [trace_id for export in each_export for trace_id in dict.fromkeys(export)] == trace_ids, "in order"
    for export in each_export:  # a run's spans side by side: whole
        ids = list(dict.fromkeys(export))
        assert export == [trace_id for trace_id in ids for _ in range(export.count(trace_id))]
    assert all(batch[-1].name == "run" for batch in batches), "each export ends with a run's last span"


def test_kept_runs_ready_at_one_flush_share_exports_of_at_most_the_batch_size_each_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Changed 2026-12-05 (CHANGELOG): a kept trace was one export of its own; now the traces ready at
    one flush are joined, in order, up to OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans, never cut."""
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    exported = Batches()
    provider, _, trace_ids = kept_runs_to([exported], [2, 2, 5, 1, 1])
    try:
        assert provider.force_flush()
        assert [len(batch) for batch in exported.batches] == [4, 5, 2], "two runs, the five alone, two runs"
        assert_each_run_whole_in_one_export_in_order(exported.batches, trace_ids)
        assert len(exported.spans) == sum([2, 2, 5, 1, 1])
    finally:
        provider.shutdown()


def test_with_the_default_batch_size_thirty_seven_kept_runs_of_fourteen_spans_go_in_two_exports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", raising=False)
    exported = Batches()
    provider, _, trace_ids = kept_runs_to([exported], [14] * 37)
    try:
        assert provider.force_flush()
        assert [len(batch) for batch in exported.batches] == [36 * 14, 14], "the SDK's 512 spans at most"
        assert_each_run_whole_in_one_export_in_order(exported.batches, trace_ids)
    finally:
        provider.shutdown()


def test_two_exporters_with_different_batch_sizes_both_get_exports_of_the_smaller() -> None:
    small, large = Batches(), Batches()
    provider, _, trace_ids = kept_runs_to([small, large], [2, 2, 5, 1, 1], batch_sizes=[6, 4])
    try:
        assert provider.force_flush()
        for exported in (small, large):
            assert [len(batch) for batch in exported.batches] == [4, 5, 2]
            assert_each_run_whole_in_one_export_in_order(exported.batches, trace_ids)
    finally:
        provider.shutdown()


class Refusing(Batches):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        super().export(spans)
        return SpanExportResult.FAILURE


def test_a_joined_export_that_fails_counts_each_of_its_spans_failed_once(caplog: pytest.LogCaptureFixture) -> None:
    refusing = Refusing()
    provider, (processor,), _ = kept_runs_to([refusing], [2, 3])
    try:
        with caplog.at_level(logging.WARNING, logger="otel_agents"):
            provider.force_flush()
        assert [len(batch) for batch in refusing.batches] == [5], "one export of both runs"
        guarded = processor.guarded
        assert (guarded.handed_spans, guarded.failed_spans, guarded.delivered_spans) == (5, 5, 0)
        assert processor.ended_spans == 5, "each span counted once: none awaiting, none twice"
        assert "could not export spans to Refusing" in caplog.text
    finally:
        provider.shutdown()


async def test_ordinary_runs_are_kept_as_trace_id_ratio_based_decides() -> None:
    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0.5, keep_runs="")
    starts: list[int] = []
    for _ in range(40):
        stream = otel_agents.tap(writers_room(max_messages=2).run_stream(task="go"))
        async for _item in stream:
            pass
        assert stream.recorder is not None
        starts.append(stream.recorder.span.get_span_context().trace_id)
    assert telemetry.force_flush()
    expected = {
        t for t in starts if TraceIdRatioBased(0.5).should_sample(None, t, "").decision is Decision.RECORD_AND_SAMPLE
    }
    kept = {s.context.trace_id for s in exported.get_finished_spans()}
    assert kept == expected and 0 < len(kept) < 40
    assert {r.attributes["otel_agents.sample.kept_because"] for r in roots(exported.get_finished_spans())} == {"ratio"}


async def test_a_rule_of_your_own_reads_the_run_summary_and_one_that_raises_keeps_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[otel_agents.RunSummary] = []

    def long_ones(run: otel_agents.RunSummary) -> bool:
        seen.append(run)
        return run.turns >= 4

    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs=long_ones)
    await writers_room(max_messages=3).run(task="go")
    await writers_room(max_messages=5, name="long").run(task="go")
    assert telemetry.force_flush()
    assert [r.name for r in roots(exported.get_finished_spans())] == ["invoke_workflow long"]
    assert [(s.team, s.turns, s.stop_kind) for s in seen] == [
        ("writers-room", 2, "max_messages"),
        ("long", 4, "max_messages"),
    ]
    assert roots(exported.get_finished_spans())[0].attributes["otel_agents.sample.kept_because"] == "rule"

    def broken(run: otel_agents.RunSummary) -> bool:
        raise LookupError("a bug in the rule")

    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs=["cost>99", broken])
    caplog.set_level(logging.WARNING)
    for _ in range(2):
        await writers_room(max_messages=3).run(task="go")
    assert telemetry.force_flush()
    assert len(roots(exported.get_finished_spans())) == 2, "kept, both"
    assert len([r for r in caplog.records if "raised LookupError; the run is kept" in r.getMessage()]) == 1


async def test_spans_of_the_trace_ending_after_the_run_follow_its_decision() -> None:
    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="tokens>60")
    tracer = trace.get_tracer("the-app")
    for messages in (3, 7):  # the first is left out, the second kept (more tokens)
        with tracer.start_as_current_span(f"request {messages}"):
            await writers_room(max_messages=messages).run(task="go")
    assert telemetry.force_flush()
    (tree,) = traces(exported.get_finished_spans()).values()
    assert tree.root.name == "request 7", "the request span around the kept run came with it"
    assert tree.one("invoke_workflow writers-room").attributes["otel_agents.sample.kept_because"] == "tokens"


async def test_a_trace_without_a_run_is_kept_by_its_trace_id_without_waiting() -> None:
    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0.5)
    tracer = trace.get_tracer("the-app")
    ids = []
    for i in range(30):
        with tracer.start_as_current_span(f"job {i}") as span:
            ids.append(span.get_span_context().trace_id)
    assert sampler(telemetry).waiting_spans == 0
    assert telemetry.force_flush()
    expected = {
        t for t in ids if TraceIdRatioBased(0.5).should_sample(None, t, "").decision is Decision.RECORD_AND_SAMPLE
    }
    assert {s.context.trace_id for s in exported.get_finished_spans()} == expected


# --- runs ended in a collection --------------------------------------------------------------------
# The garbage collector can end a dropped stream's run (its finaliser) inside any allocation, also one
# the run sampler makes under its own (re-entrant) lock while it tells a trace's open runs why the
# trace is kept. Here the telling itself ends a run, as such a collection would.


def sampled_to_batches(sampling: Sampling) -> tuple[TracerProvider, RunSamplingProcessor, Batches]:
    """A provider whose run sampler (`sampling`) sends to a `Batches` exporter, as the environment
    sets the export up; the sampler and the exporter."""
    exported = Batches()
    settings = resolve_settings(span_exporter_given=True, store=False)
    sampler = RunSamplingProcessor([make_processor(exported, settings, Health())], sampling)
    provider = TracerProvider()
    provider.add_span_processor(sampler)
    return provider, sampler, exported


def three_runs_of_one_trace(
    ended_while_told: str, ended_before: Sequence[str] = ()
) -> tuple[TracerProvider, RunSamplingProcessor, Batches, list[str]]:
    """Runs 1, 2 and 3 of one trace, ratio 0; runs `ended_before` end first, then run 1, which waits
    with two spans of its own, ends kept (`error`), and while the sampler tells run 2 why, run
    `ended_while_told` ends; the rest end after. Returns the run ids in the order they ended."""
    provider, sampling, exported = sampled_to_batches(Sampling(0.0))
    tracer = provider.get_tracer("the-app")
    first = tracer.start_span("run", attributes={"otel_agents.run.id": "1"})
    within = trace.set_span_in_context(first)
    runs = {str(n): tracer.start_span("run", within, attributes={"otel_agents.run.id": str(n)}) for n in (2, 3)}
    for step in range(2):
        tracer.start_span(f"step {step}", within).end()
    told = runs["2"].set_attributes

    def told_then_collected(attributes: Any) -> None:
        told(attributes)
        runs[ended_while_told].end()

    runs["2"].set_attributes = told_then_collected  # type: ignore[method-assign]
    for n in ended_before:
        runs[n].end()
    first.set_attribute("otel_agents.sample.kept_because", "error")
    first.end()
    ended = [*ended_before, "1", ended_while_told]
    for n, run in runs.items():
        if n not in ended:
            run.end()
            ended.append(n)
    return provider, sampling, exported, ended


@pytest.mark.parametrize(
    ("ended_while_told", "ended_before"),
    [("3", ()), ("2", ("3",))],
    ids=["another-open-run", "the-last-open-run-deciding-the-trace"],
)
def test_a_run_ended_while_its_trace_is_being_kept_leaves_every_span_sent_once(
    ended_while_told: str, ended_before: tuple[str, ...]
) -> None:
    provider, sampling, exported, ended = three_runs_of_one_trace(ended_while_told, ended_before)
    try:
        assert sorted(ended) == ["1", "2", "3"]
        assert provider.force_flush()
        names = sorted(span.attributes.get("otel_agents.run.id", span.name) for span in exported.spans)
        assert names == ["1", "2", "3", "step 0", "step 1"], "each span once, none lost"
        assert sampling.waiting_spans == 0 and sampling.waiting_runs == 0
    finally:
        provider.shutdown()


def test_a_run_ended_while_the_sampler_reads_another_runs_decision_leaves_the_trace_whole() -> None:
    """The sampler reads an ending run's decision while that run still counts as open: a collection
    the read sets off (here: the read itself) may end the trace's other run, which is then not the
    last, and the trace is decided, kept, on the run that asked for it."""
    provider, sampling, exported = sampled_to_batches(Sampling(0.0))
    tracer = provider.get_tracer("the-app")
    first = tracer.start_span("run", attributes={"otel_agents.run.id": "1"})
    second = tracer.start_span("run", trace.set_span_in_context(first), attributes={"otel_agents.run.id": "2"})
    tracer.start_span("step", trace.set_span_in_context(first)).end()

    class ReadInACollection(ReadableSpan):
        @property
        def attributes(self) -> Any:
            if second.is_recording():
                second.end()  # as a collection at this read would
            return super().attributes

    as_ended = first._readable_span  # type: ignore[attr-defined]

    def ended_as_read_in_a_collection() -> ReadableSpan:
        readable = as_ended()
        readable.__class__ = ReadInACollection
        return readable

    first._readable_span = ended_as_read_in_a_collection  # type: ignore[attr-defined]
    first.set_attribute("otel_agents.sample.kept_because", "error")
    first.end()
    try:
        assert not second.is_recording(), "ended while the first run's decision was read"
        assert provider.force_flush()
        assert sorted(span.attributes.get("otel_agents.run.id", span.name) for span in exported.spans) == [
            "1",
            "2",
            "step",
        ], "the trace kept whole, on the run that asked for it"
        assert sampling.waiting_spans == 0 and sampling.waiting_runs == 0
    finally:
        provider.shutdown()


def test_a_run_ended_while_the_sampler_reads_a_spans_ids_leaves_that_span_sent() -> None:
    """A span's ids are read before the sampler looks for its trace: a collection the read sets off
    (here: the read itself) may end the trace's last open run, and the span then follows the
    trace's decision (kept) instead of waiting in a trace decided without it."""
    provider, sampling, exported = sampled_to_batches(Sampling(0.0))
    tracer = provider.get_tracer("the-app")
    run = tracer.start_span("run", attributes={"otel_agents.run.id": "1"})
    run.set_attribute("otel_agents.sample.kept_because", "error")
    step = tracer.start_span("step", trace.set_span_in_context(run))

    class ReadInACollection(SpanContext):
        @property
        def span_id(self) -> int:
            if run.is_recording():
                run.end()  # as a collection at this read would
            return super().span_id

    as_ended = step._readable_span  # type: ignore[attr-defined]

    def ended_with_ids_read_in_a_collection() -> ReadableSpan:
        readable = as_ended()
        c = readable.context
        readable._context = ReadInACollection(c.trace_id, c.span_id, c.is_remote, c.trace_flags, c.trace_state)
        return readable

    step._readable_span = ended_with_ids_read_in_a_collection  # type: ignore[attr-defined]
    step.end()
    try:
        assert not run.is_recording(), "the run ended while the step's ids were read"
        assert provider.force_flush()
        assert sorted(span.name for span in exported.spans) == ["run", "step"], "the step came with its kept run"
        assert sampling.waiting_spans == 0
    finally:
        provider.shutdown()


def test_a_run_ended_while_its_trace_is_let_go_past_the_bound_leaves_its_spans_sent_once() -> None:
    """Past `max_waiting_spans` traces waiting, the oldest is kept and let go; a collection while its
    open run is told why ends that run, which decides the trace there and then."""
    provider, sampling, exported = sampled_to_batches(Sampling(0.0, max_waiting_spans=1))
    tracer = provider.get_tracer("the-app")
    oldest = tracer.start_span("run", attributes={"otel_agents.run.id": "oldest"})
    tracer.start_span("step", trace.set_span_in_context(oldest)).end()
    told = oldest.set_attributes

    def told_then_collected(attributes: Any) -> None:
        told(attributes)
        oldest.end()

    oldest.set_attributes = told_then_collected  # type: ignore[method-assign]
    newest = tracer.start_span("run", attributes={"otel_agents.run.id": "newest"})  # a second trace: past the bound
    try:
        assert not oldest.is_recording(), "ended while told"
        newest.end()
        assert provider.force_flush()
        assert sorted(span.attributes.get("otel_agents.run.id", span.name) for span in exported.spans) == [
            "oldest",
            "step",
        ], "the oldest trace kept (bound), once; the newest left out"
        assert exported.spans[-1].attributes["otel_agents.sample.kept_because"] == "bound"
        assert sampling.waiting_spans == 0 and sampling.waiting_runs == 0
    finally:
        provider.shutdown()


# --- bounds ----------------------------------------------------------------------------------------


async def test_a_run_past_its_bound_is_kept_whole_from_then_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_AGENTS_SAMPLE_MAX_SPANS_PER_RUN", "5")
    exported = Batches()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="")
    stream = otel_agents.tap(writers_room(max_messages=9).run_stream(task="go"))
    most = 0
    async for _ in stream:
        most = max(most, sampler(telemetry).waiting_spans)
    assert telemetry.force_flush()
    (tree,) = traces(exported.spans).values()
    assert tree.root.attributes["otel_agents.sample.kept_because"] == "bound"
    assert most <= 5
    assert len(tree.named("chat")) == 8 and len(tree.named("message")) == 9, "never cut"


async def test_past_the_bound_of_all_waiting_spans_the_oldest_run_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_AGENTS_SAMPLE_MAX_WAITING_SPANS", "20")
    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="")
    most = 0

    async def run(name: str) -> None:
        nonlocal most
        async for _ in otel_agents.tap(writers_room(max_messages=9, name=name).run_stream(task="go")):
            most = max(most, sampler(telemetry).waiting_spans)

    await asyncio.gather(*(run(f"team-{i}") for i in range(4)))  # some 26 spans each, side by side
    assert telemetry.force_flush()
    assert most <= 20, "what waits stays within the bound"
    kept = roots(exported.get_finished_spans())
    assert len(kept) == 4 and all(r.attributes["otel_agents.sample.kept_because"] == "bound" for r in kept)
    for tree in traces(exported.get_finished_spans()).values():
        assert len(tree.named("message")) == 9, "whole"


async def test_a_run_still_open_at_shutdown_is_kept(tmp_path: Path) -> None:
    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="")
    stream = otel_agents.tap(writers_room(max_messages=9).run_stream(task="go"))
    await stream.__anext__()
    await stream.__anext__()
    telemetry.shutdown()
    (run,) = roots(exported.get_finished_spans())
    assert run.attributes["otel_agents.stop_kind"] == "shutdown"
    assert run.attributes["otel_agents.sample.kept_because"] == "exit"
    await stream.aclose()


# --- metrics ---------------------------------------------------------------------------------------


async def test_the_run_counter_counts_every_run_with_exemplars_of_kept_runs_only() -> None:
    exported = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    telemetry = otel_agents.configure(
        span_exporter=exported, metric_readers=[reader], store=False, sample_runs=0, keep_runs="tokens>60"
    )
    for messages in (3, 3, 7):
        await writers_room(max_messages=messages).run(task="go")
    assert telemetry.force_flush()
    (kept,) = roots(exported.get_finished_spans())
    data = reader.get_metrics_data()
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "otel_agents.runs"
        for point in metric.data.data_points
    ]
    assert sum(point.value for point in points) == 3, "every run counted"
    exemplar_traces = {e.trace_id for point in points for e in point.exemplars if e.trace_id}
    assert exemplar_traces <= {kept.context.trace_id}


async def test_sampling_with_no_exporter_says_once_that_only_exporters_sample(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    telemetry = otel_agents.configure(store=tmp_path, sample_runs=0.1)
    for _ in range(2):
        await writers_room(max_messages=3).run(task="go")
    assert telemetry.force_flush()
    said = [r.getMessage() for r in caplog.records if "OTEL_AGENTS_SAMPLE_RUNS" in r.getMessage()]
    assert len(said) == 1 and "only exporters sample, and this pipeline has none" in said[0], said
    assert not [text for text in said if "did not set up" in text], "nothing false"
    assert len(Store(tmp_path).runs()) == 2, "the store keeps every run"

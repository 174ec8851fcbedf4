"""Every kept run delivered, every span accounted for (DESIGN section 3, "Keeping the runs that
matter" and "Accounting for every span"): `force_flush()` returns once every run decided before it
has been handed to the exporters, whichever thread took it; `shutdown()` and the exit deliver the
runs they keep as `exit`; the runs of one trace are decided together; a forked child leaves its
parent's runs alone. Each process below ends right after its calls, without waiting; what arrived
is read from a receiver of ours (OTLP/HTTP and gRPC) or the built Jaeger."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import otel_agents
from otel_agents._internal.export.ratio import ratio_keeps
from otel_agents._internal.export.store.reader import Store
from tests.support.accounting import assert_every_span_accounted
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.otlp_sink import OtlpSink, Received, otlp_sink
from tests.support.spans import traces
from tests.support.teams import openai_client, writers_room

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = "otel_agents.run.id"
STOP_KIND = "otel_agents.stop_kind"
KEPT_BECAUSE = "otel_agents.sample.kept_because"
RUNS, EVERY = 300, 10
"""300 runs, every tenth failing: 30 runs the rules keep, the rest at a ratio of 0.1."""


def run_app(
    mode: str, end: str, server: OpenAIServer, sink: OtlpSink, protocol: str, store: Path | None, **env: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENAI_BASE_URL": server.base_url,
        "OTEL_SERVICE_NAME": f"kept-{mode}",
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_AGENTS_SAMPLE_RUNS": "0.1",
        "OTEL_AGENTS_KEEP_RUNS": "error,loop",
        **({"OTEL_AGENTS_STORE": str(store)} if store is not None else {}),
        **env,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.kept_runs_app", mode, end],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 and "done" in done.stdout.split(), done.stderr[-3000:]
    line = next((line for line in done.stdout.splitlines() if line.startswith("accounts ")), None)
    return done, json.loads(line.removeprefix("accounts ")) if line is not None else None


def by_trace(spans: Sequence[Received]) -> dict[str, list[Received]]:
    found: dict[str, list[Received]] = defaultdict(list)
    for span in spans:
        found[span.trace_id].append(span)
    return found


def stored_spans(store: Path) -> dict[str, set[str]]:
    """Each stored run's trace id: the ids of its spans."""
    reader = Store(store)
    return {run.trace_id: {s.span_id for s in reader.spans(run.trace_id)} for run in reader.runs(limit=None)}


def run_spans(spans: Sequence[Received]) -> list[Received]:
    return [span for span in spans if RUN_ID in span.attributes]


def the_accounts_add_up(printed: dict[str, Any] | None, sink: OtlpSink) -> None:
    assert printed is not None and printed["flushed"] is True
    (otlp,) = [a for a in printed["accounts"] if a["destination"].startswith("OTLPSpanExporter")]
    assert otlp["delivered"] == len(sink.received()), "what we count as delivered is what arrived"
    assert (otlp["export_failed"], otlp["not_exported"]) == (0, 0)
    for account in printed["accounts"]:
        lost = account["export_failed"] + account["not_exported"] + account["sampled_out"]
        assert account["ended"] == account["delivered"] + lost, account


@pytest.fixture
def many_runs_script(openai_server: OpenAIServer) -> OpenAIServer:
    openai_server.script = [
        Reply("down", status=500) if i % EVERY == EVERY - 1 else Reply(f"line {i}") for i in range(RUNS)
    ]
    return openai_server


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("with_store", [True, False], ids=["store", "no-store"])
def test_every_failing_run_of_three_hundred_arrives_whole_when_the_process_ends_right_after(
    many_runs_script: OpenAIServer, tmp_path: Path, protocol: str, with_store: bool
) -> None:
    store = tmp_path / "store" if with_store else None
    with otlp_sink(protocol, delay_s=0.1) as sink:  # a backend some way off: a backlog builds
        done, printed = run_app("many", "shutdown", many_runs_script, sink, protocol, store, RUNS=str(RUNS))
    arrived = by_trace(sink.received())
    failed = {
        t for t, spans in arrived.items() if any(s.attributes.get(STOP_KIND) == "error" for s in run_spans(spans))
    }
    assert len(failed) == RUNS // EVERY, f"{len(failed)} of {RUNS // EVERY} failing runs arrived"
    assert sink.twice() == [], "no span sent twice"
    shapes = Counter(tuple(sorted(s.name for s in arrived[t])) for t in failed)
    assert len(shapes) == 1, f"every failing run whole, alike: {shapes}"
    if store is not None:
        stored = stored_spans(store)
        assert len(stored) == RUNS, "the store keeps every run"
        partial = [t for t, spans in arrived.items() if {s.span_id for s in spans} != stored[t]]
        assert partial == [], "each run that arrived has every span the store has of it"
    the_accounts_add_up(printed, sink)
    assert "not delivered" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("end", ["shutdown", "exit"])
def test_runs_open_at_shutdown_or_exit_are_delivered_whole_by_a_slow_backend(
    openai_server: OpenAIServer, tmp_path: Path, end: str
) -> None:
    openai_server.script = [Reply("line", hold=True)]  # never answered: the runs stay open
    store = tmp_path / "store"
    with otlp_sink("http/protobuf", delay_s=0.5) as sink:
        done, printed = run_app(
            "open", end, openai_server, sink, "http/protobuf", store, OPEN="4", OTEL_AGENTS_EXIT_TIMEOUT_S="20"
        )
    arrived = by_trace(sink.received())
    runs = [span for spans in arrived.values() for span in run_spans(spans)]
    # kept as `exit`, unless the ratio would have kept it anyway (`ratio` comes first in the order)
    assert len(runs) == 4, [r.attributes for r in runs]
    assert [r.attributes.get(KEPT_BECAUSE) for r in runs] == [
        "ratio" if ratio_keeps(0.1, int(r.trace_id, 16)) else "exit" for r in runs
    ]
    stored = stored_spans(store)
    assert set(stored) == set(arrived) and all({s.span_id for s in arrived[t]} == stored[t] for t in stored)
    assert sink.twice() == []
    if printed is not None:
        the_accounts_add_up(printed, sink)
    assert "not delivered" not in done.stderr, done.stderr[-2000:]


def test_a_forked_child_that_exits_normally_leaves_its_parents_run_alone(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.script = [Reply("line")]
    store = tmp_path / "store"
    with otlp_sink("http/protobuf") as sink:
        run_app("fork", "shutdown", openai_server, sink, "http/protobuf", store, OTEL_AGENTS_SAMPLE_RUNS="1")
    runs = run_spans(sink.received())
    assert [r.attributes.get(STOP_KIND) for r in runs] == ["max_messages"], "one run span, as the parent ended it"
    (stored,) = Store(store).runs(limit=None)
    assert stored.stop_kind == "max_messages"
    spans = Store(store).spans(stored.trace_id)
    assert len([s for s in spans if RUN_ID in s.attributes]) == 1, "the child stored no run span of it"


# --- in the process: a flush from another thread, and the runs of one trace ----------------------


class SlowBatches(SpanExporter):
    """Keeps each batch it is given, taking `delay_s` over each (a backend some way off)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.batches: list[list[ReadableSpan]] = []
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        time.sleep(self.delay_s)  # the backend's slowness, not a wait of the test's
        with self._lock:
            self.batches.append(list(spans))
        return SpanExportResult.SUCCESS

    @property
    def spans(self) -> list[ReadableSpan]:
        with self._lock:
            return [span for batch in self.batches for span in batch]


class HeldBatches(SlowBatches):
    """Holds each export until `release` is set (bounded: a test that never sets it fails)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.started.set()
        if not self.release.wait(timeout=60):
            return SpanExportResult.FAILURE
        return super().export(spans)


async def test_force_flush_is_false_while_another_thread_still_sends_a_decided_run() -> None:
    exported = HeldBatches()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="tokens>0")
    await writers_room(max_messages=3).run(task="go")
    assert exported.started.wait(timeout=30), "the flush thread took the kept run and is exporting it"
    assert telemetry.force_flush(timeout_millis=300) is False, "a run not yet delivered is not flushed"
    exported.release.set()
    assert telemetry.force_flush()
    (tree,) = traces(exported.spans).values()
    assert tree.root.name == "invoke_workflow writers-room"
    telemetry.shutdown()
    assert_every_span_accounted(telemetry)


async def test_force_flush_returns_once_every_decided_run_is_delivered_while_another_thread_flushes() -> None:
    exported = SlowBatches(delay_s=0.02)
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="tokens>0")
    stop = threading.Event()

    def flush_meanwhile() -> None:  # another thread of the app flushing as it likes
        while not stop.is_set():
            telemetry.force_flush()

    other = threading.Thread(target=flush_meanwhile, daemon=True)
    other.start()
    try:
        for _ in range(20):
            await writers_room(max_messages=3).run(task="go")
        assert telemetry.force_flush()
        spans = exported.spans  # at once: no wait after force_flush() returned
    finally:
        stop.set()
        other.join(timeout=30)
    runs = [s for s in spans if s.parent is None]
    assert len(runs) == 20, f"{len(runs)} of 20 kept runs delivered when force_flush() returned"
    assert len({s.context.span_id for s in spans if s.context}) == len(spans), "none sent twice"
    telemetry.shutdown()
    assert_every_span_accounted(telemetry)


async def test_gathered_runs_under_one_request_span_are_kept_together(openai_server: OpenAIServer) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    exported = SlowBatches()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="error")
    # the ordinary run starts first and its call is held until the failing run has failed
    openai_server.script = [Reply("draft", hold=True), Reply("down", status=500)]

    def one_agent(name: str) -> RoundRobinGroupChat:
        writer = AssistantAgent("writer", model_client=openai_client(openai_server))
        return RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name=name)

    async def failing_then_release() -> None:
        assert await asyncio.to_thread(openai_server.wait_until_held), "the ordinary run's call arrived"
        with pytest.raises(RuntimeError):
            await one_agent("failing").run(task="go")
        openai_server.release()

    with trace.get_tracer("the-app").start_as_current_span("request"):
        await asyncio.gather(one_agent("ordinary").run(task="go"), failing_then_release())
    assert telemetry.force_flush()
    (tree,) = traces(exported.spans).values()
    assert tree.root.name == "request", "the request span goes with its runs"
    runs = {s.name: s.attributes for s in exported.spans if RUN_ID in (s.attributes or {})}
    assert set(runs) == {"invoke_workflow ordinary", "invoke_workflow failing"}, "both runs, whole"
    assert runs["invoke_workflow failing"][KEPT_BECAUSE] == "error"
    assert len(tree.named("chat")) == 2, "every call of both runs"
    telemetry.shutdown()
    assert_every_span_accounted(telemetry)


async def test_sequential_runs_under_one_request_span_follow_the_trace() -> None:
    exported = SlowBatches()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="tokens>60")
    tracer = trace.get_tracer("the-app")
    with tracer.start_as_current_span("kept first"):
        await writers_room(max_messages=7, name="a").run(task="go")  # kept: tokens
        await writers_room(max_messages=3, name="b").run(task="go")  # alone it is left out
    with tracer.start_as_current_span("left out first"):
        await writers_room(max_messages=3, name="c").run(task="go")  # left out
        await writers_room(max_messages=7, name="d").run(task="go")  # kept: tokens
    assert telemetry.force_flush()
    trees = {tree.root.name: tree for tree in traces(exported.spans).values()}
    first = trees["kept first"]
    assert {s.name: s.attributes[KEPT_BECAUSE] for s in first.spans if RUN_ID in (s.attributes or {})} == {
        "invoke_workflow a": "tokens",
        "invoke_workflow b": "trace",
    }, "a run that starts in a kept trace is kept with it"
    second = [
        s.name for s in exported.spans if s.context and s.context.trace_id == trees_id(exported, "left out first")
    ]
    assert "invoke_workflow c" not in second and "invoke_workflow d" in second, "the earlier run stays left out"
    telemetry.shutdown()
    assert_every_span_accounted(telemetry)


def trees_id(exported: SlowBatches, root: str) -> int:
    (found,) = [s.context.trace_id for s in exported.spans if s.name == root and s.context]
    return found


@pytest.mark.backend
def test_every_failing_run_of_three_hundred_arrives_in_the_built_jaeger(
    many_runs_script: OpenAIServer, tmp_path: Path
) -> None:
    from tests.support.backends import built_backends
    from tests.support.jaeger import poll, running_jaeger

    store, workdir = tmp_path / "store", tmp_path / "jaeger"
    workdir.mkdir()
    with running_jaeger(built_backends().jaeger, workdir) as jaeger:
        sink = OtlpSink(endpoint=jaeger.otlp_http)  # only its address: what arrived is read from Jaeger
        done, printed = run_app("many", "shutdown", many_runs_script, sink, "http/protobuf", store, RUNS=str(RUNS))
        stored = stored_spans(store)
        failed = {run.trace_id for run in Store(store).runs(limit=None) if run.stop_kind == "error"}
        assert len(failed) == RUNS // EVERY

        def found() -> dict[str, set[str]]:
            answer = jaeger.get("/api/traces", {"service": "kept-many", "limit": "1000", "lookback": "1h"}) or {}
            return {t["traceID"]: {s["spanID"] for s in t["spans"]} for t in answer.get("data") or []}

        # Jaeger stores what it was sent a moment after it answered: its query is polled, not the app
        in_jaeger = poll(found, lambda traces: failed <= set(traces), within_s=60)
    assert failed <= set(in_jaeger), f"{len(failed - set(in_jaeger))} of {len(failed)} failing runs missing"
    assert all(in_jaeger[t] == stored[t] for t in in_jaeger), "each run that arrived is whole"
    assert printed is not None
    (otlp,) = [a for a in printed["accounts"] if a["destination"].startswith("OTLPSpanExporter")]
    assert otlp["delivered"] == sum(len(spans) for spans in in_jaeger.values())
    assert otlp["ended"] == otlp["delivered"] + otlp["sampled_out"] and "not delivered" not in done.stderr


async def test_the_span_counters_say_what_the_accounts_say() -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tests.support.metrics import points

    reader = InMemoryMetricReader()
    exported = SlowBatches()
    telemetry = otel_agents.configure(
        span_exporter=exported, store=False, metric_readers=[reader], sample_runs=0, keep_runs="tokens>60"
    )
    await writers_room(max_messages=3, name="left-out").run(task="go")
    await writers_room(max_messages=7, name="kept").run(task="go")
    assert telemetry.force_flush()
    (account,) = telemetry.span_accounts()
    data = reader.get_metrics_data()
    (sampled_out,) = [p.value for p in points(data, "otel_agents.spans.sampled_out")]
    dropped = {p.attributes["otel_agents.drop.reason"]: p.value for p in points(data, "otel_agents.spans.dropped")}
    assert sampled_out == account.sampled_out > 0, "the left-out run's spans"
    assert dropped == {"export_failed": 0, "not_exported": 0}
    assert account.delivered == len(exported.spans) and account.under_way == 0
    assert account.ended == account.delivered + account.sampled_out
    telemetry.shutdown()


async def test_a_run_that_ends_kept_takes_its_trace_with_it_while_another_run_of_it_is_open(
    openai_server: OpenAIServer,
) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat

    exported = SlowBatches()
    telemetry = otel_agents.configure(span_exporter=exported, store=False, sample_runs=0, keep_runs="tokens>60")
    openai_server.script = [Reply("slow", hold=True)]  # the open run's call, held until the end
    writer = AssistantAgent("writer", model_client=openai_client(openai_server))
    slow = RoundRobinGroupChat([writer], termination_condition=MaxMessageTermination(2), name="slow")

    with trace.get_tracer("the-app").start_as_current_span("request"):
        open_run = asyncio.ensure_future(slow.run(task="go"))
        assert await asyncio.to_thread(openai_server.wait_until_held)
        await writers_room(max_messages=7, name="kept").run(task="go")  # ends kept: tokens
        assert telemetry.force_flush()
        delivered = {s.name for s in exported.spans}
        await writers_room(max_messages=3, name="later").run(task="go")  # starts in a kept trace
        openai_server.release()
        await open_run
    assert telemetry.force_flush()
    assert "invoke_workflow kept" in delivered, "a kept run is delivered though another run of its trace is open"
    runs = {s.name: s.attributes for s in exported.spans if RUN_ID in (s.attributes or {})}
    assert runs["invoke_workflow later"][KEPT_BECAUSE] == "trace"
    assert runs["invoke_workflow slow"][KEPT_BECAUSE] == "trace", "the run open then goes with its trace"
    telemetry.shutdown()
    assert_every_span_accounted(telemetry)


def test_runs_recorded_but_not_sampled_leave_nothing_waiting() -> None:
    """An app's provider whose sampler records without sampling (RECORD_ONLY): such run spans are
    never exported, and the run sampler keeps nothing of them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    from otel_agents._internal.config.settings import Sampling
    from otel_agents._internal.export.health import Health
    from otel_agents._internal.export.pipeline import make_processor
    from otel_agents._internal.export.sampling import RunSamplingProcessor

    class RecordOnly(Sampler):
        def should_sample(
            self, parent_context: Any, trace_id: int, name: str, kind: Any = None, attributes: Any = None, *rest: Any
        ) -> SamplingResult:
            return SamplingResult(Decision.RECORD_ONLY, attributes)  # (the span's attributes are the result's)

        def get_description(self) -> str:
            return "RecordOnly"

    provider = TracerProvider(sampler=RecordOnly())
    settings = otel_agents.configure(span_exporter=SlowBatches(), store=False).settings
    sampler = RunSamplingProcessor([make_processor(SlowBatches(), settings, Health())], Sampling(ratio=0.0))
    provider.add_span_processor(sampler)
    for number in range(5):
        with provider.get_tracer("the-app").start_as_current_span("run", attributes={RUN_ID: str(number)}) as span:
            assert span.is_recording() and RUN_ID in (span.attributes or {})
    assert (sampler.waiting_runs, sampler.waiting_spans, sampler.ended_spans) == (0, 0, 0)
    provider.shutdown()

"""The benchmark's workloads and tracing modes, each set up the way a user would set it up."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

MODES = ("untraced", "autogen", "openinference", "otel-agents", "otel-agents-metrics", "otel-agents-nested")
WORKLOADS = ("replay-5", "replay-100", "openai-tool")


class CountingExporter(SpanExporter):
    """Counts spans and drops them: every traced mode exports to the same sink."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def start_workers(
    worker: Callable[[str, Connection], None], modes: Sequence[str]
) -> tuple[dict[str, Connection], list[BaseProcess]]:
    """`worker(mode, connection)` for each mode in a process of its own (spawned), once each has
    said "ready": the pipe to each, and the processes."""
    context = multiprocessing.get_context("spawn")
    pipes: dict[str, Connection] = {}
    processes: list[BaseProcess] = []
    for name in modes:
        parent, child = context.Pipe()
        process = context.Process(target=worker, args=(name, child), daemon=True)
        process.start()
        assert parent.recv() == "ready"
        pipes[name] = parent
        processes.append(process)
    return pipes, processes


def stop_workers(pipes: dict[str, Connection], processes: list[BaseProcess]) -> None:
    """Tell each worker to end (None), and wait for it a while."""
    for pipe in pipes.values():
        pipe.send(None)
    for process in processes:
        process.join(timeout=30)


def from_tree(mode_name: str) -> str:
    """The mode of `mode_name`; for "otel-agents@/a/tree", with that tree's otel_agents imported
    first (a worktree of another commit, measured beside this one), checked to come from it."""
    name, _, tree = mode_name.partition("@")
    if tree:
        sys.path.insert(0, tree)
        import otel_agents

        imported = Path(otel_agents.__file__).resolve()
        assert imported.is_relative_to(Path(tree).resolve()), f"{imported} is not from {tree}"
    return name


@dataclass
class Mode:
    name: str
    exporter: CountingExporter | None = None
    flush: Callable[[], Any] = lambda: None


def set_up(mode: str, *, endpoint: str | None = None) -> Mode:
    """Instrument this process for `mode` (once; a process runs one mode)."""
    if mode == "untraced":
        os.environ["AUTOGEN_DISABLE_RUNTIME_TRACING"] = "true"
        return Mode(mode)
    if mode in ("autogen", "openinference"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = CountingExporter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        if mode == "openinference":
            from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

            AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
        return Mode(mode, exporter, provider.force_flush)
    if mode.startswith("otel-agents-otlp"):
        # default settings exporting over OTLP/HTTP to the sink at BENCH_OTLP_ENDPOINT (the
        # benchmark starts it), every run or a tenth of them (benchmarks/sampling.py); "-traces":
        # with OTEL_METRICS_EXPORTER=none, the spans alone (the endpoint turns metrics on too)
        import otel_agents

        if mode.endswith("-traces"):
            os.environ["OTEL_METRICS_EXPORTER"] = "none"
        sample = 0.1 if "sampled" in mode else None
        telemetry = otel_agents.configure(endpoint=os.environ["BENCH_OTLP_ENDPOINT"], store=False, sample_runs=sample)
        return Mode(mode, None, telemetry.force_flush)
    if mode in ("otel-agents", "otel-agents-metrics", "otel-agents-nested"):
        import otel_agents

        runtime_spans = "nested" if mode.endswith("nested") else None  # None: the default (auto)
        # metrics go nowhere by default (no endpoint): otel-agents then makes no measurement;
        # "-metrics" has a reader (in memory), as a service exporting its metrics would
        readers = []
        if mode.endswith("metrics"):
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader

            readers.append(InMemoryMetricReader())
        exporter = CountingExporter()
        if endpoint is not None:  # a real backend behind the batch processor instead
            telemetry = otel_agents.configure(
                endpoint=endpoint, runtime_spans=runtime_spans, store=False, metric_readers=readers
            )
        else:
            telemetry = otel_agents.configure(
                span_exporter=exporter, runtime_spans=runtime_spans, metric_readers=readers
            )
        return Mode(mode, exporter if endpoint is None else None, telemetry.force_flush)
    raise ValueError(f"unknown mode {mode!r}")


def _replay(replies: int) -> Any:
    from autogen_core.models import CreateResult, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    info = {
        "vision": False,
        "function_calling": True,
        "json_output": False,
        "family": "gpt-4o",
        "structured_output": False,
    }
    results = [
        CreateResult(
            finish_reason="stop",
            content=f"draft {i}",
            usage=RequestUsage(prompt_tokens=20, completion_tokens=3),
            cached=False,
        )
        for i in range(replies)
    ]
    return ReplayChatCompletionClient(results, model_info=info)  # type: ignore[arg-type]


def replay_team(messages: int) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.model_context import BufferedChatCompletionContext

    agents = [
        AssistantAgent(name, model_client=_replay(messages), model_context=BufferedChatCompletionContext(buffer_size=4))
        for name in ("writer", "critic")
    ]
    return RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(messages), name=f"replay-{messages}")


def openai_team(base_url: str) -> Any:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    async def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: 12 degrees"

    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=base_url, api_key="bench", max_retries=0)
    agent = AssistantAgent("assistant", model_client=client, tools=[lookup], reflect_on_tool_use=True)
    return RoundRobinGroupChat([agent], termination_condition=MaxMessageTermination(2), name="openai-tool")


def build(workload: str, base_url: str | None) -> Any:
    if workload == "replay-5":
        return replay_team(5)
    if workload == "replay-100":
        return replay_team(100)
    if workload.startswith("replay-"):
        return replay_team(int(workload.split("-", 1)[1]))
    if workload == "openai-tool":
        assert base_url is not None
        return openai_team(base_url)
    raise ValueError(f"unknown workload {workload!r}")


async def one_run(mode: Mode, workload: str, base_url: str | None) -> tuple[float, int]:
    """(seconds, spans) of one run: the team is built before the clock starts."""
    team = build(workload, base_url)
    before = mode.exporter.spans if mode.exporter is not None else 0
    started = time.perf_counter()
    await team.run(task="write a haiku about tracing")  # as AutoGen's docs run a team: no call-site change
    took = time.perf_counter() - started
    mode.flush()
    spans = (mode.exporter.spans - before) if mode.exporter is not None else 0
    return took, spans

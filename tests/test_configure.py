"""configure(): settings, re-targeting, set_global, the kill switch, fallbacks and bad input."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from tests.support.config import assert_configure_refuses
from tests.support.metrics import points
from tests.support.spans import one_trace, traces
from tests.support.teams import writers_room

pytestmark = [pytest.mark.every_python]


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in (
        "OTEL_SERVICE_NAME",
        "OTEL_RESOURCE_ATTRIBUTES",
        "OTEL_SDK_DISABLED",
        "OTEL_AGENTS_RUNTIME_SPANS",
    ):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


@pytest.fixture
def shutdown_after() -> Iterator[list[otel_agents.Telemetry]]:
    made: list[otel_agents.Telemetry] = []
    yield made
    for telemetry in made:
        telemetry.shutdown()


async def test_a_later_configure_retargets_agentchat_spans_and_shuts_the_previous_down(
    clean_env: pytest.MonkeyPatch, shutdown_after: list[otel_agents.Telemetry]
) -> None:
    first_exporter, second_exporter = InMemorySpanExporter(), InMemorySpanExporter()
    first = otel_agents.configure(span_exporter=first_exporter)
    await drain(otel_agents.tap(writers_room(max_messages=3, name="first").run_stream(task="go")))
    second = otel_agents.configure(span_exporter=second_exporter)
    shutdown_after.append(second)
    await drain(otel_agents.tap(writers_room(max_messages=3, name="second").run_stream(task="go")))
    second.force_flush()

    first_names = {s.name for s in first_exporter.get_finished_spans()}
    assert "invoke_workflow first" in first_names and "invoke_workflow second" not in first_names
    tree = one_trace(second_exporter.get_finished_spans())
    assert tree.root.name == "invoke_workflow second"
    assert tree.named("invoke_agent "), "AgentChat's global-provider spans follow the new pipeline"
    assert first._shut_down


async def test_set_global_false_still_places_autogens_spans_in_the_run(
    clean_env: pytest.MonkeyPatch, shutdown_after: list[otel_agents.Telemetry]
) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, set_global=False)
    shutdown_after.append(telemetry)
    await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
    telemetry.force_flush()

    tree = one_trace(exporter.get_finished_spans())
    assert tree.root.name == "invoke_workflow writers-room"
    assert len(tree.named("message ")) == 3
    assert {s.name for s in tree.named("invoke_agent ")} == {"invoke_agent writer", "invoke_agent critic"}, (
        "AutoGen's spans reach the run through the placement hook, not the global provider"
    )


async def test_runtime_from_create_runtime_uses_the_given_telemetry(
    clean_env: pytest.MonkeyPatch, shutdown_after: list[otel_agents.Telemetry]
) -> None:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, runtime_spans="nested", set_global=False)
    shutdown_after.append(telemetry)
    runtime = otel_agents.create_runtime(telemetry)
    runtime.start()
    await drain(
        otel_agents.tap(writers_room(max_messages=3, runtime=runtime).run_stream(task="go"), telemetry=telemetry)
    )
    await runtime.stop_when_idle()
    telemetry.force_flush()

    tree = one_trace(exporter.get_finished_spans())
    assert {s.name for s in tree.named("autogen process")} >= {
        "autogen process writer",
        "autogen process critic",
    }


async def test_sdk_disabled_passes_items_through_and_records_nothing(
    clean_env: pytest.MonkeyPatch, shutdown_after: list[otel_agents.Telemetry]
) -> None:
    clean_env.setenv("OTEL_SDK_DISABLED", "true")
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    shutdown_after.append(telemetry)
    assert telemetry.disabled
    items = await drain(otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")))
    assert [type(i).__name__ for i in items] == ["TextMessage"] * 3 + ["TaskResult"]
    runtime = otel_agents.create_runtime()
    assert runtime is not None
    assert exporter.get_finished_spans() == ()


def test_service_name_argument_then_variable_then_default(
    clean_env: pytest.MonkeyPatch, shutdown_after: list[otel_agents.Telemetry]
) -> None:
    def service_name(**kwargs: Any) -> str:
        telemetry = otel_agents.configure(set_global=False, **kwargs)
        shutdown_after.append(telemetry)
        return str(telemetry.sdk_tracer_provider.resource.attributes["service.name"])  # type: ignore[attr-defined]

    assert service_name() == "otel-agents"
    clean_env.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-resource,team=a")
    assert service_name() == "from-resource"
    clean_env.setenv("OTEL_SERVICE_NAME", "from-variable")
    assert service_name() == "from-variable"
    assert service_name(service_name="from-argument") == "from-argument"


def test_metric_readers_are_wired_to_the_meter_provider(shutdown_after: list[otel_agents.Telemetry]) -> None:
    reader = InMemoryMetricReader()
    telemetry = otel_agents.configure(metric_readers=[reader], set_global=False)
    shutdown_after.append(telemetry)
    telemetry.meter_provider.get_meter("t").create_counter("probe").add(2)
    assert [point.value for point in points(reader.get_metrics_data(), "probe")] == [2]


async def test_telemetry_is_a_sync_and_async_context_manager(
    shutdown_after: list[otel_agents.Telemetry],
) -> None:
    with otel_agents.configure(set_global=False) as telemetry:
        assert not telemetry._shut_down
    assert telemetry._shut_down
    async with otel_agents.configure(set_global=False) as telemetry:
        assert not telemetry._shut_down
    assert telemetry._shut_down


async def test_sampling_keeps_or_drops_a_run_whole(
    clean_env: pytest.MonkeyPatch, shutdown_after: list[otel_agents.Telemetry]
) -> None:
    clean_env.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    clean_env.setenv("OTEL_TRACES_SAMPLER_ARG", "0.5")
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    shutdown_after.append(telemetry)
    for i in range(16):
        await drain(otel_agents.tap(writers_room(max_messages=3, name=f"run-{i}").run_stream(task="go")))
    telemetry.force_flush()

    kept = traces(exporter.get_finished_spans())
    assert 0 < len(kept) < 16
    for tree in kept.values():
        assert len(tree.named("message ")) == 3
        assert len(tree.named("invoke_agent ")) == 2


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"runtime_spans": "sometimes"}, {}, "runtime_spans='sometimes'"),
        ({}, {"OTEL_AGENTS_RUNTIME_SPANS": "loud"}, "OTEL_AGENTS_RUNTIME_SPANS='loud'"),
        ({"runtime_spans": "off"}, {"OTEL_AGENTS_RUNTIME_SPANS": "loud"}, "OTEL_AGENTS_RUNTIME_SPANS='loud'"),
        ({}, {"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED='maybe'"),
        ({"service_name": ""}, {}, "service_name=''"),
        ({"set_global": "yes"}, {}, "set_global='yes'"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting_and_value(
    clean_env: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str], message: str
) -> None:
    assert_configure_refuses(clean_env, env, message, **kwargs)


def test_a_bad_setting_is_an_otel_agents_config_error_in_its_traceback(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")
    with pytest.raises(otel_agents.ConfigError) as raised:
        otel_agents.configure(set_global=False)
    shown = "".join(traceback.format_exception(raised.value))
    assert shown.splitlines()[-1].startswith("otel_agents.ConfigError: OTEL_EXPORTER_OTLP_ENDPOINT='localhost:4318'")
    assert "_internal" not in shown.splitlines()[-1]
    assert (repr(otel_agents.ConfigError), str(otel_agents.ConfigError)) == (
        "<class 'otel_agents.ConfigError'>",
        "<class 'otel_agents.ConfigError'>",
    )
    assert pickle.loads(pickle.dumps(raised.value)).args == raised.value.args, "pickled by its public name"


def test_misuse_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="tracer_provider"):
        otel_agents.create_runtime(tracer_provider=None)
    with pytest.raises(TypeError, match="run_stream"):
        otel_agents.tap([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Telemetry"):
        otel_agents.create_runtime(telemetry="default")  # type: ignore[arg-type]


def _python(code: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_is_cheap() -> None:
    loaded = _python(
        """
        import json, sys
        import otel_agents
        heavy = ("autogen_core", "autogen_agentchat", "autogen_ext", "opentelemetry.sdk", "genai_prices")
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))))
        """
    )
    assert loaded == []


def test_without_configure_the_applications_global_providers_are_used() -> None:
    result = _python(
        """
        import asyncio, json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        import otel_agents
        from tests.support.teams import writers_room

        async def main():
            async for _ in otel_agents.tap(writers_room(max_messages=3).run_stream(task="go")):
                pass
        asyncio.run(main())
        spans = exporter.get_finished_spans()
        ours = {s.context.trace_id for s in spans if s.name.startswith(("invoke_workflow", "message"))}
        print(json.dumps({"names": sorted({s.name for s in spans}), "traces": len(ours)}))
        """
    )
    assert "invoke_workflow writers-room" in result["names"]
    assert "message writer" in result["names"]
    assert result["traces"] == 1


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"span_exporter": "jaeger"}, {}, "span_exporter='jaeger'"),
        ({"metric_readers": ["prometheus"]}, {}, "metric_readers=['prometheus']"),
        ({"loop_limits": {"max_messages": 5}}, {}, "loop_limits={'max_messages': 5}"),
        ({}, {"OTEL_EXPORTER_PROMETHEUS_HOST": "my host!"}, "OTEL_EXPORTER_PROMETHEUS_HOST='my host!'"),
    ],
)
def test_bad_arguments_are_refused(
    clean_env: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str], message: str
) -> None:
    assert_configure_refuses(clean_env, env, message, **kwargs)

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal import process_state
from tests.support.openai_server import OpenAIServer
from tests.support.phoenix import Phoenix, start_phoenix, stop_phoenix

if TYPE_CHECKING:
    from tests.support.ui_server import UiServer
    from tests.support.ui_store import UiRuns


class Capture:
    """A configured pipeline with an in-memory exporter."""

    def __init__(self, telemetry: otel_agents.Telemetry, exporter: InMemorySpanExporter) -> None:
        self.telemetry = telemetry
        self.exporter = exporter

    def spans(self) -> list[ReadableSpan]:
        assert self.telemetry.force_flush()
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    monkeypatch.delenv("OTEL_AGENTS_RUNTIME_SPANS", raising=False)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter)
    yield Capture(telemetry, exporter)
    telemetry.shutdown()


@pytest.fixture
def nested_capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    exporter = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exporter, runtime_spans="nested")
    yield Capture(telemetry, exporter)
    telemetry.shutdown()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def private_data_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default store lives under XDG_DATA_HOME: keep every test's out of the real home."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
    for name in (
        "OTEL_AGENTS_STORE",
        "OTEL_TRACES_EXPORTER",
        "OTEL_METRICS_EXPORTER",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def every_span_accounted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test that exports to a real backend (`backend`) ends with each pipeline it made shut
    down and every span of it accounted for: ended = delivered + dropped + sampled out."""
    if request.node.get_closest_marker("backend") is None:
        yield
        return
    from otel_agents._internal import telemetry as pipelines
    from tests.support.accounting import assert_every_span_accounted

    made: list[otel_agents.Telemetry] = []
    init = pipelines.Telemetry.__init__

    def recorded(self: otel_agents.Telemetry, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(pipelines.Telemetry, "__init__", recorded)
    yield
    for telemetry in made:
        telemetry.shutdown()
        assert_every_span_accounted(telemetry)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Each test starts with the process as otel-agents found it: AutoGen uninstrumented, no
    pipeline, no run, conversation or cache left by the test before (`process_state.reset()`).
    After every fixture's teardown, so after `monkeypatch` has put back what a test patched (a
    reset before that would leave a wrapper of ours it restored in place, outside the ledger)."""
    process_state.reset()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    executable = os.environ.get("OTEL_AGENTS_TEST_PHOENIX")
    if not executable:
        if os.environ.get("CI"):
            pytest.fail("OTEL_AGENTS_TEST_PHOENIX is not set: run the suite with scripts/test.sh")
        pytest.skip("Phoenix not installed: scripts/test.sh installs and names it")
    server = start_phoenix(executable, tmp_path_factory.mktemp("phoenix"))
    yield server
    stop_phoenix(server)


@pytest.fixture(scope="module")
def ui_runs(tmp_path_factory: pytest.TempPathFactory) -> UiRuns:
    """The web page's store, filled by the real OpenAI client (tests/support/ui_store.py): one for
    each test module, which may add runs to it."""
    from tests.support.ui_store import fill_ui_store

    return fill_ui_store(tmp_path_factory.mktemp("ui-store"))


@pytest.fixture(scope="module")
def ui(ui_runs: UiRuns) -> Iterator[UiServer]:
    """`otel-agents ui` over the module's `ui_runs`, started as a user starts it."""
    from tests.support.ui_server import ui_server

    with ui_server(ui_runs.store) as server:
        yield server

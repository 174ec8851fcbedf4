"""Every span of a run goes through the SDK tracer's public path: a span processor a user adds sees
the SDK's own `Span` when it starts and a `ReadableSpan` when it ends."""

from __future__ import annotations

import ast
import asyncio
import pathlib
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

import otel_agents
from tests.conftest import Capture
from tests.support.spans import one_trace
from tests.support.teams import writers_room

pytestmark = [pytest.mark.every_python]


class Watching(SpanProcessor):
    def __init__(self) -> None:
        self.started: list[Any] = []
        self.ended: list[Any] = []

    def on_start(self, span: Any, parent_context: Context | None = None) -> None:
        self.started.append(span)

    def on_end(self, span: Any) -> None:
        self.ended.append(span)


@pytest.mark.parametrize("mode", ["off", "nested"])
async def test_a_users_span_processor_sees_the_sdks_own_spans(mode: str, request: pytest.FixtureRequest) -> None:
    used: Capture = request.getfixturevalue("capture" if mode == "off" else "nested_capture")
    watching = Watching()
    used.telemetry.sdk_tracer_provider.add_span_processor(watching)  # type: ignore[attr-defined]
    runtime = otel_agents.create_runtime(used.telemetry)
    runtime.start()
    try:
        async for _item in otel_agents.tap(writers_room(runtime=runtime).run_stream(task="go")):
            pass
    finally:
        await runtime.stop_when_idle()

    exported = used.spans()
    tree = one_trace(exported)
    assert watching.started and all(isinstance(span, Span) for span in watching.started), "the SDK's Span"
    assert all(isinstance(span, ReadableSpan) for span in watching.ended)
    assert {s.context.span_id for s in watching.ended} == {s.context.span_id for s in tree.spans}
    if mode == "nested":
        assert tree.named("autogen process "), "AutoGen's runtime spans too"


def private_reads(source: str) -> list[tuple[int, str]]:
    """`obj._name` where `obj` is not `self`/`cls`, `getattr(obj, "_name")`, and imports from
    private modules of OpenTelemetry (API, SDK, util-genai), as (line, text)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) > 1:
            name = node.args[1]
            text = name.value if isinstance(name, ast.Constant) else None
            if isinstance(text, str) and text.startswith("_") and not text.startswith("__"):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("opentelemetry"):
            module = node.module or ""
            # the logs API is published only as `opentelemetry._logs`
            if module != "opentelemetry._logs" and any(part.startswith("_") for part in module.split(".")):
                found.append((node.lineno, f"from {module}"))
            found += [(node.lineno, f"from {module} import {a.name}") for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, f"import {a.name}")
                for a in node.names
                if a.name.startswith("opentelemetry") and any(_private(part) for part in a.name.split("."))
            ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("opentelemetry."):
            if any(_private(part) for part in node.value.split(".")):  # a private module named in a string
                found.append((node.lineno, repr(node.value)))
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


OTEL_CONVENTIONS = "_internal/export/otel_conventions.py"
"""The one module allowed to name what is private in OpenTelemetry (each entry pinned by
tests/test_otel_conventions.py)."""


def test_no_private_member_of_the_sdk_is_read_outside_its_conventions_module() -> None:
    package = pathlib.Path(otel_agents.__file__).parent
    offenders = [
        f"{path.relative_to(package)}:{line}: {text}"
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).as_posix() != OTEL_CONVENTIONS
        for line, text in private_reads(path.read_text())
    ]
    assert not offenders, offenders
    named = [text for _, text in private_reads((package / OTEL_CONVENTIONS).read_text())]
    assert named == [
        "'opentelemetry.sdk._shared_internal'",
        "'opentelemetry._logs'",  # the Logs API, still private-named: an outcome's log event
        "'opentelemetry.sdk._logs'",
    ], "each private name there is listed here too"


def test_the_private_read_check_finds_what_it_looks_for() -> None:
    source = (
        "tracer._span_limits\ngetattr(span, '_attributes')\nself._mine\n"
        "from opentelemetry.util._decorator import x\nfrom opentelemetry._logs import y\n"
        "from opentelemetry.context import _SUPPRESS\nimport opentelemetry.util._decorator\n"
        "logging.getLogger('opentelemetry.sdk._shared_internal')"
    )
    found = sorted(text for _, text in private_reads(source))
    assert found == [
        "'opentelemetry.sdk._shared_internal'",
        "from opentelemetry.context import _SUPPRESS",
        "from opentelemetry.util._decorator",
        "getattr(span, '_attributes')",
        "import opentelemetry.util._decorator",
        "tracer._span_limits",
    ]


async def test_the_placing_tracer_decorates_sync_and_async_functions_as_the_apis_does(capture: Capture) -> None:
    """AutoGen's tracers come from the placing provider; used as a decorator (as the API allows),
    its `start_as_current_span` makes a span per call, ended when the call (awaited) returns."""
    from opentelemetry import trace

    from otel_agents._internal.autogen.tracer_hook import AUTOGEN_TRACERS

    tracer = AUTOGEN_TRACERS.get_tracer("app")

    @tracer.start_as_current_span("work")
    async def work(fail: bool) -> str:
        await asyncio.sleep(0.02)
        if fail:
            raise ValueError("no")
        return trace.get_current_span().get_span_context().span_id.to_bytes(8, "big").hex()

    @tracer.start_as_current_span("count")
    def count() -> int:
        return trace.get_current_span().get_span_context().span_id

    inside = [await work(False), await work(False)]
    with pytest.raises(ValueError):
        await work(True)
    counted = {count(), count()}
    with tracer.start_as_current_span("block") as block:
        assert trace.get_current_span() is block

    spans = capture.spans()
    works = [s for s in spans if s.name == "work"]
    assert [s.context.span_id.to_bytes(8, "big").hex() for s in works[:2]] == inside, "a span a call, current in it"
    assert all(s.end_time - s.start_time >= 15_000_000 for s in works), "ended when the awaited call returned"
    assert not works[2].status.is_ok and works[2].events[0].name == "exception"
    assert {s.context.span_id for s in spans if s.name == "count"} == counted and len(counted) == 2
    assert [s.name for s in spans if s.name == "block"] == ["block"]
    assert trace.get_current_span() is trace.INVALID_SPAN, "every block detached"


def test_a_runtime_spans_block_refuses_to_decorate(capture: Capture) -> None:
    """AutoGen's runtime tracers start their span at once (a `with` block each): such a block
    cannot decorate a function, and says so rather than reuse one span for every call."""
    from otel_agents._internal.autogen.tracer_hook import AUTOGEN_TRACERS

    block = AUTOGEN_TRACERS.get_tracer("autogen core").start_as_current_span("autogen process agent")
    with pytest.raises(TypeError, match="cannot decorate"):
        block(lambda: None)

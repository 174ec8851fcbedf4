"""Every span of a run goes through the SDK tracer's public path: a span processor a user adds sees
the SDK's own `Span` when it starts and a `ReadableSpan` when it ends."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

import otel_agents
from tests.conftest import Capture
from tests.support.spans import one_trace
from tests.support.teams import writers_room


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


def test_no_private_member_of_the_sdk_is_read() -> None:
    private = re.compile(
        r"\b_(span_limits|instrumentation_scope|is_enabled|on_ending|immutable|active_span_processor)\b"
    )
    package = pathlib.Path(otel_agents.__file__).parent
    offenders = [
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if private.search(line)
    ]
    assert not offenders, offenders

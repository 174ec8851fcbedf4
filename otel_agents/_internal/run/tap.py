"""`tap()` and `run_stream()`: one traced run per stream, items passed through unchanged."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context

from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import patches
from otel_agents._internal.genai.loops import LoopRules
from otel_agents._internal.run.follow import follow
from otel_agents._internal.run.state import Run
from otel_agents._internal.run.workflow import WorkflowSpan
from otel_agents._internal.telemetry import Telemetry, current

if TYPE_CHECKING:
    from autogen_core import CancellationToken

T = TypeVar("T")

UNKNOWN_WORKFLOW = "unknown"

logger = logging.getLogger(__name__)


def _workflow_name(team: object | None, stream: object) -> str:
    owner = team
    if owner is None:  # an un-started `team.run_stream(...)` generator knows its `self`
        frame = getattr(stream, "ag_frame", None)
        owner = frame.f_locals.get(ag.STREAM_FRAME_SELF) if frame is not None else None
    name = getattr(owner, "name", None)
    return name if isinstance(name, str) and name else UNKNOWN_WORKFLOW


def start_run(telemetry: Telemetry, name: str, parent: otel_context.Context | None = None) -> WorkflowSpan | None:
    """The run's span, under `parent` (default: the current context); None (the run goes
    untraced) if it cannot be started."""
    if telemetry.disabled:
        return None
    try:
        patches.install()  # model client classes defined since configure()
        run = Run(
            provider=telemetry.sdk_tracer_provider,
            runtime_spans=telemetry.settings.runtime_spans,
            workflow=name,
            loops=LoopRules(telemetry.loop_limits),
            telemetry=telemetry,
        )
        return WorkflowSpan(run, name, otel_context.get_current() if parent is None else parent)
    except Exception:
        logger.warning("otel-agents could not start tracing run %r; it runs untraced", name, exc_info=True)
        return None


def _check_stream(stream: object) -> None:
    if not hasattr(stream, "__anext__"):
        raise TypeError(f"tap() takes the async stream of team.run_stream(...), not {type(stream).__name__}")


def tap(
    stream: AsyncIterator[T],
    *,
    team: object | None = None,
    telemetry: Telemetry | None = None,
) -> AsyncGenerator[T, None]:
    """Trace one run: iterate the result instead of `stream`; every item comes through unchanged.

    The run becomes one trace rooted at `invoke_workflow {team name}` (a child of the span current
    here, if any), with a `message {source}` span per streamed item. `team` names the workflow when
    it cannot be read from the stream; `telemetry=None` means the latest `configure()`'s.
    """
    _check_stream(stream)
    return follow(stream, _run_starter(current(telemetry), _workflow_name(team, stream)))


def run_stream(
    team: Any,
    *,
    task: Any,
    telemetry: Telemetry | None = None,
    cancellation_token: CancellationToken | None = None,
    **kwargs: Any,
) -> AsyncGenerator[Any, None]:
    """`tap(team.run_stream(task=...))` with a cancellation token of its own.

    When the consumer leaves early (`break`, `aclose()`, cancellation) the team is cancelled, so no
    model call starts after that. A given `cancellation_token` still cancels the run.
    """
    from autogen_core import CancellationToken

    resolved = current(telemetry)
    token = CancellationToken()
    if cancellation_token is not None:
        if cancellation_token.is_cancelled():
            token.cancel()
        else:
            cancellation_token.add_callback(token.cancel)
    stream = team.run_stream(task=task, cancellation_token=token, **kwargs)
    return follow(stream, _run_starter(resolved, _workflow_name(team, stream)), cancel=token.cancel)


def _run_starter(telemetry: Telemetry, name: str) -> Callable[[], WorkflowSpan | None]:
    """Starts the run when its first item is asked for, under the context current now."""
    parent = otel_context.get_current()
    return lambda: start_run(telemetry, name, parent)

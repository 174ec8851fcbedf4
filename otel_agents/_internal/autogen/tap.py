"""`tap()` and `run_stream()`: one traced run per stream, items passed through unchanged.

With AutoGen instrumented (`configure()`'s default), `team.run_stream(...)` already returns a
traced `RunStream`: `tap` and `run_stream` then use that one (with their own telemetry and
cancellation), so a run never gets a second run span.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar

from otel_agents._internal.autogen import patches
from otel_agents._internal.run.follow import RunStream
from otel_agents._internal.run.start import run_starter, runner_of, workflow_name
from otel_agents._internal.telemetry import Telemetry
from otel_agents._internal.tracing.globals import current

if TYPE_CHECKING:
    from collections.abc import Sequence

    from autogen_agentchat.base import TaskResult, TaskRunner
    from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage
    from autogen_core import CancellationToken

T = TypeVar("T")


def _check_stream(stream: object) -> None:
    if not hasattr(stream, "__anext__"):
        raise TypeError(f"tap() takes the async stream of team.run_stream(...), not {type(stream).__name__}")


def tap(
    stream: AsyncIterator[T],
    *,
    team: object | None = None,
    telemetry: Telemetry | None = None,
) -> RunStream[T]:
    """Trace one run: iterate the result instead of `stream`; every item comes through unchanged.

    The run becomes one trace rooted at `invoke_workflow {team name}` (a child of the span current
    here, if any), with a `message {source}` span per streamed item. `team` (the team or agent, or
    a name) names the workflow when it cannot be read from the stream, or as you want it named;
    `telemetry=None` means the latest `configure()`'s. The result is an async generator (`asend`,
    `athrow`, `aclose`): leaving the loop early ends the run at once.
    """
    _check_stream(stream)
    given_name = None
    if isinstance(team, str):  # a name, not the team
        if not team.strip():
            raise ValueError(f"tap(team={team!r}): expected the team (or agent), or a non-empty name")
        given_name, team = team, None
    resolved = current(telemetry)
    if isinstance(stream, RunStream):  # traced already (the instrumented run_stream installed what it needs)
        if stream.kind == "run":
            name = given_name or (workflow_name(team) if team is not None else stream.name)
            stream.record_with(run_starter(resolved, name, team or runner_of(stream)))
        return stream
    patches.install_new_classes()  # model client and tool classes defined since configure()
    name = given_name or workflow_name(team, stream)
    return RunStream(stream, run_starter(resolved, name, team or runner_of(stream)), name=name)


def run_stream(
    team: TaskRunner,
    *,
    task: str | BaseChatMessage | Sequence[BaseChatMessage] | None,
    telemetry: Telemetry | None = None,
    cancellation_token: CancellationToken | None = None,
    **kwargs: Any,
) -> RunStream[BaseAgentEvent | BaseChatMessage | TaskResult]:
    """`tap(team.run_stream(task=...))` with a cancellation token of its own.

    When the consumer leaves early (`break`, `aclose()`, cancellation) the team is cancelled, so no
    model call starts after that. A given `cancellation_token` still cancels the run.
    """
    from autogen_core import CancellationToken

    resolved = current(telemetry)
    patches.install_new_classes()
    token = CancellationToken()
    if cancellation_token is not None:
        if cancellation_token.is_cancelled():
            token.cancel()
        else:
            cancellation_token.add_callback(token.cancel)
    stream = team.run_stream(task=task, cancellation_token=token, **kwargs)
    if isinstance(stream, RunStream):
        if stream.kind == "run":
            stream.record_with(run_starter(resolved, stream.name, team))
        stream.also_cancel(token.cancel)
        return stream
    name = workflow_name(team, stream)
    return RunStream(stream, run_starter(resolved, name, team), cancel=token.cancel, name=name)

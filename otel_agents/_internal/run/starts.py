"""Where a run starts: a run of its own, a run nested in the traced run current there, or none.

The wrappers in `autogen.patches` ask here when a team's or an agent's `run_stream`, an agent's
`run`, or an agent's `on_messages`/`on_messages_stream` is called, and record what the answer
starts (`follow.RunStream` for a stream, `awaited.recorded` for an awaited call).
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_agents._internal import keys as sc
from otel_agents._internal.run import attribution
from otel_agents._internal.run.follow import Kind
from otel_agents._internal.run.start import start_run, workflow_name
from otel_agents._internal.run.workflow import WorkflowSpan, in_run
from otel_agents._internal.tracing.globals import current
from otel_agents._internal.tracing.registry import REGISTRY, Node


def of_run(runner: object, *, every_run: bool) -> tuple[Callable[[], WorkflowSpan | None], Kind] | None:
    """How a run of `runner` starting here is recorded, or None (AutoGen's own stream, untouched).

    With `every_run` (AutoGen instrumented), every run is recorded; whether as a run of its own or
    nested in the traced run current where it starts is decided at its first item (a stream made in one place may be
    iterated inside another traced run: `tap(my_filter(team.run_stream()))`). Otherwise only a run
    started inside a traced run is recorded, nested in it.
    """
    made_in, given = otel_context.get_current(), attribution.given_here()
    name = workflow_name(runner)
    if every_run:
        telemetry = current(None)
        if telemetry.disabled:
            return None

        def start() -> WorkflowSpan | None:
            return _nested(name, otel_context.get_current()) or start_run(
                telemetry, name, made_in, runner=runner, given=given
            )

        return start, "run"
    if _cause(made_in) is None:
        return None
    return (lambda: _nested(name, made_in)), "nested"


def _cause(here: otel_context.Context) -> Node | None:
    cause = REGISTRY.lookup(trace.get_current_span(here).get_span_context())
    return cause if cause is not None and not cause.run.ended else None


def _in_a_message_handler() -> bool:
    """Whether AutoGen's runtime is handling a message here (a team's turn calls its agent from a
    handler; so does a `RoutedAgent` wrapping an agent): then the agent's call is part of that
    work, whatever spans are or are not recorded around it."""
    from autogen_core import MessageHandlerContext

    try:
        MessageHandlerContext.agent_id()
    except RuntimeError:
        return False
    return True


def _within_a_run(here: otel_context.Context) -> bool:
    """Whether `here` is inside a run, open or ended (a team running on after its consumer left)."""
    if in_run(here):
        return True
    current_span = trace.get_current_span(here).get_span_context()
    if not current_span.is_valid:
        return False
    return REGISTRY.lookup(current_span) is not None or REGISTRY.of_ended_run(current_span, None) is not None


def _nested(name: str, here: otel_context.Context) -> WorkflowSpan | None:
    """An `invoke_workflow {name}` span under the workflow of the traced run current `here`."""
    cause = _cause(here)
    if cause is None:
        return None
    under = trace.set_span_in_context(trace.NonRecordingSpan(cause.workflow), here)
    return WorkflowSpan(cause.run, name, under, within=cause.trail)


def of_message_call(agent: object, *, every_run: bool) -> Callable[[], WorkflowSpan | None] | None:
    """How a run of `agent`'s `on_messages`/`on_messages_stream` called here is recorded: as a
    run of its own, an `invoke_agent {agent}` root, when the app calls it outside any run with
    `every_run` (AutoGen instrumented); None inside a run (AutoGen's turn in a team, the agent's `run`,
    `AgentTool`, `on_messages` calling `on_messages_stream`: nothing of ours is added)."""
    if not every_run or _within_a_run(otel_context.get_current()) or _in_a_message_handler():
        return None
    telemetry = current(None)
    if telemetry.disabled:
        return None
    made_in, given, name = otel_context.get_current(), attribution.given_here(), workflow_name(agent)
    return lambda: start_run(telemetry, name, made_in, runner=agent, given=given, operation=sc.OPERATION_INVOKE_AGENT)

"""Starting a traced run: its `Run` state and its `invoke_workflow` span, under the right parent."""

from __future__ import annotations

import logging
from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link

from otel_agents._internal import keys as sc
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.genai.loops import LoopRules
from otel_agents._internal.recording import Recording
from otel_agents._internal.run import attribution, outcomes
from otel_agents._internal.run.stop import CONSUMER_CLOSED
from otel_agents._internal.run.workflow import WorkflowSpan
from otel_agents._internal.tracing.state import Run

UNKNOWN_WORKFLOW = "unknown"

logger = logging.getLogger(__name__)


def runner_of(stream: object) -> object | None:
    """The team (or agent) an un-started `run_stream(...)` generator belongs to, or a `RunStream`'s."""
    runner: object | None = getattr(stream, "runner", None)
    if runner is not None:
        return runner
    frame = getattr(stream, "ag_frame", None)
    return frame.f_locals.get(ag.STREAM_FRAME_SELF) if frame is not None else None


def workflow_name(runner: object | None, stream: object | None = None) -> str:
    """A team's (or agent's) `name`; else the one of the team `stream` belongs to."""
    owner = runner if runner is not None or stream is None else runner_of(stream)
    name = getattr(owner, "name", None)
    return name if isinstance(name, str) and name else UNKNOWN_WORKFLOW


def is_agent(runner: object) -> bool:
    """Whether `runner` is an AgentChat agent (not a team)."""
    from autogen_agentchat.agents import BaseChatAgent

    return isinstance(runner, BaseChatAgent)


def start_run(
    telemetry: Recording,
    name: str,
    parent: otel_context.Context | None = None,
    *,
    runner: object | None = None,
    given: attribution.Attribution | None = None,
    operation: str = sc.OPERATION_INVOKE_WORKFLOW,
) -> WorkflowSpan | None:
    """The run's span, under `parent` (default: the current context); None (the run goes
    untraced) if it cannot be started. `runner` (the team or agent) keeps the conversation;
    `given`: what `run_attributes` gave where the run was made (default: around this point)."""
    if telemetry.disabled:
        return None
    try:
        parent = otel_context.get_current() if parent is None else parent
        who = attribution.at_run_start(parent, given)
        conversation_id, resumed_from = attribution.conversation_of(runner, who.conversation_id)
        run = Run(
            provider=telemetry.sdk_tracer_provider,
            # `auto`: an AgentChat run's runtime spans are not kept (as `off`)
            runtime_spans="off" if telemetry.settings.runtime_spans == "auto" else telemetry.settings.runtime_spans,
            workflow=name,
            loops=LoopRules(telemetry.loop_limits),
            recording=telemetry,
            conversation_id=conversation_id,
            attributes=who.attributes,
        )
        links = [Link(resumed_from)] if resumed_from is not None else []
        if telemetry.settings.run_parent == "link":  # the root of its own trace, linked to where it started
            here = trace.get_current_span(parent).get_span_context()
            if here.is_valid:
                links.append(Link(here))
            parent = trace.set_span_in_context(trace.INVALID_SPAN, parent)  # baggage and the rest kept
        workflow = WorkflowSpan(
            run,
            name,
            parent,
            attributes=who.span_attributes(),
            links=links,
            operation=operation,
            single_agent=runner is not None and is_agent(runner),
        )
        try:
            if runner is not None:  # the conversation's last run, once it really ran (AutoGen may refuse it)
                span, run_id = workflow.span.get_span_context(), workflow.run_id
                workflow.at_first_item = lambda: attribution.run_started(runner, span, run_id)
            outcomes.started(workflow)
            workflow.at_end = lambda: outcomes.ended(workflow)
            if telemetry.settings.outcome is not None:
                workflow.before_end = lambda: outcomes.settle(workflow)
        except BaseException as exc:
            if not isinstance(exc, Exception):
                # A SystemExit (a signal handler's) landed here, before the run was handed to its
                # stream: the consumer leaves, and the run ends now, not open until the exit.
                workflow.stopped(CONSUMER_CLOSED)
                workflow.end()
            raise
        return workflow
    except Exception:
        logger.warning("otel-agents could not start tracing run %r; it runs untraced", name, exc_info=True)
        return None


def run_starter(telemetry: Recording, name: str, runner: object | None = None) -> Callable[[], WorkflowSpan | None]:
    """Starts the run when called (at its first item), under the context current now."""
    parent, given = otel_context.get_current(), attribution.given_here()
    return lambda: start_run(telemetry, name, parent, runner=runner, given=given)

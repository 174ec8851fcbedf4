"""A workflow span (a tapped run, or a team nested in one) and the stream follower that feeds it."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.export.soon import FLUSH_SOON
from otel_agents._internal.genai.fingerprints import text_fingerprint
from otel_agents._internal.genai.growth import growth_per_turn
from otel_agents._internal.genai.keeping import RunSummary
from otel_agents._internal.genai.outcomes import Outcome
from otel_agents._internal.genai.prices import to_nano
from otel_agents._internal.per_provider import PerProvider
from otel_agents._internal.run.exemplars import kept as kept_context
from otel_agents._internal.run.keep import decide, not_applied
from otel_agents._internal.run.stop import (
    COMPLETED,
    EARLY_STOPS,
    SHUTDOWN,
    StopKind,
    error_reason,
    stop_kind_of,
)
from otel_agents._internal.run.uninterrupted import uninterrupted
from otel_agents._internal.tracing.errors import mark_error
from otel_agents._internal.tracing.registry import REGISTRY, Trail
from otel_agents._internal.tracing.state import Run
from otel_agents._version import SCHEMA_URL, __version__

if TYPE_CHECKING:
    from autogen_agentchat.base import Response, TaskResult
    from autogen_agentchat.messages import BaseChatMessage, ModelClientStreamingChunkEvent

_TRACER_NAME = "otel_agents"

logger = logging.getLogger(__name__)


def _autogen_types() -> tuple[
    type[TaskResult], type[ModelClientStreamingChunkEvent], type[Response], type[Any], type[BaseChatMessage]
]:
    # Imported when a run starts, not when otel_agents is imported: AutoGen is loaded by then.
    from autogen_agentchat.base import Response, TaskResult
    from autogen_agentchat.messages import BaseChatMessage, HandoffMessage, ModelClientStreamingChunkEvent

    return TaskResult, ModelClientStreamingChunkEvent, Response, HandoffMessage, BaseChatMessage


def _text_of(item: object) -> str | None:
    """An item's text, as the message span's content and fingerprint have it."""
    to_text = getattr(item, "to_text", None)
    text = to_text() if callable(to_text) else getattr(item, "content", None)
    return text if isinstance(text, str) else None


_tracers: PerProvider[trace.Tracer] = PerProvider()
process_state.hold(
    __name__,
    "_tracers",
    bound="weak per provider: goes with its provider",
    size=_tracers.__len__,
    forget=_tracers.clear,
)


def _tracer(provider: trace.TracerProvider) -> trace.Tracer:
    """Our tracer in `provider`, made once (the SDK's `get_tracer` is not cheap)."""
    return _tracers.setdefault(provider, lambda: provider.get_tracer(_TRACER_NAME, __version__, SCHEMA_URL))


_open: dict[int, weakref.ref[WorkflowSpan]] = {}
"""Workflow spans not ended yet, by id, held weakly (a span collected unended leaves with its
reference's callback): those of a pipeline that shuts down are ended as `shutdown`. A dict, not a
`WeakSet`: copying it (`list(_open.values())`) is one C-level step, which neither another thread's
run starting nor a run ended by the garbage collector in this thread can interrupt, where a
`WeakSet`'s Python-level iteration raised "Set changed size during iteration" in both cases."""


def _end_all() -> None:
    end_open_runs(None)
    _open.clear()


def _forget_in_forked_child() -> None:
    """A forked child has none of its parent's runs: it never ends, stores or exports them (the
    parent does, once); they are left as ended here."""
    for workflow in [w for w in (ref() for ref in list(_open.values())) if w is not None]:
        workflow.forked_away()
    _open.clear()


os.register_at_fork(after_in_child=_forget_in_forked_child)


process_state.hold(
    __name__,
    "_open",
    bound="weak: each run leaves at its end, or when collected unended",
    size=lambda: len(_open),
    forget=_end_all,
)


def end_open_runs(provider: trace.TracerProvider | None) -> None:
    """End every run (and nested team) still open whose spans `provider` records (None: every
    one): stop kind and reason `shutdown`, nested teams first. Called when the pipeline shuts
    down, and when the process exits."""
    alive = [w for w in (ref() for ref in list(_open.values())) if w is not None]
    open_now = sorted((w for w in alive if provider is None or w.run.provider is provider), key=lambda w: w.is_root)
    for workflow in open_now:
        try:
            workflow.stopped(SHUTDOWN)
            workflow.end()
        except Exception:  # shutting down goes on whatever one run does
            logger.warning("otel-agents could not end a run at shutdown", exc_info=True)


_IN_RUN: Final = otel_context.create_key("otel_agents.in_run")


def in_run(context: otel_context.Context | None = None) -> bool:
    """Whether `context` (default: the current one) descends from a run's context: what a run
    causes, even where the span registry lets go of its spans (a team's embedded runtime inherits
    it; a runtime started outside the run does not, and is told by the registry)."""
    return bool(otel_context.get_value(_IN_RUN, context))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def new_run_id() -> str:
    """32 lowercase hex digits, drawn as the SDK draws trace ids (`os.urandom` can be slow)."""
    return f"{random.getrandbits(128):032x}"


class WorkflowSpan:
    """`invoke_workflow {name}`: the span of a run (root) or of a nested team, and its figures."""

    def __init__(
        self,
        run: Run,
        name: str,
        parent: otel_context.Context,
        *,
        within: Trail | None = None,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] = (),
        operation: str = sc.OPERATION_INVOKE_WORKFLOW,
        single_agent: bool = False,
    ) -> None:
        """The run span of `run`; with `within`, the span of a team nested in that trail's run.
        `attributes` and `links` go on the span as it starts (who the run is for, the run before).
        `operation`: `invoke_agent` for a run of an agent's `on_messages`; `single_agent`: the
        run is one agent's (`run`, `on_messages`), whose stop reason is its response's."""
        self.run = run
        self.is_root = is_root = within is None
        self._single_agent = single_agent
        (
            self._task_result_type,
            self._chunk_type,
            self._response_type,
            self._handoff_type,
            self._chat_message_type,
        ) = _autogen_types()
        self._spans = _tracer(run.provider)
        self._last_ns = self._start_ns = time.time_ns()
        attributes_given = attributes
        span_attributes: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: operation,
            sc.GEN_AI_WORKFLOW_NAME: name,
        }
        if operation == sc.OPERATION_INVOKE_AGENT:
            span_attributes[sc.GEN_AI_AGENT_NAME] = name
        span_attributes[sc.OPENINFERENCE_SPAN_KIND] = sc.KIND_AGENT if single_agent and is_root else sc.KIND_CHAIN
        self.run_id = new_run_id() if is_root else None
        if self.run_id is not None:
            if attributes_given:
                span_attributes.update(attributes_given)
            span_attributes[sc.RUN_ID] = self.run_id
            if run.conversation_id is not None:
                span_attributes[sc.GEN_AI_CONVERSATION_ID] = run.conversation_id
        self.span = self._spans.start_span(
            f"{operation} {name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=span_attributes,
            links=links,
            start_time=self._last_ns,
        )
        if within is None:
            self.trail = REGISTRY.open(run, self.span.get_span_context())
        else:
            self.trail = within
            REGISTRY.add_workflow(within, self.span.get_span_context())
        self.context = trace.set_span_in_context(self.span, otel_context.set_value(_IN_RUN, True, parent))
        self.message_count = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason: str | None = None
        self.stop_kind: StopKind | None = None
        self._error: BaseException | None = None
        self._output: str | None = None
        """The last message's text, kept only with content capture on the span (`output.value`)."""
        self._ended = False
        self._finished = False
        self._ending = threading.RLock()
        """Re-entrant: the garbage collector may end the run (its stream dropped in a reference
        cycle) inside an allocation made under this very lock (`add_outcome`'s event)."""
        self.at_first_item: Callable[[], None] | None = None
        """Called once, at the first item (the run really started)."""
        self.before_end: Callable[[], Awaitable[None]] | None = None
        """Awaited as the run ends with what it returned, before its span ends (the outcome callable)."""
        self.at_end: Callable[[], None] | None = None
        """Called once its span has ended."""
        self.result: object | None = None
        """The `TaskResult` or `Response` the run returned (a root run's)."""
        self.outcomes: dict[str, Outcome] = {}
        """Outcomes recorded while it was open, by name."""
        key = id(self)
        _open[key] = weakref.ref(self, lambda _, key=key: _open.pop(key, None))  # type: ignore[misc]

    def on_item(self, item: object, *, timed: bool = True) -> None:
        """Record one streamed item: a message span (root only), usage, and the final result.

        `timed=False`: the item did not stream (an agent's `run` returns them all at once), so its
        message span gets no latency."""
        now = time.time_ns()
        if self.at_first_item is not None:
            at_first_item, self.at_first_item = self.at_first_item, None
            at_first_item()
        if isinstance(item, self._task_result_type):
            if self.is_root:
                self.result = item
            if item.stop_reason is None and self._single_agent and item.messages:
                self._responded(item.messages[-1])
            else:
                self.stop_reason = item.stop_reason
                self.stop_kind = stop_kind_of(item.stop_reason)
            self._finished = True  # how it ended is known: a consumer leaving now changes nothing
            return
        if isinstance(item, self._response_type):  # the end of an agent's `on_messages_stream`
            if self.is_root:
                self.result = item
            self.on_item(item.chat_message, timed=timed)
            self._responded(item.chat_message)
            self._finished = True
            return
        if isinstance(item, self._chunk_type):
            return
        index = self.message_count
        self.message_count += 1
        usage = getattr(item, "models_usage", None)
        if usage is not None:
            self.input_tokens += usage.prompt_tokens
            self.output_tokens += usage.completion_tokens
        if self.is_root:
            source = str(getattr(item, "source", "unknown"))
            attributes: dict[str, Any] = {
                sc.GEN_AI_AGENT_NAME: source,
                sc.MESSAGE_INDEX: index,
                sc.MESSAGE_TYPE: type(item).__name__,
                sc.OPENINFERENCE_SPAN_KIND: sc.KIND_CHAIN,
            }
            if timed:
                attributes[sc.MESSAGE_LATENCY_MS] = (now - self._last_ns) / 1e6
            if usage is not None:  # not gen_ai.usage.*: the chat spans hold those, counted once
                attributes[sc.MESSAGE_INPUT_TOKENS] = usage.prompt_tokens
                attributes[sc.MESSAGE_OUTPUT_TOKENS] = usage.completion_tokens
            text = _text_of(item)  # read once: its fingerprint, and its content when captured
            if text is not None:
                fingerprint = text_fingerprint(text)
                attributes[sc.MESSAGE_FINGERPRINT] = fingerprint
                if isinstance(item, self._chat_message_type) and type(item).__name__ != ag.TOOL_CALL_SUMMARY_CLASS:
                    self.run.add_said(source, fingerprint)  # a tool call's summary repeats as its tool call
            # under the turn that yielded it (items no turn yielded: under the run), never
            # starting before it
            producer = self.run.producer_of(item)
            parent, start = self.context, self._last_ns if timed else now
            if producer is not None:
                parent = trace.set_span_in_context(trace.NonRecordingSpan(producer[0]), self.context)
                start = max(start, producer[1])
            message_span = self._spans.start_span(
                f"message {source}", context=parent, attributes=attributes, start_time=min(start, now)
            )
            content = self.run.content
            if content.enabled:
                if text is not None:
                    content.record(message_span, {sc.MESSAGE_CONTENT: content.text(text)}, "otel_agents.message")
                    if content.on_span:  # the run's input (the task) and output (the last word)
                        if index == 0:
                            self.span.set_attribute(sc.INPUT_VALUE, content.text(text))
                        self._output = text
            message_span.end(end_time=now)
            self._detect_loops(item)
        self._last_ns = now

    def _responded(self, message: object) -> None:
        """A single agent's run ended by its response: `completed` naming the response's type, or
        `handoff`."""
        kind = type(message).__name__
        self.stop_reason = f"{COMPLETED}: {kind}"
        self.stop_kind = "handoff" if isinstance(message, self._handoff_type) else "completed"

    def _detect_loops(self, item: object) -> None:
        """Run the loop rules on the item; a broken rule is an event on the run span and a count."""
        run = self.run
        if run.loops is None:
            return
        tokens, cost = run.totals.for_budgets()
        hits = run.loops.observe(item, run_tokens=tokens, run_cost=cost, unknown_calls=run.totals.unknown_calls)
        for hit in hits:
            self.span.add_event(
                sc.LOOP_DETECTED_EVENT,
                {
                    sc.LOOP_RULE: hit.rule,
                    sc.LOOP_COUNT: hit.figures["count"],
                    sc.LOOP_LIMIT: hit.figures["limit"],
                    sc.LOOP_DETAIL: hit.detail,
                },
            )
            if run.instruments is not None:
                run.instruments.loop_detections.add(1, {sc.GEN_AI_WORKFLOW_NAME: run.workflow, sc.LOOP_RULE: hit.rule})

    @property
    def ended(self) -> bool:
        return self._ended

    def add_outcome(self, outcome: Outcome) -> bool:
        """An outcome recorded while the run is open: an event on its span, counted (once a name).
        False when the run has ended (or has one of that name): nothing added."""
        attributes = outcome.attributes(self.run.content)
        with self._ending:  # another thread's end waits for the event to be added
            if self._ended or outcome.name in self.outcomes:
                return False
            self.outcomes[outcome.name] = outcome
            self.span.add_event(sc.GEN_AI_EVALUATION_RESULT_EVENT, attributes)
            if self._ended:  # ended in there (the collector, re-entering): the event came too late
                del self.outcomes[outcome.name]
                return False
        if self.run.instruments is not None:
            self.run.instruments.outcome(workflow=self.run.workflow, outcome=outcome, context=self.context)
        return True

    def stopped(self, reason: str) -> None:
        """The run ended early: `cancelled`, `consumer_closed` or `shutdown` (unless its result
        came); the first reason given stands (a run its consumer left, shut down before AutoGen's
        stream closed, stays `consumer_closed`)."""
        if not self._ended and not self._finished and self.stop_reason not in EARLY_STOPS:
            self.stop_reason = reason
            self.stop_kind = EARLY_STOPS[reason]

    def failed(self, exc: BaseException) -> None:
        if not self._ended:
            self._error = exc
            self.stop_reason = error_reason(exc)
            self.stop_kind = "error"

    def forked_away(self) -> None:
        """(In a forked child.) The run is the parent's: ending it here does nothing."""
        self._ending = threading.RLock()  # another thread of the parent may have held it at the fork
        self._ended = True

    def end(self) -> None:
        """End the span (once: a run ended at shutdown is not ended again when its stream closes)."""
        ending = False
        try:
            with self._ending:
                if self._ended:
                    return
                self._ended = ending = True
            _open.pop(id(self), None)
            self._end()
        except BaseException:
            # Failed, or interrupted (a SystemExit a signal handler raised) before its span ended:
            # the span ends all the same, with how the run stopped, so that the run is stored and
            # exported, if with fewer figures.
            if ending and self.span.is_recording():
                self.span.set_attributes(self._stop_attributes())
                uninterrupted(self.span.end)
            raise
        finally:  # whatever happened above, the registry lets go of the run (or nested team)
            if ending:  # (not when it had ended before)
                if self.is_root:
                    REGISTRY.end(self.trail)
                else:
                    REGISTRY.close_workflow(self.trail, self.span.get_span_context())
                if self.at_end is not None:
                    at_end, self.at_end = self.at_end, None
                    at_end()
                self.before_end = None  # no cycle through the run's hooks; its result is let go
                self.result = None

    def _stop_attributes(self) -> dict[str, Any]:
        """How the run stopped: its stop kind, and its stop reason when known."""
        attributes: dict[str, Any] = {sc.STOP_KIND: self.stop_kind or "other"}
        if self.stop_reason is not None:
            attributes[sc.STOP_REASON] = self.stop_reason
        return attributes

    def _end(self) -> None:
        span = self.span
        totals = self.run.totals
        from_calls = self.is_root and totals.calls > 0  # every model call of the run, counted once
        attributes: dict[str, Any] = {
            **self._stop_attributes(),
            sc.MESSAGE_COUNT: self.message_count,
            sc.GEN_AI_USAGE_INPUT_TOKENS: totals.input_tokens if from_calls else self.input_tokens,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS: totals.output_tokens if from_calls else self.output_tokens,
        }
        if from_calls and totals.cost_usd is not None:
            attributes[sc.COST_USD] = to_nano(totals.cost_usd)  # its calls' nano-dollars, summed exactly
        if self.is_root and totals.unknown_calls:
            attributes[sc.USAGE_UNKNOWN_CALLS] = totals.unknown_calls
        if self.is_root:
            run = self.run
            attributes[sc.RUN_TURNS] = run.turns
            attributes[sc.REPEATS] = run.repeats
            # a snapshot in one step: a run the collector ends in another thread ends here while
            # its loop's thread may still add a call's tokens to the dict
            first_inputs = tuple(run.first_inputs.values())
            growth = growth_per_turn([tokens for tokens in first_inputs if tokens is not None])
            if growth is not None:
                attributes[sc.CONTEXT_GROWTH] = growth
            run.forget_figures()  # what they were counted from goes with the run's end
        if self._output is not None:
            attributes[sc.OUTPUT_VALUE] = self.run.content.text(self._output)
        kept = self._keep_decision(attributes) if self.is_root else None
        span.set_attributes(attributes)
        if self._error is not None:
            mark_error(span, self._error)

        def hand_over() -> None:
            span.end()
            if self.is_root:
                # the run is over: its spans leave soon, not at the batch schedule (a service
                # stopped before then would lose them); the flush runs on our thread, the caller
                # never waits
                FLUSH_SOON.request(self.run.provider)

        # No signal handler's exception half-way: not between the span's end and its export (the
        # run lost), nor inside the flush thread's `Event.set()` (its lock left held: the exit
        # that stops the thread waits on it for ever).
        uninterrupted(hand_over)
        if self.is_root:
            self.run.ended = True  # model calls ending from now on are not the run's
            if self.run.instruments is not None:
                self.run.instruments.run_ended(
                    workflow=self.run.workflow,
                    stop_kind=attributes[sc.STOP_KIND],
                    duration_s=(time.time_ns() - self._start_ns) / 1e9,
                    messages=self.message_count,
                    cost_usd=attributes.get(sc.COST_USD),
                    # a left-out run's metrics get no span: no exemplar points at a trace never sent
                    context=otel_context.Context() if kept is False else kept_context(self.context),
                    run_attributes=self.run.attributes,
                )

    def _keep_decision(self, attributes: dict[str, Any]) -> bool | None:
        """Whether the exporters get this run (`OTEL_AGENTS_SAMPLE_RUNS`), its reason and the ratio
        added to `attributes`; None when runs are not sampled (every run goes, nothing is said)."""
        recording = self.run.recording
        sampling = recording.settings.sampling if recording is not None else None
        if sampling is None or not sampling.on:
            return None
        if recording is not None and not recording.samples_runs:  # not our exporters: every span goes
            not_applied(sampling.ratio)
            return None
        run, given = self.run, getattr(self.span, "attributes", None) or {}
        cost = attributes.get(sc.COST_USD)
        summary = RunSummary(
            team=run.workflow,
            stop_kind=attributes[sc.STOP_KIND],
            stop_reason=self.stop_reason,
            input_tokens=attributes[sc.GEN_AI_USAGE_INPUT_TOKENS],
            output_tokens=attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS],
            cost_usd=cost if isinstance(cost, float) else None,
            unknown_calls=run.totals.unknown_calls,
            duration_s=(time.time_ns() - self._start_ns) / 1e9,
            turns=attributes.get(sc.RUN_TURNS, 0),
            repeats=attributes.get(sc.REPEATS, 0),
            loop_detected=self.stop_kind == "loop_guard" or bool(run.loops is not None and run.loops.broken),
            user_id=_text(given.get(sc.USER_ID)),
            session_id=_text(given.get(sc.SESSION_ID)),
            conversation_id=run.conversation_id,
            attributes=run.attributes,
            outcomes={name: outcome.label for name, outcome in self.outcomes.items()},
        )
        already = given.get(sc.SAMPLE_KEPT_BECAUSE)
        because = decide(sampling, summary, self.span.get_span_context().trace_id, already=_text(already))
        if because is None:
            return False
        attributes[sc.SAMPLE_KEPT_BECAUSE] = because
        attributes[sc.SAMPLE_RATIO] = sampling.ratio
        return True

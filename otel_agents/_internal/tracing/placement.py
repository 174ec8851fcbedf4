"""Parenting: every span a run causes lands in that run's trace, under the span that caused it.

AutoGen 0.7.5 starts its runtime spans under whatever context is current in the runtime's processing
loop and only *links* them to the sender's span; AgentChat's `invoke_agent` spans then nest under
those. A `RunAwareTracerProvider` hands out tracers that, while a run is active, choose the parent
themselves:

- the registry maps the span id of every span a run has started to a `Node`: the run, the span's
  *anchor* (the agent turn or workflow it belongs to) and its workflow (the run span, or the span
  of a nested team);
- an AutoGen runtime span (`autogen create|send|publish|process|ack`) is caused by the span it
  links to (else its parent); it goes under the anchor of its cause, never under another runtime
  span, so depth does not grow with the number of messages. With runtime spans `off` it is not
  recorded: its workflow's span context stands in for it (made current for its block, copied by
  AutoGen into the next message's envelope), which keeps the chain of causes intact;
- an agent turn (`invoke_agent`) goes directly under the workflow of its cause;
- any other span goes under its parent, or under the workflow when the parent is a runtime span
  (a model call made by no agent, such as a selector choosing the next speaker);
- `create_agent` spans outside any run, and runtime spans outside any run when they are `off`,
  are dropped.

Any failure in here falls back to the delegate tracer unchanged: tracing never breaks a run.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util import types
from opentelemetry.util._decorator import _agnosticcontextmanager

from otel_agents._internal import keys as sc
from otel_agents._internal.config.settings import RuntimeSpans
from otel_agents._internal.genai.content import ContentPolicy
from otel_agents._internal.genai.loops import LoopRules
from otel_agents._internal.genai.metrics import Instruments
from otel_agents._internal.genai.prices import PriceTable
from otel_agents._internal.run.totals import RunTotals

if TYPE_CHECKING:
    from otel_agents._internal.tracing.recorded_spans import SpanStarter

logger = logging.getLogger(__name__)

_FOLLOWED_KEPT: Final = 256
"""Traces started in other processes whose spans here are still registered (least recent dropped)."""
_ENDED_SPANS_KEPT: Final = 200_000
"""Span ids of ended runs remembered (about 8 MB at most), so that late spans they cause are
dropped, not orphaned into a trace whose run span has ended."""

_UUID: Final = re.compile(r"_?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DESTINATION_KEY: Final = re.compile(r"\.\([^)]*\)-[AT]$")
_RUNTIME_CONTENT_ATTRIBUTES: Final = frozenset({"message"})
_RUNTIME_TRACER_PREFIX: Final = "autogen "
"""autogen_core's TraceHelper names its tracer f"autogen {runtime name}"."""


class Role(enum.Enum):
    RUNTIME = "runtime"
    TURN = "turn"
    CREATE_AGENT = "create_agent"
    OTHER = "other"


@dataclass(eq=False)
class Run:
    """One active run: its spans' provider, its runtime-span mode, prices, totals, what it registered."""

    provider: trace.TracerProvider
    runtime_spans: RuntimeSpans
    prices: PriceTable | None = None
    content: ContentPolicy = field(default_factory=ContentPolicy)
    instruments: Instruments | None = None
    workflow: str = "unknown"
    loops: LoopRules | None = None
    totals: RunTotals = field(default_factory=RunTotals)
    ended: bool = False
    span_ids: list[int] = field(default_factory=list)
    under_anchor: dict[int, tuple[Context, Node]] = field(default_factory=dict)
    """Per anchor span id: the parent context and the registry node of runtime spans placed under it."""


@dataclass(frozen=True, slots=True)
class Node:
    run: Run
    anchor: SpanContext
    workflow: SpanContext
    is_runtime: bool
    agent: str | None = None
    """The agent whose turn this span is in, if any."""


class Registry:
    """Span id -> Node for the spans of active (and recently ended) runs."""

    def __init__(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._ended_order: deque[frozenset[int]] = deque()
        self._ended: set[int] = set()
        self._followed: dict[int, Run] = {}
        self._lock = threading.RLock()

    def add(self, span_context: SpanContext, node: Node) -> None:
        if span_context.is_valid:
            self._nodes[span_context.span_id] = node
            node.run.span_ids.append(span_context.span_id)

    def add_workflow(self, run: Run, span_context: SpanContext) -> Node:
        """Register a workflow span (a run, or a nested team): its own anchor and workflow."""
        node = Node(run, span_context, span_context, is_runtime=False)
        self.add(span_context, node)
        return node

    def lookup(self, span_context: SpanContext | None) -> Node | None:
        # Only valid span contexts are added, so an invalid one (span id 0) finds nothing.
        return self._nodes.get(span_context.span_id) if span_context is not None else None

    def lookup_links(self, links: Sequence[Link] | None) -> Node | None:
        if links:
            nodes = self._nodes
            for link in links:
                node = nodes.get(link.context.span_id)
                if node is not None:
                    return node
        return None

    def stand_in(self, cause: Node) -> SpanContext:
        """What stands for a dropped runtime span (runtime spans `off`) caused at `cause`: its workflow.

        Made current for the runtime span's block and copied by AutoGen into the envelopes of the
        messages sent in it, the workflow's own span context keeps the chain of causes intact; the
        turns and model calls it causes go under that workflow, as they should; and a span started
        under it by a tracer that is not ours gets a parent that exists. It is registered already.
        """
        return cause.workflow

    def followed_run(self, trace_id: int, provider: trace.TracerProvider, runtime_spans: RuntimeSpans) -> Run:
        """The run that stands for a trace started elsewhere (another process), while it is active.

        Bounded: the least recently started of more than `_FOLLOWED_KEPT` such traces is forgotten.
        """
        with self._lock:
            run = self._followed.pop(trace_id, None)
            if run is None:
                run = Run(provider=provider, runtime_spans=runtime_spans, workflow="remote")
            self._followed[trace_id] = run  # most recent last
            while len(self._followed) > _FOLLOWED_KEPT:
                oldest = self._followed.pop(next(iter(self._followed)))
                for span_id in oldest.span_ids:
                    self._nodes.pop(span_id, None)
            return run

    def end(self, run: Run) -> None:
        """Forget the run's spans, remembering only their ids: late spans they cause are dropped."""
        run.ended = True
        with self._lock:
            ids = frozenset(run.span_ids)
            for span_id in ids:
                self._nodes.pop(span_id, None)
            run.span_ids.clear()
            run.under_anchor.clear()
            self._ended.update(ids)
            self._ended_order.append(ids)
            while len(self._ended) > _ENDED_SPANS_KEPT and len(self._ended_order) > 1:
                self._ended.difference_update(self._ended_order.popleft())

    def of_ended_run(self, span_context: SpanContext | None, links: Sequence[Link] | None) -> SpanContext | None:
        """The parent or linked span that belongs to a run that has ended, if any."""
        if span_context is not None and span_context.is_valid and span_context.span_id in self._ended:
            return span_context
        for link in links or ():
            if link.context.span_id in self._ended:
                return link.context
        return None

    def __len__(self) -> int:
        return len(self._nodes)


REGISTRY: Final = Registry()


_stable_names: dict[str, str] = {}


def stable_runtime_span_name(name: str) -> str:
    """`autogen process writer_<team uuid>.(<uuid>)-A` -> `autogen process writer` (memoized)."""
    stable = _stable_names.get(name)
    if stable is None:
        stable = _stable_name(name)
        if len(_stable_names) < 10_000:  # one entry per agent and team: bounded all the same
            _stable_names[name] = stable
    return stable


def _stable_name(name: str) -> str:
    parts = name.split(" ", 2)
    if len(parts) < 3:
        return name
    destination = _DESTINATION_KEY.sub("", _UUID.sub("", parts[2]))
    return f"{parts[0]} {parts[1]} {destination}" if destination else f"{parts[0]} {parts[1]}"


def _remote_sender(parent: SpanContext, links: Sequence[Link] | None) -> SpanContext | None:
    """The sender a runtime span is linked to, when nothing local is its parent."""
    if parent.is_valid:
        return None
    for link in links or ():
        if link.context.is_valid:
            return link.context
    return None


def _role(tracer_name: str, attributes: types.Attributes) -> Role:
    if tracer_name.startswith(_RUNTIME_TRACER_PREFIX):
        return Role.RUNTIME
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME) if attributes else None
    if operation == sc.OPERATION_INVOKE_AGENT:
        return Role.TURN
    if operation == sc.OPERATION_CREATE_AGENT:
        return Role.CREATE_AGENT
    return Role.OTHER


def _without_content(attributes: types.Attributes) -> types.Attributes:
    if not attributes or not any(key in attributes for key in _RUNTIME_CONTENT_ATTRIBUTES):
        return attributes
    return {k: v for k, v in attributes.items() if k not in _RUNTIME_CONTENT_ATTRIBUTES}


class RunAwareTracer(trace.Tracer):
    """A tracer that parents spans of active runs as the module docstring describes."""

    def __init__(
        self,
        provider: RunAwareTracerProvider,
        name: str,
        version: str | None,
        schema_url: str | None,
        attributes: types.Attributes,
    ) -> None:
        self._provider = provider
        self._name = name
        self._version = version
        self._schema_url = schema_url
        self._attributes = attributes
        self._cache: tuple[trace.TracerProvider, trace.Tracer] | None = None
        self._starter: tuple[trace.TracerProvider, SpanStarter] | None = None

    def _tracer_of(self, provider: trace.TracerProvider) -> trace.Tracer:
        """The tracer of this name in the delegate provider (spans outside runs)."""
        cached = self._cache
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = self._get_tracer(provider)
        self._cache = (provider, tracer)
        return tracer

    def _get_tracer(self, provider: trace.TracerProvider) -> trace.Tracer:
        return provider.get_tracer(self._name, self._version, self._schema_url, self._attributes)

    def _starter_of(self, provider: trace.TracerProvider) -> SpanStarter:
        """What starts the spans of a run recorded by `provider` (made again if the provider changes)."""
        cached = self._starter
        if cached is not None and cached[0] is provider:
            return cached[1]
        from otel_agents._internal.tracing.recorded_spans import (
            SpanStarter,  # the SDK's, imported once a run records a span
        )

        starter = SpanStarter(self._get_tracer(provider))
        self._starter = (provider, starter)
        return starter

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        try:
            return self._start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )
        except Exception:  # never break the run being observed
            logger.debug("otel-agents could not place span %r; starting it unchanged", name, exc_info=True)
            return self._tracer_of(self._provider.delegate()).start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )

    def _start_span(
        self,
        name: str,
        context: Context | None,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link] | None,
        start_time: int | None,
        record_exception: bool,
        set_status_on_exception: bool,
    ) -> Span:
        role = _role(self._name, attributes)
        parent = trace.get_current_span(context).get_span_context()
        parent_node = REGISTRY.lookup(parent)
        if role is Role.RUNTIME:
            cause = REGISTRY.lookup_links(links) or parent_node
        else:
            cause = parent_node or REGISTRY.lookup_links(links)

        if cause is not None and not self._provider.accepts(cause.run):
            cause = None
        if cause is None:  # not part of an active run
            ended = REGISTRY.of_ended_run(parent, links)
            if ended is not None:  # caused by a run that has ended: dropped, and so is what it causes
                return NonRecordingSpan(ended)
            if role is Role.CREATE_AGENT or (role is Role.RUNTIME and self._provider.runtime_spans() == "off"):
                return NonRecordingSpan(parent if parent.is_valid else trace.INVALID_SPAN_CONTEXT)
            if role is Role.RUNTIME:
                name, attributes = stable_runtime_span_name(name), _without_content(attributes)
                sender = _remote_sender(parent, links)
                if sender is None and not parent.is_valid and name.startswith("autogen ack"):
                    # an acknowledgement whose request left no trace context: a one-span trace of noise
                    return NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
                if sender is not None:
                    # A message from another process (gRPC metadata) or another task, outside any
                    # tapped run: the span goes under its sender, in the sender's trace, and the
                    # spans it causes here follow it.
                    return self._adopt(sender, name, kind, attributes, links, start_time)
            return self._tracer_of(self._provider.delegate()).start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )

        if role is Role.RUNTIME:
            return self._runtime_span_in_run(
                cause, name, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )

        run = cause.run
        if role is Role.TURN:
            place_under = cause.workflow
        elif cause.is_runtime:
            place_under = cause.workflow
        elif cause is parent_node:
            place_under = parent
        else:
            place_under = cause.anchor

        span = self._starter_of(run.provider).start_span(
            name,
            trace.set_span_in_context(NonRecordingSpan(place_under)),
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        own = span.get_span_context()
        if role is Role.TURN:
            agent = attributes.get(sc.GEN_AI_AGENT_NAME) if attributes else None
            REGISTRY.add(own, Node(run, own, cause.workflow, False, agent if isinstance(agent, str) else None))
        # Other spans (model calls, tools, your own) are not registered: spans under them keep their
        # parent as it is, which is already inside the run. That keeps a long run's registry small.
        return span

    def _runtime_span_in_run(
        self,
        cause: Node,
        name: str,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link] | None,
        start_time: int | None,
        record_exception: bool,
        set_status_on_exception: bool,
    ) -> Span:
        """A runtime span caused in a run: its stand-in (`off`), or recorded under its cause's anchor."""
        run = cause.run
        if run.runtime_spans == "off":
            return NonRecordingSpan(REGISTRY.stand_in(cause))
        placed = run.under_anchor.get(cause.anchor.span_id)
        if placed is None:  # one per anchor (a turn or a workflow), shared by its runtime spans
            placed = run.under_anchor[cause.anchor.span_id] = (
                trace.set_span_in_context(NonRecordingSpan(cause.anchor)),
                Node(run, cause.anchor, cause.workflow, is_runtime=True),
            )
        parent, node = placed
        span = self._starter_of(run.provider).start_span(
            stable_runtime_span_name(name),
            parent,
            kind,
            _without_content(attributes),
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        REGISTRY.add(span.get_span_context(), node)
        return span

    def _adopt(
        self,
        sender: SpanContext,
        name: str,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link] | None,
        start_time: int | None,
    ) -> Span:
        provider = self._provider.delegate()
        tracer = self._tracer_of(provider)
        span = tracer.start_span(
            name, trace.set_span_in_context(NonRecordingSpan(sender)), kind, attributes, links, start_time
        )
        own = span.get_span_context()
        run = REGISTRY.followed_run(sender.trace_id, provider, self._provider.runtime_spans())
        REGISTRY.add(own, Node(run, own, own, is_runtime=False))
        return span

    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[Span]:
        span = self.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        if not span.is_recording():  # a stand-in or a dropped span: only its context matters
            token = otel_context.attach(trace.set_span_in_context(span))
            try:
                yield span
            finally:
                otel_context.detach(token)
            return
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class RuntimeTracer(RunAwareTracer):
    """The tracer of AutoGen's runtime spans (`autogen create|send|publish|process|ack ...`).

    AutoGen starts about ten of them per message, each through `start_as_current_span` in a `with`
    block. Inside a run the path is kept short: the cause is looked up once, and the block gets a
    plain context manager, not a generator-based one. With runtime spans `off` (the usual case)
    the workflow's context is made current for the block, or left current when it already is.
    Spans outside any run take the general path.
    """

    def _in_run(
        self,
        parent: SpanContext,
        name: str,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link] | None,
        start_time: int | None,
        record_exception: bool,
        set_status_on_exception: bool,
    ) -> Span | None:
        """The span (or stand-in) of a runtime span caused in a run, else None (the general path decides).

        The cause is what the general path takes for a runtime span: the linked span, else the parent.
        """
        try:
            cause = REGISTRY.lookup_links(links) or REGISTRY.lookup(parent)
            if cause is None or not self._provider.accepts(cause.run):
                return None
            return self._runtime_span_in_run(
                cause, name, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )
        except Exception:  # the general path decides, and falls back safely
            return None

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Span:
        parent = trace.get_current_span(context).get_span_context()
        span = self._in_run(
            parent, name, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        if span is not None:
            return span
        return super().start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )

    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> AbstractContextManager[Span]:
        parent = trace.get_current_span(context).get_span_context()
        span = self._in_run(
            parent, name, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )
        if span is None:
            span = RunAwareTracer.start_span(  # the general path: not caused in a run
                self, name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )
        elif context is None and not span.is_recording() and span.get_span_context() is parent:
            return nullcontext(span)  # a stand-in already current: a message sent while processing one
        return _InUse(span, end_on_exit, record_exception, set_status_on_exception)


class _InUse:
    """`trace.use_span` as a plain context manager: AutoGen's runtime spans only go in `with` blocks."""

    __slots__ = ("_end_on_exit", "_record_exception", "_set_status_on_exception", "_span", "_token")

    def __init__(
        self,
        span: Span,
        end_on_exit: bool = False,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> None:
        self._span = span
        self._end_on_exit = end_on_exit
        self._record_exception = record_exception
        self._set_status_on_exception = set_status_on_exception
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        span = self._span
        try:
            otel_context.detach(self._token)  # type: ignore[arg-type]
            # as use_span does: Exception only (GeneratorExit and the like are not errors)
            if isinstance(exc, Exception) and span.is_recording():
                if self._record_exception:
                    span.record_exception(exc)
                if self._set_status_on_exception:
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        finally:
            if self._end_on_exit:
                span.end()


def _tracer_class(name: str) -> type[RunAwareTracer]:
    return RuntimeTracer if name.startswith(_RUNTIME_TRACER_PREFIX) else RunAwareTracer


class RunAwareTracerProvider(trace.TracerProvider):
    """Hands out `RunAwareTracer`s over a delegate provider (looked up at every span start)."""

    def __init__(
        self,
        delegate: Callable[[], trace.TracerProvider],
        runtime_spans: Callable[[], RuntimeSpans],
    ) -> None:
        self.delegate = delegate
        self.runtime_spans = runtime_spans
        self._tracers: dict[tuple[str, str | None, str | None], RunAwareTracer] = {}

    def accepts(self, run: Run) -> bool:
        """Whether spans of `run` started through this provider are placed in the run."""
        return True

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: types.Attributes = None,
    ) -> trace.Tracer:
        if attributes:  # rare: not worth a cache key
            return _tracer_class(instrumenting_module_name)(
                self, instrumenting_module_name, instrumenting_library_version, schema_url, attributes
            )
        key = (instrumenting_module_name, instrumenting_library_version, schema_url)
        tracer = self._tracers.get(key)
        if tracer is None:  # AutoGen asks for a tracer on every span: one per name, reused
            tracer = self._tracers[key] = _tracer_class(instrumenting_module_name)(self, *key, None)
        return tracer

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self.delegate(), "force_flush", None)
        return bool(flush(timeout_millis)) if flush is not None else True

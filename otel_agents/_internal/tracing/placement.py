"""Placement: every span a run causes lands in that run's trace, under the span that caused it.

AutoGen 0.7.x starts its runtime spans under whatever context is current in the runtime's processing
loop and only *links* them to the sender's span; AgentChat's `invoke_agent` spans then nest under
those. A `RunAwareTracerProvider` hands out tracers that, while a run is active, choose the parent
and then start the span through the SDK tracer's own `start_span`:

- the registry (`tracing.registry`) knows, for the spans a run has started, the run, the span's
  *anchor* (the agent turn or workflow it belongs to) and its workflow (the run span, or the span
  of a nested team);
- an AutoGen runtime span (`autogen create|send|publish|process|ack`) is caused by the span it
  links to (else its parent); it goes under the anchor of its cause, never under another runtime
  span, so depth does not grow with the number of messages. With runtime spans `off` it is not
  recorded: its workflow's span context stands in for it (made current for its block, copied by
  AutoGen into the next message's envelope), which keeps the chain of causes intact. With `nested`,
  `create`, `ack` and `publish` spans are not recorded either (they say nothing a reader needs),
  except outside any run with no span open and no sender: then a `create` or `publish` span is the
  root of the trace the message's processing joins (on the single-threaded runtime, a published
  message's root starts at its delivery, and a publish no one receives makes no span:
  `tracing.publish_roots`);
- an agent turn (`invoke_agent`) goes directly under the workflow of its cause;
- any other span goes under its parent, or under the workflow when the parent is a runtime span
  (a model call made by no agent, such as a selector choosing the next speaker);
- `create_agent` spans outside any run, and runtime spans outside any run when they are `off`,
  are dropped.

Any failure in here falls back to the delegate tracer unchanged: tracing never breaks a run.
"""

from __future__ import annotations

import enum
import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import MappingProxyType
from typing import Any, Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util import types

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.config.settings import RuntimeSpans
from otel_agents._internal.tracing import publish_roots
from otel_agents._internal.tracing.registry import REGISTRY, Node, Trail
from otel_agents._internal.tracing.state import Run

logger = logging.getLogger(__name__)
_F = TypeVar("_F", bound=Callable[..., Any])

_STABLE_NAMES_KEPT: Final = 1024
TRACERS_KEPT: Final = 256
"""Tracers a provider keeps (one per instrumentation name and version); forgotten at once when full."""
_UNRECORDED_WHEN_NESTED: Final = tuple(
    f"{ag.RUNTIME_TRACER_PREFIX}{op}" for op in ag.RUNTIME_OPERATIONS_DROPPED_WHEN_NESTED
)
_ACK: Final = f"{ag.RUNTIME_TRACER_PREFIX}{ag.RUNTIME_OPERATION_ACK}"
_CREATE: Final = f"{ag.RUNTIME_TRACER_PREFIX}{ag.RUNTIME_OPERATION_CREATE} "
_PUBLISH: Final = f"{ag.RUNTIME_TRACER_PREFIX}{ag.RUNTIME_OPERATION_PUBLISH} "


class Role(enum.Enum):
    RUNTIME = "runtime"
    TURN = "turn"
    CREATE_AGENT = "create_agent"
    OTHER = "other"


_stable_names: dict[str, str] = {}
process_state.hold(
    __name__,
    "_stable_names",
    bound=f"{_STABLE_NAMES_KEPT} names, then cleared",
    size=lambda: len(_stable_names),
    forget=_stable_names.clear,
)


def stable_runtime_span_name(name: str) -> str:
    """`autogen process writer_<team uuid>.(<uuid>)-A` -> `autogen process writer` (memoized)."""
    stable = _stable_names.get(name)
    if stable is None:
        stable = _stable_name(name)
        if len(_stable_names) >= _STABLE_NAMES_KEPT:  # names carry per-team ids: start afresh when full
            _stable_names.clear()
        _stable_names[name] = stable
    return stable


def _stable_name(name: str) -> str:
    match = ag.RUNTIME_SPAN_NAME.match(name)
    if match is None or match.group(2) is None:
        return name
    operation = name[: match.end(1)]  # `autogen process`
    destination = ag.RUNTIME_SPAN_DESTINATION_KEY.sub("", ag.RUNTIME_SPAN_UUID.sub("", match.group(2)))
    return f"{operation} {destination}" if destination else operation


def _remote_sender(parent: SpanContext, links: Sequence[Link] | None) -> SpanContext | None:
    """The sender a runtime span is linked to, when nothing local is its parent."""
    if parent.is_valid:
        return None
    for link in links or ():
        if link.context.is_valid:
            return link.context
    return None


def _role(tracer_name: str, attributes: types.Attributes) -> Role:
    if tracer_name.startswith(ag.RUNTIME_TRACER_PREFIX):
        return Role.RUNTIME
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME) if attributes else None
    if operation == ag.OPERATION_INVOKE_AGENT:
        return Role.TURN
    if operation == ag.OPERATION_CREATE_AGENT:
        return Role.CREATE_AGENT
    return Role.OTHER


_KIND_OF_OPERATION: Final = MappingProxyType(
    {
        ag.OPERATION_INVOKE_AGENT: sc.KIND_AGENT,
        ag.OPERATION_CREATE_AGENT: sc.KIND_AGENT,
        ag.OPERATION_EXECUTE_TOOL: sc.KIND_TOOL,
    }
)


def with_span_kind(tracer_name: str, attributes: types.Attributes) -> types.Attributes:
    """AutoGen's spans with their OpenInference kind, for backends that read it (Phoenix): a
    runtime span `CHAIN`, a turn and `create_agent` `AGENT`, a tool call `TOOL`; a span that has
    one already, or is none of these, as it came."""
    if attributes and sc.OPENINFERENCE_SPAN_KIND in attributes:
        return attributes
    if tracer_name.startswith(ag.RUNTIME_TRACER_PREFIX):
        kind: str | None = sc.KIND_CHAIN
    else:
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME) if attributes else None
        kind = _KIND_OF_OPERATION.get(operation) if isinstance(operation, str) else None
    if kind is None:
        return attributes
    return {**(attributes or {}), sc.OPENINFERENCE_SPAN_KIND: kind}


def without_content(attributes: types.Attributes) -> types.Attributes:
    """A runtime span's attributes without AutoGen's `message` (the whole message JSON)."""
    if not attributes or not any(key in attributes for key in ag.RUNTIME_CONTENT_ATTRIBUTES):
        return attributes
    return {k: v for k, v in attributes.items() if k not in ag.RUNTIME_CONTENT_ATTRIBUTES}


def _context_of(span_context: SpanContext) -> Context:
    return trace.set_span_in_context(NonRecordingSpan(span_context))


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

    def _tracer_of(self, provider: trace.TracerProvider) -> trace.Tracer:
        """The tracer of this name in `provider` (the SDK's `get_tracer` is not cheap: kept)."""
        cached = self._cache
        if cached is not None and cached[0] is provider:
            return cached[1]
        tracer = provider.get_tracer(self._name, self._version, self._schema_url, self._attributes)
        self._cache = (provider, tracer)
        return tracer

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
            passed_to = self._provider.passed_to()
            if passed_to is not None:
                return self._tracer_of(passed_to).start_span(
                    name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
                )
            attributes = with_span_kind(self._name, attributes)
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
            cause = REGISTRY.lookup_links(links)
            if cause is None and links:
                dropped = REGISTRY.dropped_cause(links)
                if dropped is not None and self._provider.accepts(dropped[1].run):
                    return self._unplaced(*dropped, name, kind, attributes, links, start_time)
            cause = cause or parent_node
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
                sender = _remote_sender(parent, links)
                if name.startswith(_UNRECORDED_WHEN_NESTED):
                    stand_in = parent if parent.is_valid else sender
                    if stand_in is None and self._delivers_here(name):
                        published = self._published(name, kind, attributes, links)
                        if published is not None:
                            return published
                    if stand_in is not None and name.startswith(_PUBLISH):
                        delivered = publish_roots.pending(stand_in)
                        if delivered is not None:
                            return publish_roots.delivery(delivered)
                    if stand_in is not None or name.startswith(_ACK):
                        return NonRecordingSpan(stand_in or trace.INVALID_SPAN_CONTEXT)
                    # a message created or published with no span open: recorded, as the root of
                    # the trace its processing joins (here, or in another process over gRPC)
                name, attributes = stable_runtime_span_name(name), without_content(attributes)
                delivered = publish_roots.pending(parent if parent.is_valid else sender)
                if delivered is not None:  # a message published with no span open, delivered here
                    return self._tracer_of(self._provider.delegate()).start_span(
                        name,
                        _context_of(delivered.root()),
                        kind,
                        attributes,
                        delivered.links_to_root(links),
                        start_time,
                        record_exception,
                        set_status_on_exception,
                    )
                if sender is not None:
                    # A message from another process (gRPC metadata) or another task, outside any
                    # tapped run: the span goes under its sender, in the sender's trace, and the
                    # spans it causes here follow it.
                    return self._under_sender(sender, name, kind, attributes, links, start_time)
            delivered = publish_roots.pending(parent) if parent.is_valid else None
            if delivered is not None:  # started inside a delivery's `publish` block: under its root
                context, links = _context_of(delivered.root()), delivered.links_to_root(links)
            return self._tracer_of(self._provider.delegate()).start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )

        if role is Role.RUNTIME:
            return self._runtime_span_in_run(
                cause, name, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )

        run = cause.run
        if role is Role.TURN and run.conversation_id is not None:
            attributes = {**(attributes or {}), sc.GEN_AI_CONVERSATION_ID: run.conversation_id}
        if role is Role.TURN or cause.is_runtime:
            place_under = cause.workflow
        elif cause is parent_node:
            place_under = parent
        else:
            place_under = cause.anchor

        span = self._tracer_of(run.provider).start_span(
            name,
            _context_of(place_under) if place_under is not parent else context,
            kind,
            attributes,
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        own = span.get_span_context()
        if role is Role.TURN:
            run.add_turn(own.span_id)
            agent = attributes.get(sc.GEN_AI_AGENT_NAME) if attributes else None
            REGISTRY.add(own, Node(cause.trail, own, cause.workflow, False, agent if isinstance(agent, str) else None))
        else:  # a model call, a tool, your own span: what it causes (a model call in a tool) is in the run
            agent = None if cause.is_runtime else cause.agent
            REGISTRY.add(own, Node(cause.trail, cause.anchor, cause.workflow, False, agent))
        return span

    def _delivers_here(self, name: str) -> bool:
        """Whether `name` is a `publish_message`'s `create` span on the runtime that delivers it here."""
        return (
            self._name == ag.SINGLE_THREADED_RUNTIME_TRACER
            and name.startswith(_CREATE)
            and name.endswith(ag.RUNTIME_TOPIC_DESTINATION_SUFFIX)
        )

    def _published(
        self, name: str, kind: SpanKind, attributes: types.Attributes, links: Sequence[Link] | None
    ) -> Span | None:
        """A message published with no span open: its root starts at its delivery (`publish_roots`);
        None when too many wait (the caller records the root now)."""
        stable, attributes = stable_runtime_span_name(name), without_content(attributes)

        def start_root(start_time: int) -> Span:  # the pipeline current at delivery
            return self._tracer_of(self._provider.delegate()).start_span(
                stable, Context(), kind, attributes, links, start_time
            )

        return publish_roots.created(start_root)

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
        """A runtime span caused in a run: its stand-in (`off`, and `create`/`ack`/`publish` when
        `nested`), or started under its cause's anchor."""
        trail = cause.trail
        if trail.run.runtime_spans == "off":
            return trail.stand_in_for(cause.workflow)
        if name.startswith(_UNRECORDED_WHEN_NESTED):
            return trail.stand_in_for(cause.anchor)
        # one parent context and node per anchor (a turn or a workflow), shared by its runtime spans
        parent, node = REGISTRY.placed_under(
            trail, cause.anchor, lambda: (_context_of(cause.anchor), Node(trail, cause.anchor, cause.workflow, True))
        )
        span = self._tracer_of(trail.run.provider).start_span(
            stable_runtime_span_name(name),
            parent,
            kind,
            with_span_kind(self._name, without_content(attributes)),
            links,
            start_time,
            record_exception,
            set_status_on_exception,
        )
        REGISTRY.add(span.get_span_context(), node)
        return span

    def _unplaced(
        self,
        sender: SpanContext,
        trail: Trail,
        name: str,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link] | None,
        start_time: int | None,
    ) -> Span:
        """A runtime span whose cause, a span of an active run, is no longer in the registry (it
        keeps so many entries per trace): under its sender, in the run's pipeline, counted. It is
        not registered, so the spans it causes take this path too, outside the run's totals."""
        run = trail.run
        if run.runtime_spans == "off" or name.startswith(_UNRECORDED_WHEN_NESTED):
            return NonRecordingSpan(sender)
        REGISTRY.count_unplaced()
        return self._tracer_of(run.provider).start_span(
            stable_runtime_span_name(name),
            _context_of(sender),
            kind,
            with_span_kind(self._name, without_content(attributes)),
            links,
            start_time,
        )

    def _under_sender(
        self,
        sender: SpanContext,
        name: str,
        kind: SpanKind,
        attributes: types.Attributes,
        links: Sequence[Link] | None,
        start_time: int | None,
    ) -> Span:
        provider = self._provider.delegate()
        span = self._tracer_of(provider).start_span(name, _context_of(sender), kind, attributes, links, start_time)
        own = span.get_span_context()
        trail = REGISTRY.followed(sender.trace_id, provider, self._provider.runtime_spans())
        REGISTRY.add(own, Node(trail, own, own, is_runtime=False))
        return span

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
    ) -> _InUse:
        """As the API's: a `with` block, or a decorator of sync and async functions (a span a call);
        the span starts when the block is entered."""

        def start() -> Span:
            return self.start_span(
                name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
            )

        return _InUse(None, end_on_exit, record_exception, set_status_on_exception, start=start)


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
            if self._provider.passed_to() is not None:
                return None
            cause = REGISTRY.lookup_links(links)
            if cause is None:
                if links:  # a sender the registry does not know: the general path decides
                    return None
                cause = REGISTRY.lookup(parent)
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
    """`trace.use_span` as a plain context manager (no generator: AutoGen enters some fifty of them a
    run), for a span started already or, with `start`, one started when the block is entered. With
    `start`, like the API's `start_as_current_span`, it also decorates a sync or async function:
    then every call runs in a block of its own, with a span of its own."""

    __slots__ = ("_end_on_exit", "_record_exception", "_set_status_on_exception", "_span", "_start", "_token")

    def __init__(
        self,
        span: Span | None,
        end_on_exit: bool = False,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        *,
        start: Callable[[], Span] | None = None,
    ) -> None:
        self._span = span
        self._start = start
        self._end_on_exit = end_on_exit
        self._record_exception = record_exception
        self._set_status_on_exception = set_status_on_exception
        self._token: object = None

    def __enter__(self) -> Span:
        span = self._span
        if span is None:
            span = self._span = self._start()  # type: ignore[misc]
        self._token = otel_context.attach(trace.set_span_in_context(span))
        return span

    def __call__(self, func: _F) -> _F:
        if self._start is None:  # a span started already (AutoGen's runtime spans): one block only
            raise TypeError("this span's block is entered once: it cannot decorate a function")
        again = functools.partial(
            _InUse,
            None,
            self._end_on_exit,
            self._record_exception,
            self._set_status_on_exception,
            start=self._start,
        )
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def in_use_async(*args: Any, **kwargs: Any) -> Any:
                with again():
                    return await func(*args, **kwargs)

            return in_use_async  # type: ignore[return-value]

        @functools.wraps(func)
        def in_use(*args: Any, **kwargs: Any) -> Any:
            with again():
                return func(*args, **kwargs)

        return in_use  # type: ignore[return-value]

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        span = self._span
        assert span is not None
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
    return RuntimeTracer if name.startswith(ag.RUNTIME_TRACER_PREFIX) else RunAwareTracer


class RunAwareTracerProvider(trace.TracerProvider):
    """Hands out `RunAwareTracer`s over a delegate provider (looked up at every span start)."""

    def __init__(
        self,
        delegate: Callable[[], trace.TracerProvider],
        runtime_spans: Callable[[], RuntimeSpans],
        passed_to: Callable[[], trace.TracerProvider | None] = lambda: None,
    ) -> None:
        self.delegate = delegate
        self.runtime_spans = runtime_spans
        self.passed_to = passed_to
        """None while its tracers place spans; else the provider whose tracers start every span
        unchanged (for AutoGen's tracers after `uninstrument()`: what built before keeps them)."""
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
        tracers = self._tracers
        tracer = tracers.get(key)
        if tracer is None:  # AutoGen asks for a tracer on every span: one per name, reused
            if len(tracers) >= TRACERS_KEPT:  # names a library makes up as it goes: start afresh
                tracers.clear()
            tracer = tracers[key] = _tracer_class(instrumenting_module_name)(self, *key, None)
        return tracer

    def tracers_kept(self) -> int:
        return len(self._tracers)

    def forget_tracers(self) -> None:
        """Forget the tracers handed out (those in use go on working): `process_state.reset`."""
        self._tracers = {}

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self.delegate(), "force_flush", None)
        return bool(flush(timeout_millis)) if flush is not None else True

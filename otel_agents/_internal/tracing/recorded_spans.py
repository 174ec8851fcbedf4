"""The spans of a run, recorded straight into the SDK tracer's pipeline, without its per-span bookkeeping.

A run records a span per message and model call, and with runtime spans `nested` about ten of
AutoGen's runtime spans a message. Through the SDK's `Tracer.start_span` each costs about 50 to 70
µs on the benchmark machine, most of it in work these spans do not need: every attribute value
checked and copied into a locked bounded mapping, every link rebuilt. `SpanRecorder` starts a span
that has a valid parent straight into the tracer's pipeline: the tracer's sampler decides, its id
generator makes the id, its span limits bound what the span holds, its span processors see
`on_start`, and at the end get the same `ReadableSpan` an SDK span would give them. Plain values
(strings the length limit lets through whole, numbers, booleans, tuples of such strings) are kept
as they are; anything else goes through the SDK's own bounded containers, as the SDK would put it.
A tracer the recorder does not know, and a span with no parent, take the SDK's path.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from time import time_ns
from types import MappingProxyType, TracebackType
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.sampling import DEFAULT_ON, Decision
from opentelemetry.sdk.util import BoundedList
from opentelemetry.semconv.attributes.exception_attributes import (
    EXCEPTION_ESCAPED,
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
)
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)
from opentelemetry.util import types

logger = logging.getLogger(__name__)

_SDK_INTERNAL_METRICS = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"
_RECORDING = (Decision.RECORD_ONLY, Decision.RECORD_AND_SAMPLE)
_UNSET: Final = Status(StatusCode.UNSET)


class SpanStarter:
    """Starts spans through one tracer: recorded straight into its pipeline when a `SpanRecorder`
    knows the tracer and the span has a parent, else by the tracer itself."""

    __slots__ = ("_recorder", "tracer")

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer
        self._recorder = SpanRecorder.of(tracer)

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
    ) -> trace.Span:
        """`tracer.start_span(...)`."""
        recorder = self._recorder
        if recorder is not None:
            parent = trace.get_current_span(context).get_span_context()
            if parent.is_valid:
                span = recorder.start(
                    name,
                    parent,
                    context,
                    kind,
                    attributes,
                    links,
                    start_time,
                    record_exception,
                    set_status_on_exception,
                )
                if span is not None:
                    return span
        return self.tracer.start_span(
            name, context, kind, attributes, links, start_time, record_exception, set_status_on_exception
        )


class SpanRecorder:
    """Records spans through one SDK tracer's sampler, ids, limits and span processors."""

    __slots__ = ("_enabled", "_ids", "_on_ending", "_tracer", "limits", "processor", "scope")

    def __init__(self, tracer: SdkTracer, limits: SpanLimits, scope: Any) -> None:
        self._tracer = tracer  # its sampler and resource are read at each use, as the SDK reads them
        self._ids = tracer.id_generator
        self.limits = limits
        self.processor = tracer.span_processor  # the provider's, to which its processors are added
        self._on_ending: Callable[[Any], None] | None = getattr(self.processor, "_on_ending", None)
        self.scope = scope
        enabled: Callable[[], bool] | None = getattr(tracer, "_is_enabled", None)
        self._enabled: Callable[[], bool] = enabled if enabled is not None else lambda: True

    @classmethod
    def of(cls, tracer: trace.Tracer) -> SpanRecorder | None:
        """A recorder for `tracer` if it is the SDK's own tracer as the recorder knows it, else None."""
        if type(tracer) is not SdkTracer:
            return None
        if os.environ.get(_SDK_INTERNAL_METRICS, "").strip().lower() == "true":
            return None  # the SDK's own span metrics are recorded on its path only
        limits = getattr(tracer, "_span_limits", None)
        scope = getattr(tracer, "_instrumentation_scope", None)
        if not isinstance(limits, SpanLimits) or scope is None:
            return None
        try:
            recorder = cls(tracer, limits, scope)
            # what a span hands its processors at the end, made once here: an SDK whose
            # `ReadableSpan` takes other arguments gets its own path, not a failing span end
            ReadableSpan(
                name="probe",
                context=trace.INVALID_SPAN_CONTEXT,
                parent=None,
                resource=recorder.resource,
                attributes={},
                events=[],
                links=(),
                kind=SpanKind.INTERNAL,
                status=_UNSET,
                start_time=0,
                end_time=0,
                instrumentation_scope=scope,
            )
        except (AttributeError, TypeError):
            return None
        return recorder

    def start(
        self,
        name: str,
        parent: SpanContext,
        context: Context | None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span | None:
        """The span, started under `parent` (a valid span context, the one current in `context`).
        None when the tracer is disabled: the SDK's path then gives what it gives."""
        if not self._enabled():
            return None
        links = links or ()
        flags = parent.trace_flags
        trace_state: TraceState | None = parent.trace_state
        sampler = self._tracer.sampler
        if sampler is DEFAULT_ON:  # the SDK's default: the parent's decision, as it is
            recording = bool(flags & TraceFlags.SAMPLED)
        else:
            result = sampler.should_sample(context, parent.trace_id, name, kind, attributes, links)
            recording = result.decision in _RECORDING
            attributes, trace_state = result.attributes, result.trace_state
            sampled = result.decision is Decision.RECORD_AND_SAMPLE
            flags = TraceFlags(flags | TraceFlags.SAMPLED if sampled else flags & ~TraceFlags.SAMPLED)
        span_context = SpanContext(
            parent.trace_id, self._ids.generate_span_id(), is_remote=False, trace_flags=flags, trace_state=trace_state
        )
        if not recording:
            return NonRecordingSpan(span_context)
        span = RecordedSpan(
            self,
            name,
            span_context,
            parent,
            kind,
            self.attributes(attributes),
            links,
            start_time if start_time is not None else time_ns(),
            record_exception,
            set_status_on_exception,
        )
        # processors are typed for the SDK's span; they get one that reads and writes as it does
        self.processor.on_start(span, parent_context=context)  # type: ignore[arg-type]
        return span

    def plain(self, value: object) -> bool:
        """Whether the SDK would keep `value` as it is: a string the length limit lets through
        whole, a number, a boolean, a tuple of such strings."""
        kind = type(value)
        if kind is str:
            length = self.limits.max_span_attribute_length
            return length is None or len(value) <= length  # type: ignore[arg-type]
        if kind is int or kind is float or kind is bool:
            return True
        if kind is tuple:
            return all(type(item) is str and self.plain(item) for item in value)  # type: ignore[attr-defined]
        return False

    def attributes(self, attributes: types.Attributes) -> dict[str, Any] | BoundedAttributes:
        """A plain copy when every value is plain and the limits let all through, else as the SDK
        bounds them."""
        count = self.limits.max_span_attributes
        plain: dict[str, Any] = {}
        for key, value in (attributes or {}).items():
            if not key or type(key) is not str or not self.plain(value):
                break
            plain[key] = value
        else:
            if count is None or len(plain) <= count:
                return plain
        return BoundedAttributes(
            count, attributes, immutable=False, max_value_len=self.limits.max_span_attribute_length
        )

    def links(self, links: Sequence[Link]) -> Sequence[Link]:
        """The links as they are when valid and without attributes, else as the SDK bounds them."""
        limits = self.limits
        if limits.max_links is None or len(links) <= limits.max_links:
            for link in links:
                if not link.context.is_valid or link.attributes:
                    break
            else:
                return tuple(links)
        kept: BoundedList[Link] = BoundedList(limits.max_links)
        for link in links:
            if link.context.is_valid or link.attributes:
                kept.append(Link(link.context, self.bounded(link.attributes, limits.max_link_attributes)))
        return kept

    def bounded(self, attributes: types.Attributes, count: int | None) -> BoundedAttributes:
        """An event's or a link's attributes, as the SDK bounds them."""
        return BoundedAttributes(count, attributes, immutable=True, max_value_len=self.limits.max_attribute_length)

    @property
    def resource(self) -> Resource:
        return self._tracer.resource

    def ended(self, span: RecordedSpan, readable: ReadableSpan) -> None:
        if self._on_ending is not None:
            self._on_ending(span)
        self.processor.on_end(readable)


class RecordedSpan(trace.Span):
    """A recording span of a run, started by a `SpanRecorder`: the SDK span's behaviour for all a caller may do."""

    def __init__(
        self,
        recorder: SpanRecorder,
        name: str,
        context: SpanContext,
        parent: SpanContext,
        kind: SpanKind,
        attributes: dict[str, Any] | BoundedAttributes,
        links: Sequence[Link],
        start_time: int,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> None:
        self._recorder = recorder
        self._name = name
        self._context = context
        self._parent = parent
        self._kind = kind
        self._attributes = attributes
        self._links = recorder.links(links) if links else ()
        self._events: list[Event] | BoundedList[Event] = []
        self._status = _UNSET
        self._lock = threading.Lock()
        self._end_time: int | None = None
        self._start_time = start_time
        self._record_exception = record_exception
        self._set_status_on_exception = set_status_on_exception

    def __repr__(self) -> str:
        return f'{type(self).__name__}(name="{self._name}", context={self._context})'

    # What span processors read of an SDK span (a `ReadableSpan`) while it is open.
    @property
    def name(self) -> str:
        return self._name

    @property
    def context(self) -> SpanContext:
        return self._context

    @property
    def parent(self) -> SpanContext:
        return self._parent

    @property
    def kind(self) -> SpanKind:
        return self._kind

    @property
    def attributes(self) -> Mapping[str, Any]:
        return MappingProxyType(self._attributes)

    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(self._events)

    @property
    def links(self) -> tuple[Link, ...]:
        return tuple(self._links)

    @property
    def status(self) -> Status:
        return self._status

    @property
    def start_time(self) -> int:
        return self._start_time

    @property
    def end_time(self) -> int | None:
        return self._end_time

    @property
    def resource(self) -> Resource:
        return self._recorder.resource

    @property
    def instrumentation_scope(self) -> Any:
        return self._recorder.scope

    def get_span_context(self) -> SpanContext:
        return self._context

    def is_recording(self) -> bool:
        return self._end_time is None

    def _open(self, action: str) -> bool:
        """Under the lock: whether the span still takes changes (warned about as the SDK does if not)."""
        if self._end_time is None:
            return True
        logger.warning("Tried calling %s on an ended span.", action)
        return False

    def _bounded(self) -> BoundedAttributes:
        attributes = self._attributes
        if not isinstance(attributes, BoundedAttributes):  # the first value that is not plain
            limits = self._recorder.limits
            attributes = self._attributes = BoundedAttributes(
                limits.max_span_attributes, attributes, immutable=False, max_value_len=limits.max_span_attribute_length
            )
        return attributes

    def _set(self, key: str, value: Any) -> None:
        """Under the lock: one attribute, as the SDK's bounded mapping would take it."""
        attributes = self._attributes
        if type(attributes) is dict and key and type(key) is str and self._recorder.plain(value):
            count = self._recorder.limits.max_span_attributes
            if key in attributes:
                del attributes[key]  # set again: the most recent, as in the SDK's mapping
                attributes[key] = value
                return
            if count is None or len(attributes) < count:
                attributes[key] = value
                return
        self._bounded()[key] = value

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        with self._lock:
            if self._open("set_attribute"):
                self._set(key, value)

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        with self._lock:
            if self._open("set_attributes"):
                for key, value in attributes.items():
                    self._set(key, value)

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        event = Event(name, self._recorder.bounded(attributes, self._recorder.limits.max_event_attributes), timestamp)
        with self._lock:
            if self._open("add_event"):
                if not isinstance(self._events, BoundedList):
                    self._events = BoundedList.from_seq(self._recorder.limits.max_events, self._events)
                self._events.append(event)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if not context.is_valid and not attributes:
            return
        link = Link(context, self._recorder.bounded(attributes, self._recorder.limits.max_link_attributes))
        with self._lock:
            if self._open("add_link"):
                if not isinstance(self._links, BoundedList):
                    self._links = BoundedList.from_seq(self._recorder.limits.max_links, self._links)
                self._links.append(link)

    def update_name(self, name: str) -> None:
        with self._lock:
            if self._open("update_name"):
                self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        with self._lock:
            if not self._open("set_status"):
                return
            # as the SDK: an OK status stays; UNSET is ignored
            if self._status.status_code is StatusCode.OK:
                return
            if isinstance(status, Status):
                if status.status_code is StatusCode.UNSET:
                    return
                if description is not None:
                    logger.warning(
                        "Description %s ignored. Use either `Status` or `(StatusCode, Description)`", description
                    )
                self._status = status
            elif status is not StatusCode.UNSET:
                self._status = Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        exception_type = type(exception)
        module = exception_type.__module__
        qualname = exception_type.__qualname__
        recorded: dict[str, Any] = {
            EXCEPTION_TYPE: f"{module}.{qualname}" if module and module != "builtins" else qualname,
            EXCEPTION_MESSAGE: str(exception),
            EXCEPTION_STACKTRACE: "".join(traceback.format_exception(exception)),
            EXCEPTION_ESCAPED: str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        """Ends the span, as the SDK's does: an exception escaping the block recorded, and the status an error."""
        if exc_val is not None and self.is_recording():
            if self._record_exception:
                self.record_exception(exc_val, escaped=True)
            if self._set_status_on_exception:
                self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        super().__exit__(exc_type, exc_val, exc_tb)

    def end(self, end_time: int | None = None) -> None:
        with self._lock:
            if self._end_time is not None:
                logger.warning("Calling end() on an ended span.")
                return
            self._end_time = end_time if end_time is not None else time_ns()
            if isinstance(self._attributes, BoundedAttributes):
                self._attributes._immutable = True
        recorder = self._recorder
        recorder.ended(
            self,
            ReadableSpan(
                name=self._name,
                context=self._context,
                parent=self._parent,
                resource=recorder.resource,
                attributes=self._attributes,
                events=self._events,
                links=self._links,
                kind=self._kind,
                status=self._status,
                start_time=self._start_time,
                end_time=self._end_time,
                instrumentation_scope=recorder.scope,
            ),
        )

"""The only changes otel-agents makes to private AutoGen modules, each tested against the pin.

- **Trace context on published gRPC events** (`install_grpc`, by `AutoGenInstrumentor` when the
  gRPC runtime is installed, and by `create_runtime(host_address=...)`).
  autogen-ext 0.7.5's `GrpcWorkerAgentRuntime` sends the sender's trace context in gRPC metadata,
  which the host does not forward to a topic's subscribers; the subscribers read it from the
  CloudEvent's attributes instead, where `publish_message` never puts it. So a publish crossing
  processes started a new trace on every receiving side. The runtime's private `_send_message` is
  wrapped to copy `traceparent`/`tracestate` into the attributes of published events
  (tests/test_grpc_runtime.py).
- **Parsed links remembered** (`install_link_cache`, by `configure()`). autogen-core 0.7.5 parses the
  `traceparent` of a message's envelope again for every runtime span the message causes (about
  seven a message), through the global propagator, to link the span to its sender. In a traced run
  the envelopes carry a handful of distinct values, so `autogen_core._telemetry._tracing`'s
  `get_telemetry_links` is wrapped to remember what each value parsed to (per propagator, bounded).
  Speed only: the links are the same (tests/test_trace_shape.py).

- **AutoGen's tracers placed** (`install_tracer_hooks`, by every `configure()`, tap and
  `AutoGenInstrumentor`). AgentChat's `invoke_agent`/`execute_tool` spans and a runtime built
  without a provider reach OpenTelemetry's *global* provider through two names in
  `autogen_core._telemetry`: `_genai.trace` (its `get_tracer`) and `_tracing.get_tracer_provider`.
  Both are answered with a placing view of the global provider, so their spans land in their run
  even when another party (the `opentelemetry-instrument` distro) owns the global provider.
  Outside a run, spans go to the global provider exactly as before.

Each is skipped when its target is not there (another AutoGen version): tracing then works as
without it, only slower or, for gRPC publishes, in more traces.
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import wrapt
from opentelemetry import propagate, trace
from opentelemetry.trace import Link
from opentelemetry.util import types as otel_types

from otel_agents._internal import process_state
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import wrapping

_TRACEPARENT, _TRACESTATE = ag.TRACE_CONTEXT_KEYS
_LINKS_KEPT: Final = 512
"""Distinct (traceparent, tracestate) values remembered; the memory is forgotten whole when full."""


def install_grpc() -> None:
    runtime = importlib.import_module(ag.GRPC_RUNTIME_MODULE).GrpcWorkerAgentRuntime
    if ag.GRPC_SEND_MESSAGE in runtime.__dict__:
        wrapping.replace(runtime, ag.GRPC_SEND_MESSAGE, _wrap_send_message)


def _published(
    runtime_message: Any, send_type: str, recipient: Any, telemetry_metadata: Mapping[str, str]
) -> tuple[Any, Mapping[str, str]] | None:
    """`_send_message`'s arguments: the message and its trace context, when it is a publish."""
    return (runtime_message, telemetry_metadata) if send_type == ag.GRPC_PUBLISH_SEND_TYPE else None


@wrapping.method_wrapper
async def _wrap_send_message(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`_send_message`, with the trace context copied into the attributes of a published event."""
    try:
        published = _published(*args, **kwargs) if wrapping.active() else None
    except TypeError:  # another signature: the call goes on as it is
        published = None
    if published is not None:
        runtime_message, telemetry_metadata = published
        try:
            event, attributes_field, value_field = ag.GRPC_EVENT_ATTRIBUTES
            attributes = getattr(getattr(runtime_message, event), attributes_field)
            for key in ag.TRACE_CONTEXT_KEYS:
                if telemetry_metadata.get(key):
                    setattr(attributes[key], value_field, telemetry_metadata[key])
        except (AttributeError, TypeError):  # another message layout: leave it as it is
            pass
    await wrapped(*args, **kwargs)


def install_link_cache() -> None:
    try:
        _tracing = importlib.import_module(ag.TELEMETRY_LINKS_MODULE)
    except ImportError:
        return
    if hasattr(_tracing, ag.TELEMETRY_LINKS_FUNCTION):
        wrapping.replace(_tracing, ag.TELEMETRY_LINKS_FUNCTION, _remember_links)


_parsed_links: dict[tuple[str, str | None, object], tuple[Link]] = {}
"""The links AutoGen parsed from an envelope's trace context, by that context (`_remember_links`)."""
process_state.hold(
    __name__,
    "_parsed_links",
    bound=f"{_LINKS_KEPT} trace contexts, then cleared",
    size=lambda: len(_parsed_links),
    forget=_parsed_links.clear,
)


def _remember_links(original: Callable[[Any], Sequence[Link] | None]) -> Callable[[Any], Sequence[Link] | None]:
    """The one patch that is not a wrapt wrapper (`wrapping.mark`ed instead): it is on the hottest
    path (some 36 calls a 5-message run), and wrapt's call of a module function costs some 6,700
    instructions more than a closure's (0.24 M of a replay run's 24.7 M, BENCHMARKS.md)."""
    parsed = _parsed_links

    @functools.wraps(original)
    def get_telemetry_links(metadata: Any) -> Sequence[Link] | None:
        traceparent = getattr(metadata, _TRACEPARENT, None)
        if not isinstance(traceparent, str) or not wrapping.active():  # gRPC metadata, no context, or off
            return original(metadata)
        key = (traceparent, getattr(metadata, _TRACESTATE, None), propagate.get_global_textmap())
        links = parsed.get(key)
        if links is not None:
            return links  # a tuple: the span each goes to copies it, nobody changes it
        fresh = original(metadata)
        if fresh is not None and len(fresh) == 1 and not fresh[0].attributes:
            if len(parsed) >= _LINKS_KEPT:
                parsed.clear()
            parsed[key] = (fresh[0],)
        return fresh

    return get_telemetry_links


def install_tracer_hooks(placing: trace.TracerProvider) -> None:
    """Answer AutoGen's two global-provider lookups with `placing` (a view of the global provider)."""
    try:
        tracing = importlib.import_module(ag.RUNTIME_TRACING_MODULE)
        genai = importlib.import_module(ag.GENAI_TRACER_MODULE)
    except ImportError:
        return
    if callable(getattr(tracing, ag.RUNTIME_DEFAULT_PROVIDER, None)):
        wrapping.replace(tracing, ag.RUNTIME_DEFAULT_PROVIDER, lambda original: _default_provider(original, placing))
    if isinstance(getattr(genai, ag.GENAI_TRACE_MODULE_NAME, None), types.ModuleType):
        wrapping.replace(genai, ag.GENAI_TRACE_MODULE_NAME, lambda original: _PlacingTrace(original, placing))


def _default_provider(original: Callable[[], trace.TracerProvider], placing: trace.TracerProvider) -> wrapping.Wrapper:
    def get_tracer_provider(
        wrapped: Callable[[], trace.TracerProvider], instance: None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> trace.TracerProvider:
        return placing if wrapping.active() else wrapped(*args, **kwargs)

    return wrapping.Wrapper(original, get_tracer_provider)


class _PlacingTrace(wrapt.ObjectProxy):  # type: ignore[type-arg]
    """`opentelemetry.trace` as `autogen_core._telemetry._genai` sees it (a wrapt proxy of the
    module): everything the same, except that `get_tracer` without a provider answers with the
    placing view."""

    def __init__(self, module: types.ModuleType, placing: trace.TracerProvider) -> None:
        super().__init__(module)
        self._self_placing = placing

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        schema_url: str | None = None,
        attributes: otel_types.Attributes = None,
    ) -> trace.Tracer:
        provider = self._self_placing if tracer_provider is None and wrapping.active() else tracer_provider
        if provider is None:
            return trace.get_tracer(
                instrumenting_module_name, instrumenting_library_version, None, schema_url, attributes
            )
        return provider.get_tracer(instrumenting_module_name, instrumenting_library_version, schema_url, attributes)


setattr(_PlacingTrace, wrapping.MARK, True)  # ours, for `wrapping.is_ours`

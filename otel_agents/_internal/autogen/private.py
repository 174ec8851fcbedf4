"""The only changes otel-agents makes to private AutoGen modules, each tested against the pin.

- **Trace context on published gRPC events** (`install_grpc`, by `create_runtime(host_address=...)`).
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

Each is skipped when its target is not there (another AutoGen version): tracing then works as
without it, only slower or, for gRPC publishes, in more traces.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from opentelemetry import propagate
from opentelemetry.trace import Link

from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen.wrapping import MARK, mark

_CONTEXT_KEYS: Final = ("traceparent", "tracestate")
_LINKS_KEPT: Final = 512
"""Distinct (traceparent, tracestate) values remembered; the memory is forgotten whole when full."""


def install_grpc() -> None:
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

    original = GrpcWorkerAgentRuntime.__dict__.get(ag.GRPC_SEND_MESSAGE)
    if original is None or getattr(original, MARK, False):
        return
    setattr(GrpcWorkerAgentRuntime, ag.GRPC_SEND_MESSAGE, mark(_wrap_send_message(original)))


def _wrap_send_message(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    @functools.wraps(original)
    async def _send_message(
        self: Any, runtime_message: Any, send_type: str, recipient: Any, telemetry_metadata: Mapping[str, str]
    ) -> None:
        if send_type == "publish":
            try:
                attributes = runtime_message.cloudEvent.attributes
                for key in _CONTEXT_KEYS:
                    if telemetry_metadata.get(key):
                        attributes[key].ce_string = telemetry_metadata[key]
            except (AttributeError, TypeError):  # another message layout: leave it as it is
                pass
        await original(self, runtime_message, send_type, recipient, telemetry_metadata)

    return _send_message


def install_link_cache() -> None:
    try:
        _tracing = importlib.import_module(ag.TELEMETRY_LINKS_MODULE)
    except ImportError:
        return
    original = getattr(_tracing, ag.TELEMETRY_LINKS_FUNCTION, None)
    if original is None or getattr(original, MARK, False):
        return
    setattr(_tracing, ag.TELEMETRY_LINKS_FUNCTION, mark(_remember_links(original)))


def _remember_links(original: Callable[[Any], Sequence[Link] | None]) -> Callable[[Any], Sequence[Link] | None]:
    parsed: dict[tuple[str, str | None, object], tuple[Link]] = {}

    @functools.wraps(original)
    def get_telemetry_links(metadata: Any) -> Sequence[Link] | None:
        traceparent = getattr(metadata, "traceparent", None)
        if not isinstance(traceparent, str):  # gRPC metadata, or no trace context: as AutoGen does it
            return original(metadata)
        key = (traceparent, getattr(metadata, "tracestate", None), propagate.get_global_textmap())
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

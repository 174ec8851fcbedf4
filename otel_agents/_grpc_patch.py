"""The one change to a private AutoGen module: trace context on published gRPC events.

autogen-ext 0.7.5's `GrpcWorkerAgentRuntime` sends the sender's trace context in gRPC metadata,
which the host does not forward to a topic's subscribers; the subscribers read it from the
CloudEvent's attributes instead, where `publish_message` never puts it. So a publish crossing
processes started a new trace on every receiving side. This wraps the runtime's private
`_send_message` to copy `traceparent`/`tracestate` into the attributes of published events. Tested
against the pinned version (tests/test_grpc_runtime.py); installed by `create_runtime(host_address=...)`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._wrapping import MARK, mark

_CONTEXT_KEYS = ("traceparent", "tracestate")


def install() -> None:
    from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

    original = GrpcWorkerAgentRuntime.__dict__.get("_send_message")
    if original is None or getattr(original, MARK, False):
        return
    GrpcWorkerAgentRuntime._send_message = mark(_wrap(original))  # type: ignore[method-assign]


def _wrap(original: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
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

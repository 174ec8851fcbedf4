"""`create_runtime()`: an AutoGen runtime whose spans join the trace of the run that caused them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otel_agents._internal.config.settings import ConfigError
from otel_agents._internal.telemetry import Telemetry
from otel_agents._internal.tracing.globals import current

if TYPE_CHECKING:
    from autogen_core import AgentRuntime

_GRPC_MISSING = "the gRPC worker runtime needs: pip install 'otel-agents[grpc]'"


def create_runtime(
    telemetry: Telemetry | None = None, *, host_address: str | None = None, **runtime_kwargs: Any
) -> AgentRuntime:
    """A traced AutoGen runtime (`telemetry=None`: the latest `configure()`'s).

    Without `host_address`, a `SingleThreadedAgentRuntime`: start it once and share it among teams
    (`RoundRobinGroupChat(..., runtime=runtime)`); each tapped run is still a trace of its own.
    With `host_address` ("host:port" of a `GrpcWorkerAgentRuntimeHost`), a `GrpcWorkerAgentRuntime`
    (`await runtime.start()`): a message that crosses processes stays in its sender's trace.
    Other keyword arguments go to the runtime unchanged.
    """
    if "tracer_provider" in runtime_kwargs:
        raise TypeError("create_runtime() sets tracer_provider from telemetry; do not pass it")
    resolved = current(telemetry)
    if host_address is None:
        from autogen_core import SingleThreadedAgentRuntime

        return SingleThreadedAgentRuntime(tracer_provider=resolved.tracer_provider, **runtime_kwargs)
    if not isinstance(host_address, str) or not host_address.strip():
        raise ConfigError(f"host_address={host_address!r}: expected 'host:port'")
    try:
        from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime

        from otel_agents._internal.autogen import private
    except ImportError:
        raise ConfigError(_GRPC_MISSING) from None
    private.install_grpc()
    return GrpcWorkerAgentRuntime(host_address=host_address, tracer_provider=resolved.tracer_provider, **runtime_kwargs)

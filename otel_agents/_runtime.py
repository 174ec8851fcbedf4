"""`create_runtime()`: an AutoGen runtime whose spans join the trace of the run that caused them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._telemetry import Telemetry, current

if TYPE_CHECKING:
    from autogen_core import SingleThreadedAgentRuntime


def create_runtime(telemetry: Telemetry | None = None, **runtime_kwargs: Any) -> SingleThreadedAgentRuntime:
    """A `SingleThreadedAgentRuntime` traced by `telemetry` (None: the latest `configure()`'s).

    Other keyword arguments go to the runtime unchanged. Start it once and share it among teams
    (`RoundRobinGroupChat(..., runtime=runtime)`): each tapped run is still a trace of its own.
    """
    from autogen_core import SingleThreadedAgentRuntime

    if "tracer_provider" in runtime_kwargs:
        raise TypeError("create_runtime() sets tracer_provider from telemetry; do not pass it")
    resolved = current(telemetry)
    return SingleThreadedAgentRuntime(tracer_provider=resolved.tracer_provider, **runtime_kwargs)

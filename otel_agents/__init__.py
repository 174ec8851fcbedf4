"""OpenTelemetry for Microsoft AutoGen teams: one nested trace per team run.

    import otel_agents

    otel_agents.configure()                     # OTEL_* variables, else a local store
    result = await team.run(task="...")         # every AutoGen run is one trace, no other change

`tap(stream)` traces one stream where AutoGen is not instrumented (`configure(instrument=False)`);
`AutoGenInstrumentor` is the same instrumentation as an OpenTelemetry instrumentor (what
`opentelemetry-instrument python app.py` loads). `create_runtime()` builds a traced
`SingleThreadedAgentRuntime` to share among teams; `run_stream(team, task=...)` is `tap` with a
cancellation token that stops the team when the consumer leaves early; `LoopGuard()` stops a
looping team; `LoopLimits` sets the loop thresholds.
"""

from typing import TYPE_CHECKING, Any

from otel_agents._internal.autogen.runtime import create_runtime
from otel_agents._internal.autogen.tap import run_stream, tap
from otel_agents._internal.config.loop_limits import LoopLimits
from otel_agents._internal.config.settings import ConfigError
from otel_agents._internal.configure import configure
from otel_agents._internal.export.health import SpanAccount
from otel_agents._internal.genai.keeping import RunSummary
from otel_agents._internal.run.attribution import run_attributes
from otel_agents._internal.run.outcomes import record_outcome
from otel_agents._internal.telemetry import Telemetry
from otel_agents._version import __version__

if TYPE_CHECKING:
    from otel_agents._internal.autogen.guard import LoopGuard
    from otel_agents._internal.autogen.instrumentor import AutoGenInstrumentor
    from otel_agents._internal.explain.api import explain
    from otel_agents._internal.explain.model import Explanation

__all__ = [
    "AutoGenInstrumentor",
    "ConfigError",
    "Explanation",
    "LoopGuard",
    "LoopLimits",
    "RunSummary",
    "SpanAccount",
    "Telemetry",
    "__version__",
    "configure",
    "create_runtime",
    "explain",
    "record_outcome",
    "run_attributes",
    "run_stream",
    "tap",
]


def __getattr__(name: str) -> Any:
    # These import AutoGen or opentelemetry-instrumentation: loaded when first asked for, not with
    # the package (`opentelemetry-instrument` loads AutoGenInstrumentor through its entry point).
    if name == "LoopGuard":
        from otel_agents._internal.autogen.guard import LoopGuard

        return LoopGuard
    if name == "AutoGenInstrumentor":
        from otel_agents._internal.autogen.instrumentor import AutoGenInstrumentor

        return AutoGenInstrumentor
    if name == "explain":  # the analysis and its readers: loaded when a run is explained
        from otel_agents._internal.explain.api import explain

        return explain
    if name == "Explanation":
        from otel_agents._internal.explain.model import Explanation

        return Explanation
    raise AttributeError(f"module 'otel_agents' has no attribute {name!r}")

"""Which recording is current, and the process-wide delegating provider that follows it.

The latest `configure()` (or `instrument(tracer_provider=...)`) makes its pipeline's `Recording`
current here (`Telemetry` does, through `make_current`); with none, runs and model calls record
with a view of OpenTelemetry's global providers. AgentChat's spans reach the current recording
through OpenTelemetry's globals: the delegating provider installed once as the global one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from opentelemetry import metrics, trace

from otel_agents._internal import process_state
from otel_agents._internal.config.loop_limits import LoopLimits
from otel_agents._internal.config.settings import RuntimeSpans, Settings, load_prices, resolve_settings
from otel_agents._internal.genai.loops import ResolvedLimits
from otel_agents._internal.genai.metrics import SpanLosses
from otel_agents._internal.genai.prices import PriceTable
from otel_agents._internal.recording import Recording
from otel_agents._internal.tracing.placement import RunAwareTracerProvider
from otel_agents._internal.tracing.registry import REGISTRY
from otel_agents._internal.tracing.state import Run

logger = logging.getLogger(__name__)


def placing_provider(recording: Recording) -> trace.TracerProvider:
    """The run-aware provider over `recording`'s SDK provider."""
    return RunAwareTracerProvider(lambda: recording.sdk_tracer_provider, lambda: recording.settings.runtime_spans)


def unplaced_spans() -> int:
    """What `otel_agents.spans.unplaced` reads (`tracing.registry`)."""
    return REGISTRY.unplaced


def new_recording(
    settings: Settings,
    sdk_tracer_provider: trace.TracerProvider,
    meter_provider: metrics.MeterProvider,
    prices: PriceTable | None = None,
    *,
    loop_limits: ResolvedLimits | None = None,
    metrics_exported: bool = True,
    span_losses: Callable[[], SpanLosses] = SpanLosses.none,
) -> Recording:
    """A recording whose tracer provider places the spans of runs (`tracing.placement`)."""
    return Recording(
        settings,
        sdk_tracer_provider,
        meter_provider,
        placing_provider,
        loop_limits if loop_limits is not None else LoopLimits().resolved(),
        prices,
        metrics_exported=metrics_exported,
        span_losses=span_losses,
        unplaced_spans=unplaced_spans,
    )


class _GlobalTracerProvider(RunAwareTracerProvider):
    """Installed once as the global provider; `configure()` re-targets it.

    AgentChat's GenAI spans always use the global provider, so they follow the latest
    `configure()` through this delegate.
    """

    def __init__(self) -> None:
        super().__init__(self._target_provider, self._target_runtime_spans)
        self.target: Recording | None = None

    def accepts(self, run: Run) -> bool:
        # Only runs of the pipeline this provider stands for: with set_global=False, AgentChat's
        # spans are not otel-agents' (documented), whatever an earlier configure() installed.
        return self.target is not None and run.provider is self.target.sdk_tracer_provider

    def _target_provider(self) -> trace.TracerProvider:
        return self.target.sdk_tracer_provider if self.target is not None else trace.NoOpTracerProvider()

    def _target_runtime_spans(self) -> RuntimeSpans:
        return self.target.settings.runtime_spans if self.target is not None else "off"


def global_recording_provider() -> trace.TracerProvider:
    """Where a span started through the global provider is recorded: the latest `configure()`'s
    pipeline when ours is the global provider, else the global provider itself."""
    provider = trace.get_tracer_provider()
    return provider.delegate() if isinstance(provider, _GlobalTracerProvider) else provider


_lock = threading.Lock()
process_state.new_locks_in_forked_child(__name__, "_lock")
_latest: Recording | None = None
_global_provider: _GlobalTracerProvider | None = None
_view: Recording | None = None


def _forget() -> None:
    global _latest, _view
    with _lock:
        _latest = _view = None
        if _global_provider is not None:
            _global_provider.target = None
            _global_provider.forget_tracers()


process_state.hold(
    __name__,
    "_latest",
    "_view",
    "_global_provider",
    bound="one each; the global delegating provider, once set, stays OpenTelemetry's global provider "
    "(it takes one per process): forgetting leaves it without a target and its tracers",
    size=lambda: (
        (_latest is not None)
        + (_view is not None)
        + (_global_provider is not None and _global_provider.target is not None)
        + (_global_provider.tracers_kept() if _global_provider is not None else 0)
    ),
    forget=_forget,
)


def _install_global(recording: Recording) -> None:
    global _global_provider
    if _global_provider is None:
        candidate = _GlobalTracerProvider()
        current = trace.get_tracer_provider()
        if current is recording.sdk_tracer_provider:
            return  # the pipeline records into the global provider already (`configure._build`)
        if not isinstance(current, trace.ProxyTracerProvider):
            logger.warning(
                "otel-agents: a global TracerProvider (%s) is already set and cannot be replaced; "
                "spans the application starts through it do not reach otel-agents' pipeline "
                "(AutoGen's own spans do). Call otel_agents.configure() before setting up "
                "OpenTelemetry elsewhere, or pass set_global=False to silence this.",
                type(current).__name__,
            )
            return
        trace.set_tracer_provider(candidate)
        _global_provider = candidate
    _global_provider.target = recording


def make_current(recording: Recording, *, set_global: bool) -> None:
    """Make `recording` the current one (and the global provider's target unless `set_global` is
    False); the previous one's pipeline is shut down by the caller (`telemetry.activate`)."""
    global _latest
    with _lock:
        previous, _latest = _latest, recording
        if set_global and not recording.settings.disabled:
            _install_global(recording)
        elif _global_provider is not None and _global_provider.target is previous:
            _global_provider.target = None  # the previous pipeline is shut down by the caller


def current(telemetry: object | None) -> Recording:
    """The recording of the given telemetry (an `otel_agents.Telemetry`), else the latest
    `configure()`'s, else a view of the global providers."""
    if telemetry is not None:
        recording = getattr(telemetry, "recording", None)
        if not isinstance(recording, Recording):
            raise TypeError(f"telemetry must be an otel_agents.Telemetry, not {type(telemetry).__name__}")
        return recording
    if _latest is not None:
        return _latest
    global _view
    providers = (trace.get_tracer_provider(), metrics.get_meter_provider())
    view = _view
    if view is None or (view.sdk_tracer_provider, view.meter_provider) != providers:
        # built once per pair of global providers: model calls ask for it on every call
        # (OTEL_AGENTS_PRICES too: under `opentelemetry-instrument` it was never read)
        view = _view = new_recording(resolve_settings(), *providers, load_prices(None))
    return view


def configured_loop_limits() -> ResolvedLimits | None:
    """The loop thresholds of the latest `configure()` (None: none has run)."""
    latest = _latest
    return latest.loop_limits if latest is not None else None

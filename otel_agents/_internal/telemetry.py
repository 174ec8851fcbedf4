"""`Telemetry`, the pipeline `configure()` builds, and which one is current: the latest
`configure()`'s, else a view of the global providers. The process-wide delegating provider that
AgentChat's spans reach through OpenTelemetry's globals lives here too."""

from __future__ import annotations

import atexit
import logging
import threading
from types import TracebackType
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace

from otel_agents._internal.config.settings import RuntimeSpans, Settings, resolve_settings
from otel_agents._internal.genai.loops import LoopLimits, ResolvedLimits
from otel_agents._internal.genai.metrics import Instruments
from otel_agents._internal.genai.prices import PriceTable
from otel_agents._internal.run.state import Run
from otel_agents._internal.run.workflow import end_open_runs
from otel_agents._internal.tracing.placement import RunAwareTracerProvider

if TYPE_CHECKING:
    from opentelemetry.util.genai.handler import TelemetryHandler

    from otel_agents._internal.export.pipeline import Health
    from otel_agents._internal.export.prometheus import PrometheusEndpoint

logger = logging.getLogger(__name__)


class Telemetry:
    """The telemetry pipeline of one `configure()` call.

    `tracer_provider` parents the spans of tapped runs into one trace per run; pass it (or this
    object, to `create_runtime`) wherever AutoGen takes a provider. Use as a context manager, sync or
    async, to shut the pipeline down (flushing what it holds) on exit.
    """

    def __init__(
        self,
        settings: Settings,
        sdk_tracer_provider: trace.TracerProvider,
        meter_provider: metrics.MeterProvider,
        prices: PriceTable | None = None,
        health: Health | None = None,
        *,
        metrics_exported: bool = True,
    ) -> None:
        self.settings = settings
        self._health = health
        self.prices = prices if prices is not None else PriceTable()
        self._sdk_tracer_provider = sdk_tracer_provider
        self._meter_provider = meter_provider
        self.instruments = Instruments(meter_provider, self, exported=metrics_exported)
        self._tracer_provider = RunAwareTracerProvider(
            lambda: self._sdk_tracer_provider, lambda: self.settings.runtime_spans
        )
        self._shut_down = False
        self.loop_limits: ResolvedLimits = LoopLimits().resolved()
        """The thresholds of the loop detector the tap runs."""
        self.prometheus: PrometheusEndpoint | None = None
        """The Prometheus scrape endpoint, when one was asked for (`.host`, `.port`)."""
        self.genai_handler: TelemetryHandler | None = None
        """util-genai's handler for this pipeline's model calls, made at the first one."""

    @property
    def tracer_provider(self) -> trace.TracerProvider:
        """A provider whose tracers place every span of a tapped run inside that run's trace."""
        return self._tracer_provider

    @property
    def meter_provider(self) -> metrics.MeterProvider:
        return self._meter_provider

    @property
    def disabled(self) -> bool:
        """True under `OTEL_SDK_DISABLED=true`: nothing is recorded and taps pass items through."""
        return self.settings.disabled

    @property
    def sdk_tracer_provider(self) -> trace.TracerProvider:
        """The provider that records and exports (no run-aware parenting)."""
        return self._sdk_tracer_provider

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Deliver every finished span and metric held by this pipeline; False if it timed out."""
        ok = True
        for provider in (self._sdk_tracer_provider, self._meter_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                ok = bool(flush(timeout_millis)) and ok
        return ok

    @property
    def dropped_spans(self) -> int:
        """Spans this pipeline could not deliver: failed exports, full queues, cut-off shutdowns."""
        return self._health.dropped_spans if self._health is not None else 0

    def shutdown(self) -> None:
        """Flush and stop the pipeline, within the exporter timeout plus a few seconds. Idempotent."""
        if self._shut_down:
            return
        self._shut_down = True
        from otel_agents._internal.export.pipeline import SHUTDOWN_GRACE_S, shutdown_within

        end_open_runs(self._sdk_tracer_provider)  # a run still open is ended (`shutdown`) and exported

        actions = [
            shutdown
            for provider in (self._sdk_tracer_provider, self._meter_provider)
            if (shutdown := getattr(provider, "shutdown", None)) is not None
        ]
        shutdown_within(actions, self.settings.exporter_timeout_s + SHUTDOWN_GRACE_S + 1.0)
        if self.prometheus is not None:
            self.prometheus.close()
        if self.dropped_spans:
            logger.warning("otel-agents: %d spans could not be delivered and were dropped", self.dropped_spans)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    async def __aenter__(self) -> Telemetry:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()


class _GlobalTracerProvider(RunAwareTracerProvider):
    """Installed once as the global provider; `configure()` re-targets it.

    AgentChat's GenAI spans always use the global provider, so they follow the latest
    `configure()` through this delegate.
    """

    def __init__(self) -> None:
        super().__init__(self._target_provider, self._target_runtime_spans)
        self.target: Telemetry | None = None

    def accepts(self, run: Run) -> bool:
        # Only runs of the pipeline this provider stands for: with set_global=False, AgentChat's
        # spans are not otel-agents' (documented), whatever an earlier configure() installed.
        return self.target is not None and run.provider is self.target.sdk_tracer_provider

    def _target_provider(self) -> trace.TracerProvider:
        return self.target.sdk_tracer_provider if self.target is not None else trace.NoOpTracerProvider()

    def _target_runtime_spans(self) -> RuntimeSpans:
        return self.target.settings.runtime_spans if self.target is not None else "off"


_lock = threading.Lock()
_latest: Telemetry | None = None
_global_provider: _GlobalTracerProvider | None = None


def _install_global(telemetry: Telemetry) -> None:
    global _global_provider
    if _global_provider is None:
        candidate = _GlobalTracerProvider()
        current = trace.get_tracer_provider()
        if not isinstance(current, trace.ProxyTracerProvider):
            logger.warning(
                "otel-agents: a global TracerProvider (%s) is already set and cannot be replaced; "
                "AgentChat's invoke_agent/execute_tool spans will go to it, not to otel-agents. "
                "Call otel_agents.configure() before setting up OpenTelemetry elsewhere, or pass "
                "set_global=False to silence this.",
                type(current).__name__,
            )
            return
        trace.set_tracer_provider(candidate)
        _global_provider = candidate
    _global_provider.target = telemetry


def activate(telemetry: Telemetry, *, set_global: bool) -> Telemetry | None:
    """Make `telemetry` the latest pipeline (and the global provider's target unless
    `set_global` is False); the previous latest pipeline, which the caller shuts down."""
    global _latest
    with _lock:
        previous, _latest = _latest, telemetry
        if set_global and not telemetry.settings.disabled:
            _install_global(telemetry)
        elif _global_provider is not None and _global_provider.target is previous:
            _global_provider.target = None  # the previous pipeline is shut down by the caller
    return previous if previous is not telemetry else None


@atexit.register
def _shutdown_at_exit() -> None:
    """Deliver what the latest pipeline holds when the process exits (bounded in time)."""
    if _latest is not None:
        _latest.shutdown()


def current(telemetry: Telemetry | None) -> Telemetry:
    """The given telemetry, else the latest `configure()`'s, else a view of the global providers."""
    if telemetry is not None:
        if not isinstance(telemetry, Telemetry):
            raise TypeError(f"telemetry must be an otel_agents.Telemetry, not {type(telemetry).__name__}")
        return telemetry
    if _latest is not None:
        return _latest
    global _view
    providers = (trace.get_tracer_provider(), metrics.get_meter_provider())
    view = _view
    if view is None or (view.sdk_tracer_provider, view.meter_provider) != providers:
        # built once per pair of global providers: model calls ask for it on every call
        view = _view = Telemetry(resolve_settings(), *providers)
    return view


_view: Telemetry | None = None

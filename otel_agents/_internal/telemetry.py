"""`configure()` and the `Telemetry` it returns: providers, pipeline, the process-wide delegate."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace

from otel_agents._internal.autogen import patches as _patches
from otel_agents._internal.config import params
from otel_agents._internal.config.settings import ConfigError, RuntimeSpans, Settings, resolve_settings
from otel_agents._internal.genai.loops import LoopLimits, ResolvedLimits
from otel_agents._internal.genai.metrics import Instruments
from otel_agents._internal.genai.prices import PriceTable, load_prices
from otel_agents._internal.run.state import Run
from otel_agents._internal.tracing.placement import RunAwareTracerProvider

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter

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
        from otel_agents._internal.export.pipeline import SHUTDOWN_GRACE_S, exporter_timeout_s, shutdown_within

        actions = [
            shutdown
            for provider in (self._sdk_tracer_provider, self._meter_provider)
            if (shutdown := getattr(provider, "shutdown", None)) is not None
        ]
        shutdown_within(actions, exporter_timeout_s() + SHUTDOWN_GRACE_S + 1.0)
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


def configure(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    headers: Mapping[str, str] | str | None = None,
    span_exporter: SpanExporter | None = None,
    metric_readers: Sequence[MetricReader] | None = None,
    prometheus: tuple[str, int] | bool | None = None,
    loop_limits: LoopLimits | None = None,
    capture_content: bool | str | None = None,
    redact: Callable[[str], str] | None = None,
    prices: str | os.PathLike[str] | Mapping[str, Mapping[str, float]] | None = None,
    store: str | os.PathLike[str] | bool | None = None,
    runtime_spans: str | None = None,
    set_global: bool = True,
) -> Telemetry:
    """Set up tracing for AutoGen team runs and return the pipeline.

    Each argument left `None` is read from its variable (`OTEL_SERVICE_NAME`,
    `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_AGENTS_RUNTIME_SPANS`, ...), else its default. Traces go
    over OTLP when an endpoint is set, else to the embedded store (`store`: a directory, or False
    for none). A given `span_exporter` replaces that default destination and goes behind a batch
    processor (honouring `OTEL_BSP_*`). A later call re-targets the process-wide provider and
    shuts the previous pipeline down. `set_global=False` leaves OpenTelemetry's globals alone;
    AgentChat's own `invoke_agent`/`execute_tool` spans then do not reach this pipeline.
    """
    global _latest
    if not isinstance(set_global, bool):
        raise ConfigError(f"set_global={set_global!r}: expected True or False")
    env = params.environment()  # one snapshot of the variables for every setting below
    settings = resolve_settings(
        service_name=service_name,
        runtime_spans=runtime_spans,
        endpoint=endpoint,
        protocol=protocol,
        headers=headers,
        store=store,
        capture_content=capture_content,
        redact=redact,
        prometheus=prometheus,
        span_exporter_given=span_exporter is not None,
        environ=env,
    )
    if span_exporter is not None:
        params.SPAN_EXPORTER.checked(span_exporter)
    if metric_readers is not None:
        params.METRIC_READERS.checked(metric_readers)
    if loop_limits is not None and not isinstance(loop_limits, LoopLimits):
        raise ConfigError(f"loop_limits={loop_limits!r}: expected an otel_agents.LoopLimits")
    limits = (loop_limits or LoopLimits()).resolved(env)  # validates OTEL_AGENTS_* thresholds
    price_table = load_prices(prices, env)
    telemetry = _build(settings, span_exporter, metric_readers, price_table)
    telemetry.loop_limits = limits
    _patches.install()
    with _lock:
        previous, _latest = _latest, telemetry
        if set_global and not settings.disabled:
            _install_global(telemetry)
        elif _global_provider is not None and _global_provider.target is previous:
            _global_provider.target = None  # the previous pipeline is shut down below
    if previous is not None and previous is not telemetry:
        previous.shutdown()
    return telemetry


def _build(
    settings: Settings,
    span_exporter: SpanExporter | None,
    metric_readers: Sequence[MetricReader] | None,
    prices: PriceTable,
) -> Telemetry:
    if settings.disabled:
        return Telemetry(settings, trace.NoOpTracerProvider(), metrics.NoOpMeterProvider(), prices)

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    from otel_agents._internal.export import exporters as _exporters
    from otel_agents._internal.export import pipeline as _pipeline

    exporters = ([span_exporter] if span_exporter is not None else []) + _exporters.span_exporters(settings)
    readers = list(metric_readers or ()) + _exporters.metric_readers(settings)
    endpoint = None
    if settings.prometheus is not None:
        from otel_agents._internal.export.prometheus import PrometheusEndpoint

        endpoint = PrometheusEndpoint(*settings.prometheus)
        readers.append(endpoint.reader)
    resource = Resource.create({SERVICE_NAME: settings.service_name})
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    health = _pipeline.Health()
    for exporter in exporters:
        tracer_provider.add_span_processor(_pipeline.make_processor(exporter, settings.content, health))
    _pipeline.quiet_queue_full_logs()
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    telemetry = Telemetry(settings, tracer_provider, meter_provider, prices, health, metrics_exported=bool(readers))
    telemetry.prometheus = endpoint
    return telemetry


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
        _patches.install()
        # built once per pair of global providers: model calls ask for it on every call
        view = _view = Telemetry(resolve_settings(), *providers)
    return view


_view: Telemetry | None = None

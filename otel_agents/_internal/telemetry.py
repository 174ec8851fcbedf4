"""`Telemetry`, the pipeline `configure()` builds (and `instrument(tracer_provider=...)` adopts),
which one is the latest, and the exit handler that delivers what it holds. What runs and model
calls record with is its `Recording`, made current in `tracing.globals`."""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace

from otel_agents._internal import process_state
from otel_agents._internal.config.settings import Settings, resolve_settings
from otel_agents._internal.export.exit_thread import EXIT_THREAD
from otel_agents._internal.export.soon import FLUSH_SOON
from otel_agents._internal.genai.loops import ResolvedLimits
from otel_agents._internal.genai.metrics import Instruments, SpanLosses
from otel_agents._internal.genai.prices import PriceTable
from otel_agents._internal.run.workflow import end_open_runs
from otel_agents._internal.tracing import globals as current_recording
from otel_agents._internal.tracing.placement import RunAwareTracerProvider

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.util.genai.handler import TelemetryHandler

    from otel_agents._internal.export.health import Health, SpanAccount
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
        owns_tracer_provider: bool = True,
        owns_meter_provider: bool = True,
        processors: Sequence[SpanProcessor] = (),
        flushed_readers: Sequence[MetricReader] | None = None,
    ) -> None:
        """A provider not owned is someone else's (the app's, the distro's): this pipeline never
        shuts it down; of a tracer provider it shuts down only `processors`, the ones it added.
        `flushed_readers`: the metric readers `force_flush` flushes (None: the meter provider's all)."""
        self.settings = settings
        self._owns = (owns_tracer_provider, owns_meter_provider)
        self._processors = tuple(processors)
        self._flushed_readers = tuple(flushed_readers) if flushed_readers is not None else None
        self._health = health
        self._sdk_tracer_provider = sdk_tracer_provider
        self._meter_provider = meter_provider
        self.recording = current_recording.new_recording(
            settings,
            sdk_tracer_provider,
            meter_provider,
            prices,
            metrics_exported=metrics_exported,
            span_losses=_span_losses_of(self),
        )
        """What this pipeline's runs and model calls record with."""
        self._shut_down = False
        self.prometheus: PrometheusEndpoint | None = None
        """The Prometheus scrape endpoint, when one was asked for (`.host`, `.port`)."""

    @property
    def tracer_provider(self) -> trace.TracerProvider:
        """A provider whose tracers place every span of a tapped run inside that run's trace."""
        return self.recording.tracer_provider

    @property
    def prices(self) -> PriceTable:
        return self.recording.prices

    @property
    def instruments(self) -> Instruments:
        return self.recording.instruments

    @property
    def loop_limits(self) -> ResolvedLimits:
        """The thresholds of the loop detector the tap runs."""
        return self.recording.loop_limits

    @loop_limits.setter
    def loop_limits(self, limits: ResolvedLimits) -> None:
        self.recording.loop_limits = limits

    @property
    def genai_handler(self) -> TelemetryHandler:
        """util-genai's handler for this pipeline's model calls, made at the first one."""
        return self.recording.genai_handler

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
        """Deliver every finished span and metric held by this pipeline; False if it timed out.
        A Prometheus endpoint is left to its scrapes."""
        flushes = [getattr(self._sdk_tracer_provider, "force_flush", None)]
        if self._flushed_readers is None:
            flushes.append(getattr(self._meter_provider, "force_flush", None))
        else:
            flushes += [reader.force_flush for reader in self._flushed_readers]
        ok = True
        for flush in flushes:
            if flush is not None:
                ok = bool(flush(timeout_millis)) and ok
        return ok

    @property
    def dropped_spans(self) -> int:
        """Spans this pipeline could not deliver: failed exports, full queues, cut-off shutdowns."""
        return self._health.dropped_spans if self._health is not None else 0

    def span_losses(self) -> SpanLosses:
        """Spans not delivered, by why: what `otel_agents.spans.dropped` and `.sampled_out` count."""
        health = self._health
        if health is None:
            return SpanLosses.none()
        return SpanLosses(health.failed_export_spans, health.not_exported_spans, health.sampled_out_spans)

    def span_accounts(self) -> list[SpanAccount]:
        """Where the spans meant for each exporter of this pipeline went (one `SpanAccount` each):
        ended = delivered + dropped (`export_failed`, `not_exported`) + sampled out + under way.
        Of the spans ended before a `force_flush()` that returned True, only those waiting for a run
        still open (run sampling) are under way; from shutdown on, none is. Empty for providers
        otel-agents did not set up."""
        return self._health.accounts() if self._health is not None else []

    def shares_providers_with(self, other: Telemetry) -> bool:
        """Whether `other` records through a provider of this pipeline (shutting this one down
        would stop `other`)."""
        mine = (self._sdk_tracer_provider, self._meter_provider)
        return other.sdk_tracer_provider in mine or other.meter_provider in mine

    def shutdown(self) -> None:
        """Flush and stop the pipeline, within the exporter timeout plus a few seconds. Idempotent."""
        from otel_agents._internal.export.pipeline import SHUTDOWN_GRACE_S

        self.shutdown_within(self.settings.exporter_timeout_s + SHUTDOWN_GRACE_S + 1.0)

    def shutdown_within(self, seconds: float, *, warn: bool = True) -> None:
        """`shutdown()` in `seconds` at most (at exit: `OTEL_AGENTS_EXIT_TIMEOUT_S`, and the exit
        says what was lost itself: `warn=False`)."""
        if self._shut_down:
            return
        self._shut_down = True
        from otel_agents._internal.export import pipeline

        end_open_runs(self._sdk_tracer_provider)  # a run still open is ended (`shutdown`) and exported
        FLUSH_SOON.forget(self._sdk_tracer_provider)  # what those ends asked for: the shutdown below sends
        if self._health is not None and not warn:  # the exit: its own line tells what was lost
            self._health.quiet = True
        if self._health is not None:  # where no thread can start, each processor bounds itself
            for processor in self._health.processors:
                processor.limit_shutdown(seconds)

        actions: list[Callable[[], object]] = []
        for provider, owned in zip((self._sdk_tracer_provider, self._meter_provider), self._owns, strict=True):
            stop = getattr(provider, "shutdown" if owned else "force_flush", None)
            if stop is not None:
                actions.append(stop)
        actions += [processor.shutdown for processor in self._processors if not self._owns[0]]
        pipeline.shutdown_within(actions, seconds)
        if self._health is not None:  # shutdown is over, done or not: the count below is final
            self._health.close()
        if self.prometheus is not None:
            self.prometheus.close()
        if warn and self.dropped_spans:
            logger.warning("otel-agents: %d spans could not be delivered and were dropped", self.dropped_spans)

    def undelivered(self, *, unannounced: bool = False) -> list[tuple[str, int]]:
        """(destination, spans ended and not delivered there) of each exporter of ours missing some;
        `unannounced`: of those whose outage no warning has named (one warning per outage)."""
        return self._health.undelivered(unannounced=unannounced) if self._health is not None else []

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


def adopt(tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None) -> Telemetry:
    """`AutoGenInstrumentor().instrument(tracer_provider=..., meter_provider=...)`: runs are recorded
    by these providers (None: the global one) from now on, until the next `configure()` or
    `instrument()`. They stay the caller's: shutting this pipeline down only flushes them."""
    if isinstance(tracer_provider, RunAwareTracerProvider):  # a Telemetry's: record where it records
        tracer_provider = tracer_provider.delegate()
    telemetry = Telemetry(
        resolve_settings(),
        tracer_provider if tracer_provider is not None else trace.get_tracer_provider(),
        meter_provider if meter_provider is not None else metrics.get_meter_provider(),
        owns_tracer_provider=False,
        owns_meter_provider=False,
    )
    previous = activate(telemetry, set_global=False)
    if previous is not None and not previous.shares_providers_with(telemetry):
        previous.shutdown()
    return telemetry


def configured() -> bool:
    """Whether `configure()` (or `instrument(tracer_provider=...)`) made a pipeline current."""
    return _latest is not None


_lock = threading.Lock()
process_state.new_locks_in_forked_child(__name__, "_lock")
_latest: Telemetry | None = None


def _forget_latest() -> None:
    global _latest
    with _lock:
        latest, _latest = _latest, None
    if latest is not None:
        latest.shutdown()  # as the next `configure()` would


process_state.hold(
    __name__,
    "_latest",
    bound="one; replaced (and shut down) by the next configure() or instrument(tracer_provider=...)",
    size=lambda: _latest is not None,
    forget=_forget_latest,
)


def activate(telemetry: Telemetry, *, set_global: bool) -> Telemetry | None:
    """Make `telemetry` the latest pipeline, its recording the current one (and the global
    provider's target unless `set_global` is False); the previous latest pipeline, which the caller
    shuts down."""
    global _latest
    with _lock:
        previous, _latest = _latest, telemetry
        current_recording.make_current(telemetry.recording, set_global=set_global)
    return previous if previous is not telemetry else None


@atexit.register
def _shutdown_at_exit() -> None:
    """Deliver what the latest pipeline holds when the process exits, within
    `OTEL_AGENTS_EXIT_TIMEOUT_S` (on the exit thread: `export/exit_thread.py`); say in one line how
    many spans were not delivered, where no outage warning has said so already. Runs still open are
    ended first (`shutdown`), whichever pipeline records them: under `opentelemetry-instrument` the
    distro's provider shuts down after this (exit handlers run last registered first, and the
    provider was made before otel-agents was loaded)."""
    end_open_runs(None)
    FLUSH_SOON.stop()  # (a flush under way goes on: the shutdown below waits for what it sends)
    latest = _latest
    if latest is None:
        return
    seconds = latest.settings.exit_timeout_s
    EXIT_THREAD.run(lambda: latest.shutdown_within(seconds, warn=False), seconds)
    lost = latest.undelivered(unannounced=True)
    if lost:  # one line, whatever the exporters said before it; an outage already warned of, none
        where = {destination for destination, _ in lost}
        logger.warning(
            "otel-agents: exiting with %d spans not delivered %s; they are dropped "
            "(the exit waits OTEL_AGENTS_EXIT_TIMEOUT_S=%g s at most). %s",
            sum(count for _, count in lost),
            f"to {lost[0][0]}" if len(lost) == 1 else f"({', '.join(f'{n} to {where}' for where, n in lost)})",
            seconds,
            "; ".join(_figures(account) for account in latest.span_accounts() if account.destination in where),
        )


def _figures(account: SpanAccount) -> str:
    """One exporter's `SpanAccount` as the exit line says it."""
    under_way = f" + {account.under_way} under way" if account.under_way else ""
    return (
        f"{account.destination}: {account.ended} ended = {account.delivered} delivered + "
        f"{account.export_failed} failed + {account.not_exported} not exported + "
        f"{account.sampled_out} sampled out{under_way}"
    )


def latest() -> Telemetry | None:
    """The latest `configure()`'s (or `instrument(tracer_provider=...)`'s) pipeline, if any."""
    return _latest


def _span_losses_of(telemetry: Telemetry) -> Callable[[], SpanLosses]:
    """What `otel_agents.spans.dropped` and `.sampled_out` read for `telemetry`, holding it weakly: a
    pipeline replaced by the next `configure()` or `instrument()` is not kept alive by its meter
    provider."""
    ref = weakref.ref(telemetry)

    def losses() -> SpanLosses:
        alive = ref()
        return alive.span_losses() if alive is not None else SpanLosses.none()

    return losses

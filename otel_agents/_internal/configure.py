"""`configure()`: settings resolved, the pipeline built, AutoGen patched, the pipeline made current."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics, trace

from otel_agents._internal import sigterm
from otel_agents._internal.autogen import patches
from otel_agents._internal.config import params
from otel_agents._internal.config.loop_limits import LoopLimits
from otel_agents._internal.config.settings import ConfigError, Sampling, Settings, load_prices, resolve_settings
from otel_agents._internal.export.exit_thread import EXIT_THREAD
from otel_agents._internal.genai.keeping import RunSummary
from otel_agents._internal.genai.prices import PriceTable
from otel_agents._internal.run.keep import nothing_to_sample
from otel_agents._internal.telemetry import Telemetry, activate

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter


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
    sample_runs: float | None = None,
    keep_runs: str | Callable[[RunSummary], object] | Sequence[str | Callable[[RunSummary], object]] | None = None,
    outcome: Callable[[Any], object] | None = None,
    set_global: bool = True,
    instrument: bool = True,
) -> Telemetry:
    """Set up tracing for AutoGen team runs and return the pipeline.

    Each argument left `None` is read from its variable (`OTEL_SERVICE_NAME`,
    `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_AGENTS_RUNTIME_SPANS`, ...), else its default. Traces go
    over OTLP when an endpoint is set, else to the embedded store (`store`: a directory, or False
    for none). A given `span_exporter` replaces that default destination and goes behind a batch
    processor (honouring `OTEL_BSP_*`). A later call re-targets the process-wide provider and
    shuts the previous pipeline down. `set_global=False` leaves OpenTelemetry's globals alone;
    AutoGen's own spans still land in their runs; spans the app starts through the global provider
    do not reach this pipeline.

    `sample_runs` (`OTEL_AGENTS_SAMPLE_RUNS`): the share of ordinary runs the exporters get, whole,
    by trace id; `keep_runs` (`OTEL_AGENTS_KEEP_RUNS`): the runs they always get whole (a comma list
    of rules, a callable of an `otel_agents.RunSummary` added to them, or a list of both). The store
    keeps every run. `outcome` (`OTEL_AGENTS_OUTCOME=module:function`): a function (sync or async)
    of the `TaskResult` or `Response` a run returned, called as it ends (bounded by 5 s), returning a
    label such as "success", (label, score), or None: the run's outcome.

    `instrument=True` (`AutoGenInstrumentor`): every AutoGen run is traced with no change to the
    app (`team.run()`, `Console(team.run_stream())`, an agent's `run`); with False, only the runs
    the app taps. A later call leaves the instrumentation as it is.
    """
    for name, flag in (("set_global", set_global), ("instrument", instrument)):
        if not isinstance(flag, bool):
            raise ConfigError(f"{name}={flag!r}: expected True or False")
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
        sample_runs=sample_runs,
        keep_runs=keep_runs,
        outcome=outcome,
        environ=env,
    )
    if settings.sampling.on and span_exporter is None and set(settings.traces_exporters) <= {"store"}:
        # only exporters sample, and there is none: said once, and nothing waits for a decision
        nothing_to_sample(settings.sampling.ratio)
        settings = dataclasses.replace(settings, sampling=Sampling())
    if span_exporter is not None:
        params.SPAN_EXPORTER.checked(span_exporter)
    if metric_readers is not None:
        params.METRIC_READERS.checked(metric_readers)
    if loop_limits is not None and not isinstance(loop_limits, LoopLimits):
        raise ConfigError(f"loop_limits={loop_limits!r}: expected an otel_agents.LoopLimits")
    limits = (loop_limits or LoopLimits()).resolved(env)  # validates OTEL_AGENTS_* thresholds
    price_table = load_prices(prices, env)
    telemetry = _build(settings, span_exporter, metric_readers, price_table, set_global=set_global)
    telemetry.loop_limits = limits
    previous = activate(telemetry, set_global=set_global)
    if previous is not None:
        previous.shutdown()
    sigterm.install()  # a SIGTERM exports what the pipeline holds before the process ends
    if not settings.disabled:
        EXIT_THREAD.start()  # while threads can start: the exit waits for its shutdown on it
    if instrument:
        _instrument_autogen()
    else:
        # what `tap` needs (model calls, tools, placement), now: a runtime built before the first
        # tap (a team's own, in its constructor) takes its tracer then
        patches.install()
    return telemetry


def _instrument_autogen() -> None:
    """`AutoGenInstrumentor().instrument()` unless it is already; on an AutoGen it does not
    support, one warning and nothing patched: the app runs as it would without otel-agents."""
    from otel_agents._internal.autogen.instrumentor import AutoGenInstrumentor

    instrumentor = AutoGenInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry or patches.unsupported_autogen() is not None:
        return  # on an AutoGen it does not support: its one warning is given, nothing is patched
    instrumentor.instrument(skip_dep_check=True)  # checked just above, once a process


def _build(
    settings: Settings,
    span_exporter: SpanExporter | None,
    metric_readers: Sequence[MetricReader] | None,
    prices: PriceTable,
    *,
    set_global: bool,
) -> Telemetry:
    if settings.disabled:
        return Telemetry(settings, trace.NoOpTracerProvider(), metrics.NoOpMeterProvider(), prices)

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    from otel_agents._internal.export import exporters, pipeline
    from otel_agents._internal.export.health import Health
    from otel_agents._internal.export.prometheus import is_scraped

    span_exporters = ([span_exporter] if span_exporter is not None else []) + exporters.span_exporters(settings)
    readers = list(metric_readers or ()) + exporters.metric_readers(settings)
    scrape_endpoint = None
    if settings.prometheus is not None:
        from otel_agents._internal.export.prometheus import PrometheusEndpoint

        scrape_endpoint = PrometheusEndpoint(*settings.prometheus)
        readers.append(scrape_endpoint.reader)
    resource = Resource.create({SERVICE_NAME: settings.service_name})
    existing = trace.get_tracer_provider() if set_global else None
    owns = not isinstance(existing, TracerProvider)
    if isinstance(existing, TracerProvider):  # the app's or the distro's: one pipeline, not two
        tracer_provider = existing
        logger.warning(
            "otel-agents: OpenTelemetry's global TracerProvider is already set up; otel-agents adds its "
            "exporters to it (its resource and sampler stay as they are) instead of starting a second one."
        )
    else:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    health = Health()
    # one exporter per name of settings.traces_exporters, in order, after the given one
    names = [None] * (len(span_exporters) - len(settings.traces_exporters)) + list(settings.traces_exporters)
    # the embedded store's processor first: the provider flushes and shuts its processors down one
    # after the other, and a local file must not wait behind an endpoint that is down (its exporter
    # retries up to its timeout, longer than the exit waits), neither at a run's end nor at exit
    exporting = sorted(zip(names, span_exporters, strict=True), key=lambda pair: pair[0] != "store")
    processors = []
    for name, exporter in exporting:
        sent_to = settings.traces.endpoint if name == "otlp" else None
        processors.append(pipeline.make_processor(exporter, settings, health, sent_to))
    added: list[SpanProcessor] = []
    sampled = []
    for (name, _), processor in zip(exporting, processors, strict=True):
        if name == "store" or not settings.sampling.on:  # the store keeps every run
            added.append(processor)
        else:
            sampled.append(processor)
    if sampled:  # the exporters get the runs that matter, whole
        from otel_agents._internal.export.sampling import RunSamplingProcessor

        sampler = RunSamplingProcessor(sampled, settings.sampling)
        health.samplers.append(sampler)
        added.append(sampler)
    for each in added:
        tracer_provider.add_span_processor(each)
    pipeline.quiet_queue_full_logs()
    exemplars = None
    if sampled:  # no exemplar names a trace the exporters never get
        from otel_agents._internal.run.exemplar_filter import VARIABLE, exemplar_filter

        exemplars = exemplar_filter(settings.sampling.ratio, params.environment([VARIABLE]).get(VARIABLE))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, exemplar_filter=exemplars, shutdown_on_exit=False
    )
    telemetry = Telemetry(
        settings,
        tracer_provider,
        meter_provider,
        prices,
        health,
        metrics_exported=bool(readers),
        owns_tracer_provider=owns,
        processors=added,
        flushed_readers=[reader for reader in readers if not is_scraped(reader)],
    )
    telemetry.prometheus = scrape_endpoint
    telemetry.recording.samples_runs = bool(sampled)
    return telemetry

"""`AutoGenInstrumentor`: otel-agents as an OpenTelemetry instrumentation of AutoGen.

Registered under the `opentelemetry_instrumentor` entry point (name `otel_agents`), so that
`opentelemetry-instrument python app.py` loads it with the distro's global providers; called by
`configure()` (its default `instrument=True`) otherwise. `instrument()` puts every wrapper of
`patches` in place and traces every run, wherever it starts; `uninstrument()` gives AutoGen back
its original functions.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from otel_agents._internal import process_state, sigterm
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import patches, wrapping
from otel_agents._internal.config.params import set_variable
from otel_agents._internal.export.global_store import store_into_global_provider
from otel_agents._internal.telemetry import adopt, configured

logger = logging.getLogger(__name__)


class AutoGenInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Trace every AutoGen run (teams' `run`/`run_stream`, agents' `run`/`run_stream`, nested
    teams), its agents' turns, model calls and tools, each run as one trace.

    `instrument(tracer_provider=None, meter_provider=None)`: with a provider given, runs are
    recorded by it (until the next `configure()`); without, by the latest `configure()`'s
    pipeline, else by OpenTelemetry's global providers (as under `opentelemetry-instrument`).
    As every OpenTelemetry instrumentor: `instrument()` on an instrumented AutoGen, or
    `uninstrument()` on one it did not instrument, changes nothing (OpenTelemetry's warning says
    so); `uninstrument()` then `instrument(tracer_provider=...)` records with another provider.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return ag.INSTRUMENTED_PACKAGES

    def _instrument(self, **kwargs: Any) -> None:
        try:
            tracer_provider = kwargs.get("tracer_provider")
            meter_provider = kwargs.get("meter_provider")
            if tracer_provider is not None or meter_provider is not None:
                adopt(tracer_provider, meter_provider)
            elif not configured():
                store_into_global_provider()  # under `opentelemetry-instrument`, when OTEL_AGENTS_STORE asks
            patches.install()
            wrapping.trace_every_run(True)
            patches.install_grpc_when_imported()
            sigterm.install()  # under the distro too: a SIGTERM exports what its provider holds
        except Exception as error:  # never into the app, and never AutoGen's content out instead
            _tracing_off(error)

    def _uninstrument(self, **kwargs: Any) -> None:
        # every original back, whoever put our wrappers there (this, `configure()`, a tap): a later
        # tap or `configure()` puts back what it needs
        wrapping.trace_every_run(False)
        wrapping.restore_all()
        sigterm.uninstall()


def _tracing_off(error: Exception) -> None:
    """otel-agents could not start: AutoGen gets its own functions back, and its runtime tracing,
    which otel-agents keeps out of AgentChat runs (the runtime's spans carry each message's JSON),
    is switched off, so that nothing of the app's content leaves through the global provider; one
    warning says so and why."""
    try:
        wrapping.trace_every_run(False)
        wrapping.restore_all()
    finally:
        name, value = ag.RUNTIME_TRACING_OFF
        set_variable(name, value)
        logger.warning(
            "otel-agents: tracing is off: it could not start (%s: %s); AutoGen's own runtime tracing is "
            "off too (%s=%s), so that no message content leaves through another exporter",
            type(error).__name__,
            error,
            name,
            value,
        )


def _uninstrument_if_instrumented() -> None:
    instrumentor = AutoGenInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


process_state.hold(
    __name__,
    "AutoGenInstrumentor",
    bound="one instrumentor (OpenTelemetry's instrumentors are singletons), instrumented or not",
    size=lambda: AutoGenInstrumentor().is_instrumented_by_opentelemetry,
    forget=_uninstrument_if_instrumented,
)

"""A run's keep decision when runs are sampled (`OTEL_AGENTS_SAMPLE_RUNS`), made as it ends, before
its span ends, so that the span says why it was kept (`otel_agents.sample.kept_because`); the
processor in front of the exporters (`export/sampling.py`) reads it there."""

from __future__ import annotations

import logging
from typing import Final

from otel_agents._internal import process_state
from otel_agents._internal.config.settings import Sampling
from otel_agents._internal.export.ratio import ratio_keeps
from otel_agents._internal.genai.keeping import RunSummary

logger = logging.getLogger(__name__)

EXIT: Final = "exit"
RATIO: Final = "ratio"
TRACE: Final = "trace"
"""Kept with its trace: the run started in a trace whose earlier run was kept."""

_warned: set[str] = set()
"""The warnings given once (a keep_runs callable that raised), at most 64."""
process_state.hold(__name__, "_warned", bound="64 warnings", size=lambda: len(_warned), forget=_warned.clear)


def decide(sampling: Sampling, summary: RunSummary, trace_id: int, *, already: str | None) -> str | None:
    """Why the run is kept, or None: it is left out. In this order: the first rule that matches
    (its name, `rule` for a callable), `trace`, `ratio`, `bound`, `exit`. `already`: what its span
    says already (`trace`: it started in a trace kept already, or its trace was kept while it ran;
    `bound`: it passed a bound while it ran; `exit`: the exporters shut down while it ran)."""
    because = sampling.rules.kept_because(summary, warn=_warn_once)
    if because is not None:
        return because
    if already == TRACE:
        return TRACE
    if ratio_keeps(sampling.ratio, trace_id):
        return RATIO
    if already:  # `bound`, or `exit` (said by the exporters' shutdown)
        return already
    if summary.stop_kind == "shutdown":  # still open at shutdown, exit or SIGTERM
        return EXIT
    return None


def not_applied(ratio: float) -> None:
    """Runs recorded by a provider otel-agents did not set up (opentelemetry-instrument's, one given
    to `instrument()`) go whole to its own span processors: said once, at the first run's end."""
    _warn_once(
        f"otel-agents: OTEL_AGENTS_SAMPLE_RUNS={ratio:g} is not applied: runs are recorded by a tracer provider "
        "otel-agents did not set up (opentelemetry-instrument's, or one given to instrument()), whose own span "
        "processors export every span. Runs are sampled where otel-agents exports: call otel_agents.configure() "
        "in the app (under opentelemetry-instrument: OTEL_TRACES_EXPORTER=none, and configure(span_exporter=...))"
    )


def nothing_to_sample(ratio: float) -> None:
    """Runs are sampled for exporters, and the pipeline has none (the embedded store keeps every
    run): said once, at `configure()`."""
    _warn_once(
        f"otel-agents: OTEL_AGENTS_SAMPLE_RUNS={ratio:g} (sample_runs) has nothing to sample: only exporters "
        "sample, and this pipeline has none (the embedded store keeps every run)"
    )


def _warn_once(text: str) -> None:
    if text not in _warned and len(_warned) < 64:
        _warned.add(text)
        logger.warning(text)

"""The instruments otel-agents records (a contract: docs/metrics.md lists them).

`gen_ai.client.token.usage` and `gen_ai.client.operation.duration` are recorded by util-genai's
handler (`genai.inference`), with the same buckets as `TOKEN_BUCKETS` and `DURATION_BUCKETS`.

Low-cardinality attributes only: model, agent, team, stop kind, token type, error type. Never a
run id. The run metrics (`gen_ai.workflow.duration`, `otel_agents.run.cost`,
`otel_agents.run.messages`, `otel_agents.runs`) also carry the keys OTEL_AGENTS_METRIC_ATTRIBUTES
names (off by default) when the run was given them through `run_attributes(attributes=...)`; a run
without one has no such attribute (Prometheus shows that as the label being empty). Baggage never
becomes a metric attribute. Histogram points recorded inside a run carry its trace as an exemplar
where the exporter supports exemplars (OTLP does); with runs sampled, only traces the exporters get
(`run/exemplars.py`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry import metrics
from opentelemetry.context import Context

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state
from otel_agents._internal.genai.outcomes import LABELS_A_NAME, NAMES, OTHER, Outcome
from otel_agents._internal.per_provider import PerProvider
from otel_agents._version import SCHEMA_URL, __version__

TOKEN_BUCKETS: Final = tuple(4.0**i for i in range(14))  # 1, 4, 16, ... 67108864
DURATION_BUCKETS: Final = tuple(0.01 * 2**i for i in range(14))  # 0.01 ... 81.92
WORKFLOW_DURATION_BUCKETS: Final = (1.0, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)
RUN_COST_BUCKETS: Final = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 50)
RUN_MESSAGES_BUCKETS: Final = tuple(float(2**i) for i in range(11))  # 1, 2, 4, ... 1024


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _present(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}


def _encodable(labels: dict[str, Any]) -> dict[str, Any]:
    """The labels with each lone surrogate (a team named from a `surrogateescape`d file name) as
    U+FFFD, as spans export it: Prometheus's page is UTF-8 (one such label fails every scrape from
    then on) and OTLP's encoder drops the label."""
    return {k: _SURROGATE.sub("\ufffd", v) if type(v) is str and not v.isascii() else v for k, v in labels.items()}


@dataclass(frozen=True, slots=True)
class SpanLosses:
    """Spans meant for the exporters and not delivered, by why (`Health`)."""

    export_failed: int
    not_exported: int
    sampled_out: int

    @staticmethod
    def none() -> SpanLosses:
        return SpanLosses(0, 0, 0)


def _span_count(
    meter: metrics.Meter,
    name: str,
    description: str,
    observe: Callable[[], Iterable[metrics.Observation]],
) -> metrics.ObservableCounter:
    """A counter of spans whose totals `observe()` tells when metrics are collected."""

    def callback(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return list(observe())

    return meter.create_observable_counter(name, callbacks=[callback], unit="{span}", description=description)


class _SpanCounts:
    """The span counters of one meter provider, made once: a meter provider keeps the callbacks
    of the first instruments of a name, so they read whichever pipeline records to it now (what
    they read is given by that pipeline, and holds it weakly: a pipeline replaced by the next
    `configure()` or `instrument()` is not kept alive by them)."""

    def __init__(self, meter: metrics.Meter) -> None:
        self.read_losses: Callable[[], SpanLosses] = SpanLosses.none
        self.read_unplaced: Callable[[], int] = lambda: 0
        self.dropped = _span_count(
            meter,
            "otel_agents.spans.dropped",
            "Spans the pipeline could not deliver, by otel_agents.drop.reason: export_failed (the exporter "
            "failed or refused), not_exported (a full queue, or cut at shutdown or exit); what a full queue "
            "dropped is never counted too high, and exactly once a flush or shutdown is done",
            self._dropped,
        )
        self.sampled_out = _span_count(
            meter,
            "otel_agents.spans.sampled_out",
            "Spans of runs left out by run sampling (OTEL_AGENTS_SAMPLE_RUNS): never meant for the exporters",
            lambda: [metrics.Observation(self.read_losses().sampled_out)],
        )
        self.unplaced = _span_count(
            meter,
            "otel_agents.spans.unplaced",
            "Spans placed under their sender because their cause's registry entry had been dropped",
            lambda: [metrics.Observation(self.read_unplaced())],
        )

    def _dropped(self) -> list[metrics.Observation]:
        losses = self.read_losses()
        return [
            metrics.Observation(losses.export_failed, {sc.DROP_REASON: sc.DROP_EXPORT_FAILED}),
            metrics.Observation(losses.not_exported, {sc.DROP_REASON: sc.DROP_NOT_EXPORTED}),
        ]


_span_counts: PerProvider[_SpanCounts] = PerProvider()
process_state.hold(
    __name__,
    "_span_counts",
    bound="weak per meter provider; kept while it lives (its gauges read them)",
    size=_span_counts.__len__,
    forget=None,
)


def _span_counts_of(
    meter_provider: metrics.MeterProvider,
    meter: metrics.Meter,
    losses: Callable[[], SpanLosses],
    unplaced: Callable[[], int],
) -> _SpanCounts:
    counts = _span_counts.setdefault(meter_provider, lambda: _SpanCounts(meter))
    counts.read_losses, counts.read_unplaced = losses, unplaced
    return counts


class Instruments:
    """The instruments, on `meter_provider`; or, when nothing exports its metrics (`exported=False`:
    our own pipeline built with no metric reader), no-op ones and no measurement made at all: a
    measurement costs more than a span here, and nobody would read it."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider,
        *,
        label_keys: tuple[str, ...] = (),
        exported: bool = True,
        span_losses: Callable[[], SpanLosses] = SpanLosses.none,
        unplaced_spans: Callable[[], int] = lambda: 0,
    ) -> None:
        """`span_losses`, `unplaced_spans`: what `otel_agents.spans.dropped`,
        `otel_agents.spans.sampled_out` and `otel_agents.spans.unplaced` read when metrics are
        collected (holding no pipeline strongly)."""
        self.exported = exported
        self.label_keys: tuple[str, ...] = label_keys
        """The run attributes that label the run metrics (OTEL_AGENTS_METRIC_ATTRIBUTES)."""
        recorded_by = meter_provider if exported else metrics.NoOpMeterProvider()
        meter = recorded_by.get_meter("otel_agents", __version__, SCHEMA_URL)
        self.workflow_duration = meter.create_histogram(
            "gen_ai.workflow.duration",
            unit="s",
            description="Duration of team runs",
            explicit_bucket_boundaries_advisory=WORKFLOW_DURATION_BUCKETS,
        )
        self.cost = meter.create_counter(
            "otel_agents.cost", unit="USD", description="Cost of model calls, by team, agent and model"
        )
        self.run_cost = meter.create_histogram(
            "otel_agents.run.cost",
            unit="USD",
            description="Cost of one team run (runs whose every call was priced)",
            explicit_bucket_boundaries_advisory=RUN_COST_BUCKETS,
        )
        self.run_messages = meter.create_histogram(
            "otel_agents.run.messages",
            unit="{message}",
            description="Messages streamed by one team run",
            explicit_bucket_boundaries_advisory=RUN_MESSAGES_BUCKETS,
        )
        self.runs = meter.create_counter("otel_agents.runs", unit="{run}", description="Team runs, by stop kind")
        self.tokens_unpriced = meter.create_counter(
            "otel_agents.tokens.unpriced",
            unit="{token}",
            description="Tokens of model calls whose model has no price",
        )
        self.calls_usage_unknown = meter.create_counter(
            "otel_agents.calls.usage_unknown",
            unit="{call}",
            description="Model calls whose client reported no usage (a stream without usage): tokens and cost unknown",
        )
        self.loop_detections = meter.create_counter(
            "otel_agents.loop.detections", unit="{detection}", description="Runaway-loop rules a run broke"
        )
        self.run_outcomes = meter.create_counter(
            "otel_agents.run.outcomes",
            unit="{run}",
            description="Runs by the outcome recorded for them, by team, outcome name and label",
        )
        self._outcome_lock = threading.Lock()
        process_state.new_locks_in_forked_child(self, "_outcome_lock")
        self._outcome_labels: dict[str, set[str]] = {}
        """Per outcome name the labels counted so far (at most `LABELS_A_NAME`; the rest `other`)."""

        # `otel_agents.spans.dropped`, `.sampled_out` and `.unplaced`, observed when collected
        self.span_counts = _span_counts_of(meter_provider, meter, span_losses, unplaced_spans) if exported else None

    def model_call_cost(
        self,
        cost_usd: float,
        *,
        model: str | None,
        agent: str | None,
        workflow: str | None,
        context: Context,
    ) -> None:
        """One priced model call's cost, recorded in the context of its span (for exemplars).

        The call's tokens and duration (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`)
        are util-genai's: `genai.inference` records them."""
        if not self.exported:
            return
        labels = {sc.GEN_AI_WORKFLOW_NAME: workflow, sc.GEN_AI_AGENT_NAME: agent, sc.GEN_AI_REQUEST_MODEL: model}
        self.cost.add(cost_usd, _encodable(_present(labels)), context=context)

    def outcome(self, *, workflow: str, outcome: Outcome, context: Context | None = None) -> None:
        """One outcome of a run (its name and label bounded: at most 20 of each, the rest `other`)."""
        if not self.exported:
            return
        with self._outcome_lock:  # from any thread: the bounds hold
            labels = self._outcome_labels
            name = outcome.name if outcome.name in labels or len(labels) < NAMES else OTHER
            seen = labels.setdefault(name, set())
            label = outcome.label if outcome.label in seen or len(seen) < LABELS_A_NAME else OTHER
            seen.add(label)
        self.run_outcomes.add(
            1,
            _encodable(
                {
                    sc.GEN_AI_WORKFLOW_NAME: workflow,
                    sc.GEN_AI_EVALUATION_NAME: name,
                    sc.GEN_AI_EVALUATION_SCORE_LABEL: label,
                }
            ),
            context=context,
        )

    def run_ended(
        self,
        *,
        workflow: str,
        stop_kind: str,
        duration_s: float,
        messages: int,
        cost_usd: float | None,
        context: Context,
        run_attributes: Mapping[str, str | bool | int | float] | None = None,
    ) -> None:
        """One team run, recorded in the context of its run span (for exemplars). `run_attributes`:
        what `run_attributes(attributes=...)` gave the run (never baggage)."""
        if not self.exported:
            return
        labels = _encodable({**self._labels(run_attributes), sc.GEN_AI_WORKFLOW_NAME: workflow})
        by_kind = {**labels, sc.STOP_KIND: stop_kind}
        self.workflow_duration.record(duration_s, by_kind, context=context)
        self.run_messages.record(messages, by_kind, context=context)
        self.runs.add(1, by_kind, context=context)
        if cost_usd is not None:
            self.run_cost.record(cost_usd, labels, context=context)

    def _labels(self, run_attributes: Mapping[str, str | bool | int | float] | None) -> dict[str, str]:
        """The chosen keys the run has, as text (`2` and `"2"`, `True` and `"true"` are one series,
        as they are one label value in Prometheus); a key the run lacks is left out, not set empty."""
        if not self.label_keys or not run_attributes:
            return {}
        return {key: _label_text(run_attributes[key]) for key in self.label_keys if key in run_attributes}


def _label_text(value: str | bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)

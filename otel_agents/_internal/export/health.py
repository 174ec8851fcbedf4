"""`Health`: what a pipeline lost (spans of failed exports, spans its queues dropped), read by
`Telemetry.dropped_spans`, the `otel_agents.spans.dropped` counter and the exit's one-line report."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from otel_agents._internal.export.fork import reset_in_forked_child


class _Guarded(Protocol):
    @property
    def destination(self) -> str: ...

    @property
    def delivered_spans(self) -> int: ...

    @property
    def failed_spans(self) -> int: ...

    @property
    def outage_warned(self) -> bool: ...


class Processor(Protocol):
    """What health reads of a span processor of ours (`pipeline.BoundedBatchSpanProcessor`)."""

    @property
    def guarded(self) -> _Guarded: ...

    @property
    def ended_spans(self) -> int: ...

    @property
    def dropped_before_export(self) -> int: ...

    def limit_shutdown(self, seconds: float) -> None: ...

    def close(self) -> None: ...


class Sampler(Protocol):
    """What health reads of the processor that samples runs (`sampling.RunSamplingProcessor`)."""

    @property
    def processors(self) -> Sequence[Processor]: ...

    @property
    def ended_spans(self) -> int: ...

    @property
    def sampled_out_spans(self) -> int: ...

    @property
    def waiting_spans(self) -> int: ...


@dataclass(frozen=True)
class SpanAccount:
    """Where the spans meant for one exporter went: `ended` = `delivered` + `export_failed` +
    `not_exported` + `sampled_out` + `under_way`. After a `force_flush()` that returned True, what
    is under way of the spans ended before it waits for a run still open (run sampling); from
    shutdown on, nothing is."""

    destination: str
    """The exporter, and the endpoint it was configured with."""
    ended: int
    """Sampled spans ended in the pipeline that feeds this exporter."""
    delivered: int
    export_failed: int
    """Spans of batches the exporter failed or refused (`otel_agents.drop.reason` `export_failed`)."""
    not_exported: int
    """Spans never handed to the exporter: a full queue, or cut at shutdown or exit (`not_exported`)."""
    sampled_out: int
    """Spans of runs left out (`OTEL_AGENTS_SAMPLE_RUNS`): never meant for the exporter."""

    @property
    def dropped(self) -> int:
        return self.export_failed + self.not_exported

    @property
    def under_way(self) -> int:
        """Spans still waiting for their run's decision, queued, or being exported."""
        return self.ended - self.delivered - self.dropped - self.sampled_out


@dataclass(eq=False)  # compared and hashed as itself (kept in a WeakSet)
class Health:
    """What the pipeline lost: spans of failed exports, and spans its queues dropped."""

    failed_export_spans: int = 0
    processors: list[Processor] = field(default_factory=list)
    samplers: list[Sampler] = field(default_factory=list)
    """The processors that sample runs in front of some of `processors`."""
    quiet: bool = False
    """Set as the exit shuts the pipeline down: an export it cuts short warns of no outage (the
    exit says in one line what was not delivered)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def dropped_spans(self) -> int:
        return self.failed_export_spans + self.not_exported_spans

    @property
    def not_exported_spans(self) -> int:
        return sum(p.dropped_before_export for p in self.processors)

    @property
    def sampled_out_spans(self) -> int:
        return sum(s.sampled_out_spans for s in self.samplers)

    def accounts(self) -> list[SpanAccount]:
        """One `SpanAccount` per exporter, in the order the pipeline feeds them."""
        behind = {id(p): s for s in self.samplers for p in s.processors}
        accounts = []
        for processor in self.processors:
            sampler = behind.get(id(processor))
            guarded = processor.guarded
            accounts.append(
                SpanAccount(
                    destination=guarded.destination,
                    ended=sampler.ended_spans if sampler is not None else processor.ended_spans,
                    delivered=guarded.delivered_spans,
                    export_failed=guarded.failed_spans,
                    not_exported=processor.dropped_before_export,
                    sampled_out=sampler.sampled_out_spans if sampler is not None else 0,
                )
            )
        return accounts

    def undelivered(self, *, unannounced: bool = False) -> list[tuple[str, int]]:
        """(destination, spans ended and not delivered there) of each exporter missing some: spans
        dropped, failed, still queued or still being exported. `unannounced`: only the exporters
        whose outage under way no warning has named (one warning per outage)."""
        missing = [
            (p.guarded.destination, p.ended_spans - p.guarded.delivered_spans)
            for p in self.processors
            if not (unannounced and p.guarded.outage_warned)
        ]
        return [(destination, count) for destination, count in missing if count > 0]

    def add_failed(self, count: int) -> None:
        with self._lock:
            self.failed_export_spans += count

    def close(self) -> None:
        """After shutdown: whatever a processor has not handed to its exporter counts as dropped."""
        for processor in self.processors:
            processor.close()

    def __post_init__(self) -> None:
        reset_in_forked_child(self)

    def reset_after_fork(self) -> None:
        """A forked child counts what it loses, not what its parent lost."""
        self._lock = threading.Lock()
        self.failed_export_spans = 0

"""`Health`: what a pipeline lost (spans of failed exports, spans its queues dropped), read by
`Telemetry.dropped_spans`, the `otel_agents.spans.dropped` counter and the exit's one-line report."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from otel_agents._internal.export.fork import reset_in_forked_child


class _Guarded(Protocol):
    @property
    def destination(self) -> str: ...

    @property
    def delivered_spans(self) -> int: ...

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


@dataclass(eq=False)  # compared and hashed as itself (kept in a WeakSet)
class Health:
    """What the pipeline lost: spans of failed exports, and spans its queues dropped."""

    failed_export_spans: int = 0
    processors: list[Processor] = field(default_factory=list)
    quiet: bool = False
    """Set as the exit shuts the pipeline down: an export it cuts short warns of no outage (the
    exit says in one line what was not delivered)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def dropped_spans(self) -> int:
        return self.failed_export_spans + sum(p.dropped_before_export for p in self.processors)

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

"""The span registry: which run each span of a run belongs to, bounded in memory by design.

Placement (`tracing.placement`) asks it, for the parent or the linked sender of a span being
started, which run that span belongs to, and under which turn (*anchor*) and workflow. Entries:

- per run (or per trace followed from another process) a `Trail`: span id -> `Node` for the
  spans whose id a later span may name as its cause (workflows, agent turns, runtime spans when
  `nested`), at most `NODES_PER_TRAIL`, least recently used dropped first. A span whose cause was
  dropped is placed under its sender in the same trace, outside the run's totals, and counted
  (`unplaced`, the metric `otel_agents.spans.unplaced`). Workflow spans are never dropped;
- the span ids of the last `ENDED_RUNS_KEPT` ended runs (at most `ENDED_SPANS_KEPT` ids in all,
  the oldest runs' forgotten first), for at most `ENDED_KEPT_S` seconds, so that late spans they
  cause (AutoGen acknowledging a message, or finishing a team whose consumer left, after the run
  span ended) are dropped rather than started as traces of their own, also in a service where many
  other runs end meanwhile;
- traces followed from other processes (gRPC) or from runtime spans outside any tapped run: at most
  `FOLLOWED_KEPT`, each forgotten after `FOLLOWED_IDLE_S` seconds without a span placed in it
  (checked whenever a trace starts being followed and whenever a run ends).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext

from otel_agents._internal import process_state
from otel_agents._internal.config.settings import RuntimeSpans
from otel_agents._internal.tracing.state import Run

NODES_PER_TRAIL: Final = 1024
"""Placement entries kept per run or followed trace (least recently used dropped first)."""
ENDED_RUNS_KEPT: Final = 64
ENDED_SPANS_KEPT: Final = 8192
ENDED_KEPT_S: Final = 30.0
FOLLOWED_KEPT: Final = 64
FOLLOWED_IDLE_S: Final = 300.0
FOLLOWED: Final = "followed"
"""The workflow name of the run that stands for a followed trace."""


@dataclass(frozen=True, slots=True)
class Node:
    """Where the spans caused by one registered span go."""

    trail: Trail
    anchor: SpanContext
    """The agent turn or workflow the span belongs to: runtime spans it causes go under it."""
    workflow: SpanContext
    """The run span, or the span of the nested team, the span belongs to."""
    is_runtime: bool
    agent: str | None = None
    """The agent whose turn this span is in, if any."""

    @property
    def run(self) -> Run:
        return self.trail.run


class Trail:
    """The registry's entries for one run or followed trace."""

    __slots__ = ("dropped", "followed", "last_used", "nodes", "pinned", "run", "stand_in", "trace_id", "under_anchor")

    def __init__(self, run: Run, trace_id: int, *, followed: bool = False) -> None:
        self.run = run
        self.trace_id = trace_id
        self.followed = followed
        """A trace started elsewhere, followed here (not a run started here)."""
        self.dropped = 0
        """Entries dropped so far to stay within `NODES_PER_TRAIL`."""
        self.nodes: OrderedDict[int, Node] = OrderedDict()
        """Span id -> node, least recently used first, at most `NODES_PER_TRAIL`."""
        self.pinned: dict[int, Node] = {}
        """Open workflow spans (the run's, a nested team's while it runs): never dropped."""
        self.under_anchor: OrderedDict[int, tuple[Context, Node]] = OrderedDict()
        """Per anchor span id: the parent context and node of the runtime spans placed under it
        (at most `NODES_PER_TRAIL`, oldest dropped first)."""
        self.last_used = time.monotonic()
        self.stand_in: trace.NonRecordingSpan | None = None
        """The last stand-in handed out for an unrecorded runtime span (`stand_in_for`)."""

    def stand_in_for(self, context: SpanContext) -> trace.NonRecordingSpan:
        """A span that records nothing, with `context`: the last one handed out when it has that
        very context (runtime spans the run does not record come some fifty a 5-message run, most
        in a row under the same span; a stand-in holds nothing else)."""
        stand_in = self.stand_in
        if stand_in is None or stand_in.get_span_context() is not context:
            stand_in = self.stand_in = trace.NonRecordingSpan(context)
        return stand_in

    def span_ids(self) -> list[int]:
        return [*self.nodes, *self.pinned]


class Registry:
    """Span id -> Node for the spans of active runs and followed traces (see the module docstring).

    Every change happens under one lock: several event loops in several threads may trace runs.
    The reads on every span's path (`lookup`'s entry, `placed_under`'s first look, `of_ended_run`'s
    membership tests) are made without it: each is one operation on a dict or set, atomic under
    CPython's GIL (free-threaded builds are neither supported nor tested), and an answer a concurrent change makes
    stale is one the same span could have had a moment earlier or later (a run that just ended drops
    it: `_keep` and `placed_under` look at `run.ended` again under the lock).
    """

    def __init__(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._runs_by_trace: dict[int, list[Trail]] = {}
        self._followed: OrderedDict[int, Trail] = OrderedDict()
        self._ended: deque[tuple[float, frozenset[int]]] = deque()
        self._ended_ids: set[int] = set()
        self._lock = threading.RLock()
        """Re-entrant: a stream dropped in a reference cycle ends its run (and so comes here) from
        the garbage collector, which may run inside an allocation made under this very lock."""
        self.unplaced = 0
        """Spans whose cause's entry had been dropped: placed under their sender, outside run totals."""

    # --- runs ----------------------------------------------------------------------------------

    def open(self, run: Run, workflow: SpanContext) -> Trail:
        """Start keeping the spans of `run`, whose run span is `workflow`."""
        trail = Trail(run, workflow.trace_id)
        with self._lock:
            self._runs_by_trace.setdefault(workflow.trace_id, []).append(trail)
        self.add_workflow(trail, workflow)
        return trail

    def add_workflow(self, trail: Trail, span_context: SpanContext) -> Node:
        """Register a workflow span (a run, or a nested team): its own anchor and workflow."""
        node = Node(trail, span_context, span_context, is_runtime=False)
        if span_context.is_valid:
            with self._lock:
                if not trail.run.ended:
                    trail.pinned[span_context.span_id] = node
                    self._nodes[span_context.span_id] = node
        return node

    def close_workflow(self, trail: Trail, span_context: SpanContext) -> None:
        """A nested team's span has ended: its entry is kept, but may now be dropped like any other."""
        with self._lock:
            node = trail.pinned.pop(span_context.span_id, None)
            if node is not None and not trail.run.ended:
                self._keep(trail, span_context.span_id, node)

    def add(self, span_context: SpanContext, node: Node) -> None:
        if span_context.is_valid:
            with self._lock:
                self._keep(node.trail, span_context.span_id, node)

    def _keep(self, trail: Trail, span_id: int, node: Node) -> None:
        """Under the lock: one entry (none once the run has ended), the least recently used
        dropped beyond the bound."""
        if trail.run.ended:
            return
        nodes = trail.nodes
        nodes[span_id] = node
        self._nodes[span_id] = node
        if trail.followed:  # in use: the last to be forgotten
            trail.last_used = time.monotonic()
            if trail.trace_id in self._followed:
                self._followed.move_to_end(trail.trace_id)
        while len(nodes) > NODES_PER_TRAIL:
            dropped, _ = nodes.popitem(last=False)
            self._nodes.pop(dropped, None)
            trail.under_anchor.pop(dropped, None)
            trail.dropped += 1

    def placed_under(
        self, trail: Trail, anchor: SpanContext, make: Callable[[], tuple[Context, Node]]
    ) -> tuple[Context, Node]:
        """The parent context and node shared by the runtime spans placed under `anchor`."""
        placed = trail.under_anchor.get(anchor.span_id)
        if placed is not None:
            return placed
        with self._lock:
            placed = trail.under_anchor.get(anchor.span_id)
            if placed is None:
                placed = make()
                if not trail.run.ended:
                    trail.under_anchor[anchor.span_id] = placed
                    while len(trail.under_anchor) > NODES_PER_TRAIL:
                        trail.under_anchor.popitem(last=False)
            return placed

    def end(self, trail: Trail) -> None:
        """Forget the run's spans, remembering their ids for a while: late spans they cause are dropped."""
        now = time.monotonic()
        with self._lock:
            trail.run.ended = True
            ids = frozenset(trail.span_ids())
            for span_id in ids:
                self._nodes.pop(span_id, None)
            trail.nodes.clear()
            trail.pinned.clear()
            trail.under_anchor.clear()
            trail.stand_in = None
            runs = self._runs_by_trace.get(trail.trace_id)
            if runs is not None and trail in runs:
                runs.remove(trail)
                if not runs:
                    self._runs_by_trace.pop(trail.trace_id, None)
            self._ended.append((now, ids))
            self._ended_ids.update(ids)
            self._forget_ended(now)
            self._forget_followed(now)

    def _forget_ended(self, now: float) -> None:
        ended = self._ended
        while ended and (
            len(ended) > ENDED_RUNS_KEPT or len(self._ended_ids) > ENDED_SPANS_KEPT or now - ended[0][0] > ENDED_KEPT_S
        ):
            self._ended_ids.difference_update(ended.popleft()[1])

    # --- lookups -------------------------------------------------------------------------------

    def lookup(self, span_context: SpanContext | None) -> Node | None:
        # Only valid span contexts are added, so an invalid one (span id 0) finds nothing.
        if span_context is None:
            return None
        span_id = span_context.span_id
        node = self._nodes.get(span_id)
        if node is not None and span_id in node.trail.nodes:  # else a workflow span: pinned
            # used: dropped last. One C call on the ordered dict, whole under the GIL (or the
            # object's own lock without it): no lock of ours, some 20 a 5-message run
            try:
                node.trail.nodes.move_to_end(span_id)
            except KeyError:  # dropped meanwhile
                pass
        return node

    def lookup_links(self, links: Sequence[Link] | None) -> Node | None:
        if links:
            for link in links:
                node = self.lookup(link.context)
                if node is not None:
                    return node
        return None

    def dropped_cause(self, links: Sequence[Link]) -> tuple[SpanContext, Trail] | None:
        """The linked sender of a span, and its run's trail, when the sender is in the trace of an
        active run that has dropped entries (at most `NODES_PER_TRAIL` are kept a run), is no
        longer registered, and belongs to no recently ended run."""
        if self.of_ended_run(None, links) is not None:
            return None
        with self._lock:
            for link in links:
                if not link.context.is_valid:
                    continue
                for trail in reversed(self._runs_by_trace.get(link.context.trace_id, ())):
                    if trail.dropped:
                        return link.context, trail
        return None

    def count_unplaced(self) -> None:
        with self._lock:
            self.unplaced += 1

    def of_ended_run(self, span_context: SpanContext | None, links: Sequence[Link] | None) -> SpanContext | None:
        """The parent or linked span that belongs to a recently ended run, if any."""
        ended = self._ended_ids
        if not ended:
            return None
        with self._lock:
            self._forget_ended(time.monotonic())
        if span_context is not None and span_context.is_valid and span_context.span_id in ended:
            return span_context
        for link in links or ():
            if link.context.span_id in ended:
                return link.context
        return None

    def followed(self, trace_id: int, provider: trace.TracerProvider, runtime_spans: RuntimeSpans) -> Trail:
        """The trail that stands for a trace started elsewhere (another process, or outside any run)."""
        now = time.monotonic()
        with self._lock:
            trail = self._followed.pop(trace_id, None)
            if trail is None:
                run = Run(provider=provider, runtime_spans=runtime_spans, workflow=FOLLOWED)
                trail = Trail(run, trace_id, followed=True)
            trail.last_used = now
            self._followed[trace_id] = trail  # most recently started or used last
            self._forget_followed(now)
            return trail

    def _forget_followed(self, now: float) -> None:
        """Under the lock: followed traces idle for `FOLLOWED_IDLE_S`, and the least recently used
        beyond `FOLLOWED_KEPT`, are forgotten."""
        followed = self._followed
        for trail in list(followed.values()):
            if len(followed) <= FOLLOWED_KEPT and now - trail.last_used <= FOLLOWED_IDLE_S:
                continue
            if followed.get(trail.trace_id) is not trail:
                # forgotten meanwhile: a collection in this loop ended a stream's run, which came
                # here again under the (re-entrant) lock
                continue
            del followed[trail.trace_id]
            trail.run.ended = True  # a span placed from an entry looked up before now adds nothing
            for span_id in trail.span_ids():
                self._nodes.pop(span_id, None)
            trail.nodes.clear()
            trail.under_anchor.clear()
            trail.stand_in = None

    # --- what is kept ---------------------------------------------------------------------------

    def entries(self, trace_id: int) -> int:
        """Placement entries kept for a trace: its active runs' and its followed trail's."""
        with self._lock:
            trails = [*self._runs_by_trace.get(trace_id, ()), *filter(None, [self._followed.get(trace_id)])]
            return sum(len(t.nodes) + len(t.pinned) for t in trails)

    @property
    def remembered_ended_spans(self) -> int:
        """Span ids of recently ended runs still remembered."""
        return len(self._ended_ids)

    @property
    def followed_traces(self) -> int:
        return len(self._followed)

    def __len__(self) -> int:
        """Placement entries kept, all traces together."""
        return len(self._nodes)

    def held(self) -> int:
        """Everything kept: placement entries, active runs, followed traces, ended runs and their spans
        remembered (not `unplaced`, a count)."""
        return (
            len(self._nodes) + len(self._runs_by_trace) + len(self._followed) + len(self._ended) + len(self._ended_ids)
        )

    def clear(self) -> None:
        """Forget every run, followed trace and ended span (`process_state.reset`); `unplaced` goes on
        counting (a cumulative metric reads it, and must not go down)."""
        with self._lock:
            for trail in [*(t for runs in self._runs_by_trace.values() for t in runs), *self._followed.values()]:
                trail.run.ended = True
            self._nodes.clear()
            self._runs_by_trace.clear()
            self._followed.clear()
            self._ended.clear()
            self._ended_ids.clear()


REGISTRY: Final = Registry()
process_state.new_locks_in_forked_child(REGISTRY, "_lock")
process_state.hold(
    __name__,
    "REGISTRY",
    bound="per run, released at its end; ended spans and followed traces bounded above; the count of "
    "unplaced spans is cumulative",
    size=REGISTRY.held,
    forget=REGISTRY.clear,
)

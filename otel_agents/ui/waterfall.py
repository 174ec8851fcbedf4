"""The trace of a run as the page draws it: the tree `show` draws (spans depth first), on one time
axis, folded where it must be so that a run of 30,000 spans still opens at once.

At most `ROW_BUDGET` rows are drawn. Depth first, a span whose whole subtree fits in the rows left
is drawn with it; one that does not is drawn with its children folded into one row that says how
many spans it holds and opens it (`?open=SPAN_ID`): the page then draws that subtree, folded the
same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from otel_agents._internal import keys as sc
from otel_agents._internal.report.trace import failed

if TYPE_CHECKING:
    from otel_agents._internal.export.store.reader import StoredSpan

ROW_BUDGET: Final = 1500
"""The most rows a run page draws at once."""


@dataclass(frozen=True)
class Row:
    span: StoredSpan
    depth: int
    x: float
    """Where the span starts, as a share (0-1) of the run's time axis."""
    width: float
    """How long it runs, as a share of the axis (at least a sliver, so every span shows)."""
    folded: int
    """Spans under it not drawn (0: its children are drawn, or it has none)."""
    children: int
    failed: bool
    kind: str
    """The span's operation (`chat`, `invoke_agent`, `execute_tool`, ...), for its colour."""
    cost_micro_usd: int | None

    @property
    def duration_s(self) -> float:
        return (self.span.end_ns - self.span.start_ns) / 1e9


@dataclass(frozen=True)
class Waterfall:
    rows: list[Row]
    start_ns: int
    end_ns: int
    spans: int
    """All spans of the run (drawn or folded)."""
    orphans: int
    """Spans whose parent is not stored (the trace was cut short: a span lost on the way)."""
    opened: str | None


def waterfall(
    spans: Sequence[StoredSpan], costs: Mapping[str, int | None], opened: str | None = None, budget: int = ROW_BUDGET
) -> Waterfall:
    """`spans` (one run's) as rows; `opened`: a span whose subtree is the one drawn."""
    ids = {s.span_id: s for s in spans}
    children: dict[str, list[StoredSpan]] = {}
    roots: list[StoredSpan] = []
    orphans = 0
    for span in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if span.parent_span_id and span.parent_span_id in ids:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
            orphans += 1 if span.parent_span_id else 0
    if opened is not None and opened in ids:
        roots = [ids[opened]]
    else:
        opened = None
    order: list[StoredSpan] = []
    walk = list(roots if opened is None else [ids[opened]])
    while walk:  # preorder; reversed, every span comes after its children
        span = walk.pop()
        order.append(span)
        walk += children.get(span.span_id, [])
    size: dict[str, int] = {}
    for span in reversed(order):
        size[span.span_id] = 1 + sum(size[c.span_id] for c in children.get(span.span_id, ()))
    start = min((s.start_ns for s in roots), default=0)
    end = max((s.end_ns for s in roots), default=start)
    total = max(end - start, 1)
    rows: list[Row] = []
    left = budget
    pending: list[tuple[int, StoredSpan]] = [(0, root) for root in reversed(roots)]
    while pending and left > 0:
        depth, span = pending.pop()
        kids = children.get(span.span_id, [])
        under = size.get(span.span_id, 1) - 1
        unfold = under <= left - 1 or (left - 1 >= len(kids) and len(kids) <= 50)
        rows.append(
            Row(
                span=span,
                depth=depth,
                x=(span.start_ns - start) / total,
                width=max((span.end_ns - span.start_ns) / total, 0.002),
                folded=0 if unfold or not kids else under,
                children=len(kids),
                failed=failed(span),
                kind=str(span.attributes.get(sc.GEN_AI_OPERATION_NAME) or "other"),
                cost_micro_usd=costs.get(span.span_id) if sc.COST_USD in span.attributes else None,
            )
        )
        left -= 1
        if unfold:
            pending += [(depth + 1, child) for child in reversed(kids)]
    return Waterfall(rows, start, end, len(spans), orphans, opened)

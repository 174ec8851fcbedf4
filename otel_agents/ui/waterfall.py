"""The trace of a run as the page draws it: the tree `show` draws (spans depth first), on one time
axis, folded where it must be so that a run of 30,000 spans still opens at once.

At most `ROW_BUDGET` rows are drawn. Breadth first, a span's children are drawn when all of them
fit in the rows left; a span whose children do not fit is drawn folded, in one row that says how
many spans it holds and opens it (`?open=SPAN_ID`): the page then draws that subtree, folded the
same way. So a run of 1,000 turns shows every turn, the first ones opened; a span with more
children than the page draws (a run of 10,000 turns) shows them a page at a time (`&skip=N`), with
a row before and after that leads to the others."""

from __future__ import annotations

from collections import deque
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
    is_more: bool = False

    @property
    def duration_s(self) -> float:
        return (self.span.end_ns - self.span.start_ns) / 1e9


@dataclass(frozen=True)
class More:
    """In place of a span's children that are not drawn: `count` of them, before or after the
    drawn ones; its link opens the parent from `skip`."""

    parent: str
    depth: int
    count: int
    skip: int
    before: bool
    is_more: bool = True


@dataclass(frozen=True)
class Waterfall:
    rows: list[Row | More]
    start_ns: int
    end_ns: int
    spans: int
    """All spans of the run (drawn or folded)."""
    orphans: int
    """Spans whose parent is not stored (the trace was cut short: a span lost on the way)."""
    opened: str | None
    skip: int = 0
    """Of the opened span's children, how many come before the drawn ones."""

    @property
    def drawn(self) -> int:
        """The spans drawn (rows that are spans)."""
        return sum(1 for row in self.rows if not row.is_more)


def waterfall(
    spans: Sequence[StoredSpan],
    costs: Mapping[str, int | None],
    opened: str | None = None,
    budget: int = ROW_BUDGET,
    skip: int = 0,
) -> Waterfall:
    """`spans` (one run's) as rows; `opened`: a span whose subtree is the one drawn, from its
    `skip`-th child when it has more children than the page draws."""
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
    walk = list(roots)
    while walk:  # preorder; reversed, every span comes after its children
        span = walk.pop()
        order.append(span)
        walk += children.get(span.span_id, [])
    size: dict[str, int] = {}
    for span in reversed(order):
        size[span.span_id] = 1 + sum(size[c.span_id] for c in children.get(span.span_id, ()))

    # which children are drawn: breadth first, all of a span's children or none; the one top span
    # (the run's, or the opened one) a page of them when they cannot all be
    drawn: dict[str, list[StoredSpan]] = {}
    paged: dict[str, tuple[int, int]] = {}  # span id -> (children before the drawn ones, after)
    top = roots[0] if len(roots) == 1 else None
    left = budget - len(roots)
    queue = deque(roots)
    while queue and left > 0:
        span = queue.popleft()
        kids = children.get(span.span_id, [])
        if not kids:
            continue
        if len(kids) <= left:
            shown = kids
        elif span is top:
            first = min(max(skip, 0), len(kids) - 1)
            room = max(left - (1 if first else 0) - 1, 1)  # a row for those before, one for those after
            shown = kids[first : first + room]
            paged[span.span_id] = (first, len(kids) - first - len(shown))
        else:
            continue
        drawn[span.span_id] = shown
        left -= len(shown) + (sum(1 for n in paged.get(span.span_id, ()) if n))
        queue.extend(shown)

    start = min((s.start_ns for s in roots), default=0)
    end = max((s.end_ns for s in roots), default=start)
    total = max(end - start, 1)
    rows: list[Row | More] = []
    pending: list[tuple[int, StoredSpan | More]] = [(0, root) for root in reversed(roots)]
    while pending:
        depth, item = pending.pop()
        if isinstance(item, More):
            rows.append(item)
            continue
        span = item
        kids = children.get(span.span_id, [])
        drawn_kids = drawn.get(span.span_id)
        rows.append(
            Row(
                span=span,
                depth=depth,
                x=(span.start_ns - start) / total,
                width=max((span.end_ns - span.start_ns) / total, 0.002),
                folded=0 if drawn_kids is not None or not kids else size[span.span_id] - 1,
                children=len(kids),
                failed=failed(span),
                kind=str(span.attributes.get(sc.GEN_AI_OPERATION_NAME) or "other"),
                cost_micro_usd=costs.get(span.span_id) if sc.COST_USD in span.attributes else None,
            )
        )
        if drawn_kids is None:
            continue
        before, after = paged.get(span.span_id, (0, 0))
        following: list[tuple[int, StoredSpan | More]] = []
        if before:
            back = max(before - (budget - 2), 0)
            following.append((depth + 1, More(span.span_id, depth + 1, before, back, before=True)))
        following += [(depth + 1, child) for child in drawn_kids]
        if after:
            following.append((depth + 1, More(span.span_id, depth + 1, after, before + len(drawn_kids), before=False)))
        pending += reversed(following)
    return Waterfall(rows, start, end, len(spans), orphans, opened, skip if opened is not None or paged else 0)

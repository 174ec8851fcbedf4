"""Reading a captured trace as a tree: the assertions our tests make about shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan


@dataclass
class Tree:
    spans: list[ReadableSpan]

    def __post_init__(self) -> None:
        self._by_id = {s.context.span_id: s for s in self.spans}

    @property
    def root(self) -> ReadableSpan:
        roots = [s for s in self.spans if s.parent is None or s.parent.span_id not in self._by_id]
        assert len(roots) == 1, f"expected one root, got {[r.name for r in roots]}"
        return roots[0]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self._by_id.get(span.parent.span_id) if span.parent is not None else None

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return sorted(
            (s for s in self.spans if s.parent is not None and s.parent.span_id == span.context.span_id),
            key=lambda s: s.start_time or 0,
        )

    def named(self, prefix: str) -> list[ReadableSpan]:
        return sorted(
            (s for s in self.spans if s.name.startswith(prefix)), key=lambda s: (s.start_time or 0, s.end_time or 0)
        )

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {len(found)}"
        return found[0]

    def depth(self) -> int:
        def level(span: ReadableSpan) -> int:
            parent = self.parent(span)
            return 1 if parent is None else 1 + level(parent)

        return max(level(s) for s in self.spans)


def one_trace(spans: Sequence[ReadableSpan]) -> Tree:
    """Assert: one trace id, one root, every other span's parent is in the trace."""
    assert spans, "no spans captured"
    trace_ids = {s.context.trace_id for s in spans}
    assert len(trace_ids) == 1, f"expected one trace, got {len(trace_ids)}"
    tree = Tree(list(spans))
    root = tree.root
    orphans = [s.name for s in spans if s is not root and tree.parent(s) is None]
    assert not orphans, f"spans whose parent is not in the trace: {orphans}"
    return tree


def traces(spans: Sequence[ReadableSpan]) -> dict[int, Tree]:
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    return {trace_id: one_trace(group) for trace_id, group in by_trace.items()}

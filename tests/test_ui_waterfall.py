"""The run page's waterfall folds a big trace to the rows it draws: every span of a small run drawn;
a run of 1,000 turns shows every turn, the first ones opened; a run of 10,000 turns shows its turns
a page at a time, each page leading to the next and the one before, every turn on exactly one page.

(Through the page in a browser: tests/test_ui_browser.py; the timing: benchmarks/ui.py.)"""

from __future__ import annotations

import pytest

for _needed in ("starlette", "uvicorn", "jinja2"):  # the web extra (otel-agents[ui])
    pytest.importorskip(_needed, reason="the web extra (otel-agents[ui]) is not installed")

from otel_agents._internal.export.store.rows import StoredSpan  # noqa: E402
from otel_agents.ui.waterfall import ROW_BUDGET, More, Row, Waterfall, waterfall  # noqa: E402

TRACE = "0" * 31 + "1"


def span(span_id: str, parent: str | None, start: int, name: str = "span") -> StoredSpan:
    return StoredSpan(TRACE, span_id, parent, name, start, start + 10, {"attributes": {}, "events": []})


def run_of(turns: int) -> list[StoredSpan]:
    """A run span, and for each turn an agent's span holding a model call and a message."""
    spans = [span("r", None, 0, "invoke_workflow team")]
    for turn in range(turns):
        at = 100 * (turn + 1)
        spans += [
            span(f"a{turn}", "r", at, "invoke_agent writer"),
            span(f"c{turn}", f"a{turn}", at + 1, "chat model"),
            span(f"m{turn}", f"a{turn}", at + 5, "message writer"),
        ]
    return spans


def drawn_ids(drawn: Waterfall) -> list[str]:
    return [row.span.span_id for row in drawn.rows if isinstance(row, Row)]


def test_a_small_run_is_drawn_whole_depth_first() -> None:
    drawn = waterfall(run_of(3), {})

    assert drawn_ids(drawn) == ["r", "a0", "c0", "m0", "a1", "c1", "m1", "a2", "c2", "m2"]
    assert all(isinstance(row, Row) and row.folded == 0 for row in drawn.rows)
    assert drawn.drawn == drawn.spans == 10


def test_a_run_of_1000_turns_shows_every_turn_and_opens_the_first_ones() -> None:
    drawn = waterfall(run_of(1000), {})

    rows = [row for row in drawn.rows if isinstance(row, Row)]
    assert len(drawn.rows) <= ROW_BUDGET and drawn.spans == 3001
    assert [row.span.span_id for row in rows if row.depth == 1] == [f"a{t}" for t in range(1000)]
    opened = [row for row in rows if row.depth == 1 and row.folded == 0]
    folded = [row for row in rows if row.depth == 1 and row.folded]
    assert opened and folded and opened[0].span.span_id == "a0"
    assert [r.span.span_id for r in opened] == [f"a{t}" for t in range(len(opened))], "the first turns opened"
    assert all(row.folded == 2 for row in folded)
    assert len(rows) + sum(row.folded for row in rows) == drawn.spans, "every span drawn or counted in a fold"
    assert not [row for row in drawn.rows if isinstance(row, More)]


def test_a_run_of_10000_turns_shows_its_turns_a_page_at_a_time() -> None:
    spans = run_of(10_000)
    pages: list[list[str]] = []
    skip: int | None = 0
    opened = None
    while skip is not None:
        drawn = waterfall(spans, {}, opened, skip=skip)
        assert len(drawn.rows) <= ROW_BUDGET
        pages.append([row.span.span_id for row in drawn.rows if isinstance(row, Row) and row.depth == 1])
        more = [row for row in drawn.rows if isinstance(row, More)]
        before = [m for m in more if m.before]
        after = [m for m in more if not m.before]
        assert bool(before) == (skip > 0), "a row leads back where turns come before"
        if before:
            assert before[0].count == skip and drawn.rows[1] is before[0]
        if after:
            assert drawn.rows[-1] is after[0] and after[0].parent == "r"
            assert after[0].count == 10_000 - skip - len(pages[-1])
            opened, skip = after[0].parent, after[0].skip
        else:
            skip = None
    turns = [turn for page in pages for turn in page]
    assert turns == [f"a{t}" for t in range(10_000)], "every turn on exactly one page, in order"
    assert len(pages) > 1


def test_an_opened_span_is_drawn_with_what_it_holds() -> None:
    drawn = waterfall(run_of(1000), {}, opened="a700")

    assert drawn.opened == "a700"
    assert drawn_ids(drawn) == ["a700", "c700", "m700"]


def test_an_unknown_opened_span_draws_the_whole_run() -> None:
    drawn = waterfall(run_of(3), {}, opened="nowhere", skip=5)

    assert drawn.opened is None and drawn.skip == 0 and drawn.drawn == 10

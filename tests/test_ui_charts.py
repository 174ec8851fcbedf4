"""The page's charts label their axes as the tables write figures: a small cost to the micro-dollar."""

from __future__ import annotations

import pytest

for _needed in ("starlette", "uvicorn", "jinja2"):  # the web extra (otel-agents[ui])
    pytest.importorskip(_needed, reason="the web extra (otel-agents[ui]) is not installed")

from otel_agents.ui import charts  # noqa: E402


def test_a_small_daily_spend_is_labelled_to_the_micro_dollar_not_in_exponent_form() -> None:
    drawn = str(charts.stacked_bars("spend per day", ["2026-12-05"], [charts.Series("research", [4.931e-05])], "$"))

    assert ">$0.000049<" in drawn
    assert "e-05" not in drawn


def test_figures_of_a_dollar_and_more_keep_their_usual_form() -> None:
    drawn = str(charts.line("spend per successful run", [0.5, 12.5], "day", "$"))

    assert ">$12.50<" in drawn

"""The cost page's charts from Prometheus's answers, as SVG drawn on the server: spend over time, and
cost per run over time (median, p95, max) with the run-cost exemplars as points, each a plain link
(`<a href="/runs/TRACE_ID">`) to the run it names, so the page's Content-Security-Policy needs no
script. Every text is escaped here; geometry goes in attributes, never in `style`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from markupsafe import Markup, escape

from otel_agents._internal.report.cost import NONE
from otel_agents._internal.report.promql import LABELS
from otel_agents.ui import charts

_WIDTH: Final = 720
_DAY_S: Final = 86_400


def _when(seconds: float, range_s: float) -> str:
    shown = "%m-%d %H:%M" if range_s > _DAY_S else "%H:%M"
    return datetime.fromtimestamp(seconds, tz=UTC).strftime(shown)


def _decade(power: int) -> str:
    """$0.0001, $0.01, $1, $100: a tick of the log scale."""
    return f"${10.0**power:,.{max(-power, 0)}f}"


def _money(value: float) -> str:
    """A chart's point or exemplar in its tooltip: to the micro-dollar below $1, else to the cent.
    Not pages' `_money`, which gives every figure whole to the micro-dollar as the JSON does, rounded
    in integer micro-dollars (`round`, not `format`: at a half the two may differ in the last digit)."""
    return f"${value:,.6f}" if value < 1 else f"${value:,.2f}"


def spend_chart(figures: Mapping[str, Any], spend: Sequence[Mapping[str, Any]], got: Mapping[str, Any]) -> Markup:
    """Spend over the range: by day, a bar a UTC day; else stacked by the dimension, a bar a step
    (each bar the cost query with its window set to the step, Prometheus's answer at its end)."""
    if figures["by"] == "day":
        days = [row["key"] for row in figures["rows"]]
        values = [row["cost_usd"] or 0.0 for row in figures["rows"]]
        return charts.stacked_bars(
            "spend per day (UTC), Prometheus's estimate", days, [charts.Series("cost", values)], "$"
        )
    step, start, at = got["step_s"], got["start"], got["at"]
    times = [start + k * step for k in range(round((at - start) / step) + 1)]
    slots = [_when(t, got["range_s"]) for t in times]
    by_key: dict[str, dict[str, float]] = {}
    label = LABELS[figures["by"]]
    for series in spend:
        key = str(series["metric"].get(label) or NONE)
        slot_values = by_key.setdefault(key, {})
        for t, v in series["values"]:
            k = round((float(t) - start) / step)
            number = float(v)
            if 0 <= k < len(slots) and math.isfinite(number):
                slot_values[slots[k]] = slot_values.get(slots[k], 0.0) + number
    title = f"spend per {step // 60} min by {figures['by']}, Prometheus's estimate"
    return charts.stacked_bars(title, slots, charts.day_series(slots, by_key), "$")


def run_cost_chart(
    quantiles: Mapping[str, Sequence[Mapping[str, Any]]], exemplars: Sequence[Mapping[str, Any]], got: Mapping[str, Any]
) -> Markup:
    """Cost per run over the range: the median, p95 and max lines (Prometheus's answers over time)
    and a point a run-cost exemplar, linking to the run its trace id names."""
    height, left, bottom, top = 240, 84, 34, 12
    plot_w, plot_h = _WIDTH - left - 12, height - bottom - top
    at, range_s = float(got["at"]), float(got["range_s"])
    begin = at - range_s
    lines: dict[str, list[tuple[float, float]]] = {}
    for name, result in quantiles.items():
        for series in result:
            for t, v in series["values"]:
                number = float(v)
                if math.isfinite(number):
                    lines.setdefault(name, []).append((float(t), number))
    known = [v for points in lines.values() for _, v in points] + [float(p["cost_usd"]) for p in exemplars]
    positive = [v for v in known if v > 0]
    # a log scale: a run's cost spans decades (a bucket bound of max beside a median of cents)
    low = math.floor(math.log10(min(positive, default=1e-4)))
    high = max(math.ceil(math.log10(max(positive, default=1.0))), low + 1)

    def x(t: float) -> float:
        return left + max(min((t - begin) / range_s, 1.0), 0.0) * plot_w

    def y(v: float) -> float:
        decades = (math.log10(v) - low) / (high - low) if v > 0 else 0.0
        return top + plot_h - decades * plot_h

    body = [
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left}" y="{height - 18}">{escape(_when(begin, range_s))}</text>',
        f'<text class="tick" x="{left + plot_w}" y="{height - 18}" text-anchor="end">'
        f"{escape(_when(at, range_s))} UTC</text>",
    ]
    every = max((high - low) // 5, 1)
    for decade in range(low, high + 1, every):
        tick_y = y(10.0**decade)
        body.append(
            f'<line class="axis" x1="{left}" y1="{tick_y:.1f}" x2="{left + plot_w}" y2="{tick_y:.1f}"/>'
            f'<text class="tick" x="{left - 6}" y="{tick_y + 4:.1f}" text-anchor="end">{escape(_decade(decade))}</text>'
        )
    for n, (name, points) in enumerate(sorted(lines.items(), key=lambda item: ("median", "p95", "max").index(item[0]))):
        drawn = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in sorted(points))
        body.append(
            f'<polyline class="line l{n % charts.PALETTE}" points="{drawn}"><title>{escape(name)}</title></polyline>'
        )
        for t, v in points:  # a point alone draws no line: a dot a point
            body.append(
                f'<circle class="dot s{n % charts.PALETTE}" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5">'
                f"<title>{escape(name)} at {escape(_when(t, range_s))}: {escape(_money(v))}</title></circle>"
            )
        legend_x = left + n * 110
        body.append(f'<rect class="s{n % charts.PALETTE}" x="{legend_x}" y="{height - 11}" width="10" height="10"/>')
        body.append(f'<text class="legend" x="{legend_x + 14}" y="{height - 2}">{escape(name)}</text>')
    for point in exemplars:
        trace_id = str(point["trace_id"])
        said = f"run {trace_id}: {_money(float(point['cost_usd']))} at {point['at_iso']}"
        body.append(
            f'<a class="exemplar" href="/runs/{escape(trace_id)}" data-trace-id="{escape(trace_id)}">'
            f'<circle class="dot s4" cx="{x(float(point["at"])):.1f}" cy="{y(float(point["cost_usd"])):.1f}" r="5">'
            f"<title>{escape(said)}</title></circle></a>"
        )
    if exemplars:
        legend_x = left + 3 * 110
        body.append(f'<circle class="s4" cx="{legend_x + 5}" cy="{height - 6}" r="5"/>')
        body.append(f'<text class="legend" x="{legend_x + 14}" y="{height - 2}">a run (opens it)</text>')
    title = "cost per run over time, log scale (median, p95, max: Prometheus's estimates); points: runs, from exemplars"
    return Markup(
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" height="{height}" role="figure" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(body)}</svg>'
    )

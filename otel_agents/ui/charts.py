"""Charts drawn as SVG on the server: stacked bars over days, horizontal bars, a line over turns.

Every text placed in a chart is escaped here (`markupsafe.escape`); geometry goes in SVG attributes,
never in `style`, so the page's Content-Security-Policy needs no inline style or script. A chart is
`Markup` for the templates; each has a `<title>` and a table beside it in the page carries its
figures, so the page reads without the picture."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from markupsafe import Markup, escape

PALETTE: Final = 8
"""Series take the CSS classes `s0` to `s7` (static/style.css), in turn."""
_WIDTH: Final = 720


@dataclass(frozen=True)
class Series:
    """A named series of values, one per slot (day or turn)."""

    name: str
    values: Sequence[float]


def _svg(width: int, height: int, title: str, body: list[str]) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>{"".join(body)}</svg>'
    )


def _number(value: float) -> str:
    if value >= 100 or (value >= 1 and float(value).is_integer()):
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:,.2f}"
    if value >= 0.001 or value == 0:
        return f"{value:.4g}"
    if value >= 0.000_001:  # a cost in dollars: to the micro-dollar, as the tables show it, never 4.9e-05
        return f"{value:.6f}".rstrip("0")
    return f"{value:.1e}"


def stacked_bars(title: str, slots: Sequence[str], series: Sequence[Series], unit: str = "") -> Markup:
    """Bars over `slots` (days), each stacked from `series`; a legend under it."""
    height, left, bottom, top = 220, 84, 40, 12
    plot_w, plot_h = _WIDTH - left - 8, height - bottom - top
    totals = [sum(s.values[i] for s in series) for i in range(len(slots))]
    peak = max(totals, default=0) or 1
    step = plot_w / max(len(slots), 1)
    bar_w = max(step * 0.8, 1)
    body = [
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{top + 8}" text-anchor="end">{escape(unit)}{_number(peak)}</text>',
        f'<text class="tick" x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    for i, slot in enumerate(slots):
        x = left + i * step + (step - bar_w) / 2
        y = float(top + plot_h)
        for n, one in enumerate(series):
            value = one.values[i]
            if value <= 0:
                continue
            h = value / peak * plot_h
            y -= h
            body.append(
                f'<rect class="s{n % PALETTE}" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}">'
                f"<title>{escape(slot)} · {escape(one.name)}: {escape(unit)}{_number(value)}</title></rect>"
            )
        if len(slots) <= 16 or i % max(len(slots) // 8, 1) == 0:
            body.append(
                f'<text class="tick" x="{x + bar_w / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle">'
                f"{escape(slot[5:] if len(slot) == 10 else slot)}</text>"
            )
    for n, one in enumerate(series):
        x = left + (n % 4) * 170
        y = height - 14 + (n // 4) * 0
        if n >= 4:
            break
        body.append(f'<rect class="s{n % PALETTE}" x="{x}" y="{y - 9}" width="10" height="10"/>')
        body.append(f'<text class="legend" x="{x + 14}" y="{y}">{escape(one.name[:24])}</text>')
    return _svg(_WIDTH, height, title, body)


def hbars(title: str, rows: Sequence[tuple[str, float, str]]) -> Markup:
    """One horizontal bar a row: (label, value, the value as shown)."""
    row_h, left = 22, 180
    height = row_h * len(rows) + 8
    peak = max((value for _, value, _ in rows), default=0) or 1
    body = []
    for i, (label, value, shown) in enumerate(rows):
        y = 4 + i * row_h
        w = max(value / peak * (_WIDTH - left - 200), 1 if value > 0 else 0)
        body.append(f'<text class="label" x="{left - 8}" y="{y + 14}" text-anchor="end">{escape(label[:28])}</text>')
        body.append(f'<rect class="s{i % PALETTE}" x="{left}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}"/>')
        body.append(f'<text class="value" x="{left + w + 6:.1f}" y="{y + 14}">{escape(shown)}</text>')
    return _svg(_WIDTH, height, title, body)


def line(title: str, points: Sequence[float | None], x_label: str = "turn", unit: str = "") -> Markup:
    """A line over slots 1..n (turns, days); None leaves a gap."""
    return lines(title, [Series("", [math.nan if p is None else p for p in points])], x_label, unit)


def lines(title: str, series: Sequence[Series], x_label: str = "turn", unit: str = "") -> Markup:
    """Lines over slots 1..n, one a series (NaN leaves a gap); a legend when they are named."""
    height, left, bottom, top = 200, 84, 30, 12
    plot_w, plot_h = _WIDTH - left - 12, height - bottom - top
    slots = max((len(one.values) for one in series), default=0)
    known = [v for one in series for v in one.values if not math.isnan(v)]
    peak = max(known, default=0) or 1
    step = plot_w / max(slots - 1, 1)
    body = [
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}"/>',
        f'<text class="tick" x="{left - 6}" y="{top + 8}" text-anchor="end">{escape(unit)}{_number(peak)}</text>',
        f'<text class="tick" x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
        f'<text class="tick" x="{left + plot_w}" y="{height - 6}" text-anchor="end">{escape(x_label)} {slots}</text>',
        f'<text class="tick" x="{left}" y="{height - 6}">{escape(x_label)} 1</text>',
    ]
    for n, one in enumerate(series):
        segment: list[str] = []
        for i, value in enumerate([*one.values, math.nan]):
            if math.isnan(value):
                if len(segment) > 1:
                    body.append(f'<polyline class="line l{n % PALETTE}" points="{" ".join(segment)}"/>')
                segment = []
                continue
            x, y = left + i * step, top + plot_h - value / peak * plot_h
            segment.append(f"{x:.1f},{y:.1f}")
            if slots <= 200:
                named = f"{escape(one.name)} · " if one.name else ""
                body.append(
                    f'<circle class="dot s{n % PALETTE}" cx="{x:.1f}" cy="{y:.1f}" r="3"><title>{named}'
                    f"{escape(x_label)} {i + 1}: {escape(unit)}{_number(value)}</title></circle>"
                )
        if one.name:  # the legend, under the axis, between its two labels
            x = left + plot_w / 2 - 60 * len(series) + n * 120
            body.append(f'<rect class="s{n % PALETTE}" x="{x:.0f}" y="{height - 15}" width="10" height="10"/>')
            body.append(f'<text class="legend" x="{x + 14:.0f}" y="{height - 6}">{escape(one.name[:14])}</text>')
    return _svg(_WIDTH, height, title, body)


def day_series(days: Sequence[str], by_key: Mapping[str, Mapping[str, float]], most: int = 6) -> list[Series]:
    """Series per key over `days` (`by_key`: key -> day -> value), the `most` largest keys by total,
    the rest as one "other" series."""
    ranked = sorted(by_key, key=lambda key: -sum(by_key[key].values()))
    shown, rest = ranked[:most], ranked[most:]
    series = [Series(key, [by_key[key].get(day, 0.0) for day in days]) for key in shown]
    if rest:
        series.append(Series("other", [sum(by_key[key].get(day, 0.0) for key in rest) for day in days]))
    return series

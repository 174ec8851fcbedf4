"""How a run's context grows: the least-squares slope of each turn's first input tokens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

MIN_TURNS: Final = 3
"""Turns with a model call needed for a slope (fewer: no growth is said)."""


def growth_per_turn(input_tokens: Sequence[float]) -> float | None:
    """The least-squares slope of `input_tokens` over their positions 0, 1, 2, ... (tokens a turn);
    None under `MIN_TURNS` values."""
    n = len(input_tokens)
    if n < MIN_TURNS:
        return None
    mean_x = (n - 1) / 2
    mean_y = sum(input_tokens) / n
    spread = sum((x - mean_x) ** 2 for x in range(n))
    return sum((x - mean_x) * (y - mean_y) for x, y in enumerate(input_tokens)) / spread

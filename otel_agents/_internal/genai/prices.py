"""Model prices, offline: a built-in table merged with the user's file or mapping. Never fetched.

Prices are USD per million tokens. A dated model version falls back to its base name
(`gpt-4o-mini-2024-07-18` -> `gpt-4o-mini`, `claude-3-5-sonnet-20241022` -> `claude-3-5-sonnet`).
A model with no price gets no cost (never a made-up 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

BUILT_IN_DATE: Final = "2025-09-01"
"""When the built-in table was written, from the providers' published list prices."""


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        cached = min(max(cached_input_tokens, 0), input_tokens)
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        return ((input_tokens - cached) * self.input + cached * cached_rate + output_tokens * self.output) / 1e6


# fmt: off
BUILT_IN: Final[Mapping[str, Price]] = MappingProxyType({
    # OpenAI
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4-turbo": Price(10.00, 30.00),
    "gpt-4": Price(30.00, 60.00),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "o1": Price(15.00, 60.00, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    # Anthropic
    "claude-opus-4-1": Price(15.00, 75.00, 1.50),
    "claude-opus-4": Price(15.00, 75.00, 1.50),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30),
    "claude-3-5-sonnet": Price(3.00, 15.00, 0.30),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08),
    "claude-3-opus": Price(15.00, 75.00, 1.50),
    "claude-3-haiku": Price(0.25, 1.25, 0.03),
    # Google
    "gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash-lite": Price(0.075, 0.30),
    "gemini-1.5-pro": Price(1.25, 5.00),
    "gemini-1.5-flash": Price(0.075, 0.30),
    # Mistral
    "mistral-large": Price(2.00, 6.00),
    "mistral-medium": Price(0.40, 2.00),
    "mistral-small": Price(0.10, 0.30),
    "codestral": Price(0.30, 0.90),
    "open-mistral-nemo": Price(0.15, 0.15),
})
# fmt: on

_DATED: Final = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{4}|-latest|-preview(-\d{2}-\d{2})?|@\d+)$")


def base_names(model: str) -> list[str]:
    """`model`, then the names it falls back to, most specific first."""
    names = [model]
    name = model.rsplit("/", 1)[-1]  # "openai/gpt-4o" -> "gpt-4o"
    if name != model:
        names.append(name)
    while True:
        shorter = _DATED.sub("", name)
        if shorter == name or not shorter:
            break
        names.append(shorter)
        name = shorter
    return names


class PriceTable:
    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self._prices: dict[str, Price] = {**BUILT_IN, **(overrides or {})}
        self._resolved: dict[str, Price | None] = {}

    def price(self, model: str | None) -> Price | None:
        if not model:
            return None
        if model in self._resolved:
            return self._resolved[model]
        found = None
        for name in base_names(model):
            found = self._prices.get(name) or self._prices.get(name.lower())
            if found is not None:
                break
        if len(self._resolved) < 4096:  # model names are few; never grow without bound
            self._resolved[model] = found
        return found

    def cost(
        self, model: str | None, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0
    ) -> float | None:
        price = self.price(model)
        return price.cost(input_tokens, output_tokens, cached_input_tokens) if price is not None else None


NANO_PLACES: Final = 9
"""A call's cost is carried to the nano-dollar (1e-9 USD): no float noise in its attribute, and the
exact sum of a run's calls is a sum of whole nano-dollars."""


def to_nano(cost_usd: float) -> float:
    """A cost as its attribute carries it: rounded to the nano-dollar (`2.58e-05`, never
    `2.5799999999999997e-05`)."""
    return round(cost_usd, NANO_PLACES)


def _nanos(cost_usd: float) -> int:
    return round(cost_usd * 1_000_000_000)


def _micro_of_nanos(nanos: int) -> int:
    """Whole micro-dollars, half up (72.5 is 73)."""
    micro, rest = divmod(nanos, 1000)
    return micro + (1 if rest >= 500 else 0)


def micro_usd(cost_usd: float) -> int:
    """A cost in whole micro-dollars: its nano-dollars rounded once, half up."""
    return _micro_of_nanos(_nanos(cost_usd))


def micro_shares(exact_usd: Sequence[float | None]) -> list[int | None]:
    """Each cost's micro-dollars: the exact sum of the priced ones (in nano-dollars) rounded once,
    as `micro_usd` rounds, and shared by largest remainder, the earliest first among equal ones (so
    72.6 + 119.7 + 119.85 + 148.8 micro-dollars is 461, not 462, and 72.6 gets 72); None stays None."""
    priced = [(i, _nanos(cost)) for i, cost in enumerate(exact_usd) if cost is not None]
    out: list[int | None] = [None] * len(exact_usd)
    if not priced:
        return out
    floors = [nanos // 1000 for _, nanos in priced]
    left = _micro_of_nanos(sum(nanos for _, nanos in priced)) - sum(floors)
    largest_first = sorted(range(len(priced)), key=lambda k: (-(priced[k][1] % 1000), k))
    for rank, k in enumerate(largest_first):
        out[priced[k][0]] = floors[k] + (1 if rank < left else 0)
    return out

"""A model's price as plain floats (USD per million tokens), and where it comes from: what a call's
cost is computed with, a few multiplications."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SOURCE_USER: Final = "your prices"
SOURCE_GENAI_PRICES: Final = "genai-prices"


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens of one tier. `cache_read`, `cache_write`, `reasoning`: None when the
    source gives no separate price, and those tokens are paid as input (output) tokens."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    reasoning: float | None = None

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> float:
        """`input_tokens` counts every input token, the cached ones too (`output_tokens`: the
        reasoning ones too), as `genai-prices` counts them."""
        usd = 0.0
        plain_input = input_tokens
        if self.cache_read is not None and cache_read_tokens > 0:
            cache_read_tokens = min(cache_read_tokens, plain_input)
            usd += cache_read_tokens * self.cache_read
            plain_input -= cache_read_tokens
        if self.cache_write is not None and cache_write_tokens > 0:
            cache_write_tokens = min(cache_write_tokens, plain_input)
            usd += cache_write_tokens * self.cache_write
            plain_input -= cache_write_tokens
        plain_output = output_tokens
        if self.reasoning is not None and reasoning_tokens > 0:
            reasoning_tokens = min(reasoning_tokens, plain_output)
            usd += reasoning_tokens * self.reasoning
            plain_output -= reasoning_tokens
        return (usd + plain_input * self.input + plain_output * self.output) / 1e6


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """The price that applies to a model, and where it comes from."""

    base: Rates
    tiers: tuple[tuple[int, Rates], ...] = ()
    """(threshold, rates) ascending: a call of more input tokens than a threshold pays that tier's
    rates on all its tokens (`genai-prices`' tiered prices)."""
    per_request: float = 0.0
    """USD a call, when the source prices requests."""
    source: str = SOURCE_USER
    name: str = ""
    """The entry that matched: the user's model name, or `genai-prices`' model id."""
    provider: str | None = None
    """`genai-prices`' provider id (None for the user's prices)."""

    def rates(self, input_tokens: int) -> Rates:
        rates = self.base
        for threshold, tier in self.tiers:
            if input_tokens <= threshold:
                break
            rates = tier
        return rates

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
    ) -> float:
        rates = self.rates(input_tokens) if self.tiers else self.base
        usd = rates.cost(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens)
        return usd + self.per_request if self.per_request else usd

"""Model prices, offline: the user's prices (a file or mapping) over `genai-prices`' data as installed.

Prices are USD per million tokens. The user's prices win per model; a dated model version falls back
to its base name there (`gpt-4o-mini-2024-07-18` -> `gpt-4o-mini`, `claude-3-5-sonnet-20241022` ->
`claude-3-5-sonnet`). Any other model is looked up in the data `genai-prices` ships with its release
(never fetched), for the provider the call went to: its API's base URL, else the client's provider,
else (a client of no known provider) the model name alone. A model found nowhere gets no cost
(never a made-up 0).

A model's price is looked up once per provider (the lookup, and importing `genai-prices`, are the
costly part) and kept as plain floats; a call's cost is then a few multiplications, the same figure
`genai_prices.calc_price` gives for that usage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from otel_agents._internal.genai.rates import SOURCE_USER, ModelPrice, Rates

GENAI_PRICES_PROVIDERS: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "openai": "openai",
        "azure.ai.openai": "azure",
        "anthropic": "anthropic",
        "aws.bedrock": "aws",
        "ollama": None,
        "llama_cpp": None,
    }
)
"""The `genai-prices` provider of each client's `gen_ai.provider.name`. None: a model served locally,
priced only by the user's prices (no list price applies to it)."""


@dataclass(frozen=True)
class Price:
    """A price as the user gives it (`OTEL_AGENTS_PRICES`, `configure(prices=...)`)."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        return Rates(self.input, self.output, self.cached_input).cost(input_tokens, output_tokens, cached_input_tokens)


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


_RESOLVED_KEPT: Final = 4096


class PriceTable:
    """The user's prices over `genai-prices`' data; each (model, provider, API URL) looked up once."""

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self._user: dict[str, Price] = dict(overrides or {})
        self._user_lower = {name.lower(): price for name, price in self._user.items()}
        self._resolved: dict[tuple[str, str | None, str | None], ModelPrice | None] = {}

    def lookup(self, model: str | None, provider: str | None = None, api_url: str | None = None) -> ModelPrice | None:
        """The price of `model` as called through a client of `provider` (its `gen_ai.provider.name`)
        at `api_url`; None when neither the user's prices nor `genai-prices` know it."""
        if not model:
            return None
        key = (model, provider, api_url)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        found = self.user_price(model)
        if found is None:
            from otel_agents._internal.genai import genai_prices_source

            found = genai_prices_source.lookup(model, _provider_ids(provider), api_url)
        if len(self._resolved) < _RESOLVED_KEPT:  # model names are few; never grow without bound
            self._resolved[key] = found
        return found

    def user_price(self, model: str) -> ModelPrice | None:
        """The user's price of `model` (or of its base name), if they gave one."""
        for name in base_names(model):
            price = self._user.get(name) or self._user_lower.get(name.lower())
            if price is not None:
                return ModelPrice(Rates(price.input, price.output, price.cached_input), source=SOURCE_USER, name=name)
        return None

    def cost(
        self,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cached_input_tokens: int = 0,
        *,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
        provider: str | None = None,
        api_url: str | None = None,
    ) -> float | None:
        price = self.lookup(model, provider, api_url)
        if price is None:
            return None
        return price.cost(input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens)


def _provider_ids(provider: str | None) -> tuple[str, ...] | None:
    """The `genai-prices` providers to ask, in order: () none (a local model), None any."""
    if provider is None or provider not in GENAI_PRICES_PROVIDERS:
        return None
    known = GENAI_PRICES_PROVIDERS[provider]
    return (known,) if known is not None else ()


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

"""Prices from `genai-prices`: the data its installed release ships (never fetched, never updated at
run time), read into plain floats once per model and provider.

Imported at the first lookup, never at `import otel_agents`: importing `genai-prices` builds its
whole table (some 0.2 s).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

from otel_agents._internal.genai.rates import SOURCE_GENAI_PRICES, ModelPrice, Rates

if TYPE_CHECKING:
    from genai_prices.types import PriceCalculation

_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "output_reasoning_mtok")
"""The prices a call's usage can carry, in `Rates`' order."""
_REQUESTS = "requests_kcount"
"""USD per thousand requests."""


def version() -> str | None:
    """The installed release of `genai-prices` (its data is that release's)."""
    try:
        return _version("genai-prices")
    except PackageNotFoundError:
        return None


def lookup(model: str, provider_ids: tuple[str, ...] | None, api_url: str | None) -> ModelPrice | None:
    """The price `genai-prices` gives `model` at `api_url`, else through the first of `provider_ids`
    that knows it, else (`provider_ids` None: a client of no known provider) by the model alone."""
    if provider_ids == ():
        return None
    attempts: list[dict[str, str]] = []
    if api_url:
        attempts.append({"provider_api_url": api_url})
    attempts.extend({"provider_id": provider_id} for provider_id in provider_ids or ())
    if provider_ids is None:
        attempts.append({})
    for attempt in attempts:
        calculation = _calculation(model, attempt)
        if calculation is not None:
            return from_calculation(calculation)
    return None


def _calculation(model: str, where: dict[str, str]) -> PriceCalculation | None:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a required dependency
        return None
    try:
        return calc_price(Usage(input_tokens=0, output_tokens=0), model_ref=model, **where)  # type: ignore[call-overload,no-any-return]
    except LookupError:
        return None


def from_calculation(calculation: PriceCalculation) -> ModelPrice | None:
    """`calculation.model_price` as floats; None when it prices neither input nor output tokens."""
    price: Any = calculation.model_price
    values: list[Any] = [getattr(price, key, None) for key in _KEYS]
    if values[0] is None and values[1] is None:
        return None
    thresholds = sorted({tier.start for value in values if _tiered(value) for tier in value.tiers})
    base = _rates(values, -1)
    tiers = tuple((threshold, _rates(values, threshold)) for threshold in thresholds)
    requests = getattr(price, _REQUESTS, None)
    return ModelPrice(
        base,
        tiers,
        per_request=float(requests) / 1000 if requests is not None and not _tiered(requests) else 0.0,
        source=SOURCE_GENAI_PRICES,
        name=str(calculation.model.id),
        provider=str(calculation.provider.id),
    )


def _tiered(value: object) -> bool:
    return hasattr(value, "tiers") and hasattr(value, "base")


def _at(value: Any, input_tokens: int) -> float | None:
    """`value`'s price per million for a call of more than `input_tokens` input tokens (-1: the
    base), as `genai-prices` picks a tier: the highest whose start the call's input exceeds."""
    if value is None:
        return None
    if not _tiered(value):
        return float(value)
    applicable = value.base
    for tier in value.tiers:
        if input_tokens >= tier.start:
            applicable = tier.price
    return float(applicable)


def _rates(values: list[Any], threshold: int) -> Rates:
    # a tier of a price applies past its start: at the segment starting above `threshold`,
    # every start <= threshold is exceeded
    input_, output, cache_read, cache_write, reasoning = (_at(value, threshold) for value in values)
    return Rates(input_ or 0.0, output or 0.0, cache_read, cache_write, reasoning)

"""Model prices, offline: a built-in table merged with the user's file or mapping. Never fetched.

Prices are USD per million tokens. A dated model version falls back to its base name
(`gpt-4o-mini-2024-07-18` -> `gpt-4o-mini`, `claude-3-5-sonnet-20241022` -> `claude-3-5-sonnet`).
A model with no price gets no cost (never a made-up 0).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from otel_agents._internal.config.errors import ConfigError

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
BUILT_IN: Final[Mapping[str, Price]] = {
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
}
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


def _entry(source: str, model: object, value: object) -> Price:
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{source}: entry {model!r}: a model name must be a non-empty string")
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{source}: entry {model!r}: expected a table with 'input' and 'output' (USD per million tokens)"
        )
    unknown = set(value) - {"input", "output", "cached_input"}
    if unknown:
        raise ConfigError(f"{source}: entry {model!r}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    numbers: dict[str, float] = {}
    for key in ("input", "output", "cached_input"):
        if key not in value:
            if key == "cached_input":
                continue
            raise ConfigError(f"{source}: entry {model!r}: missing {key!r}")
        number = value[key]
        try:
            price = float(number) if isinstance(number, (int, float)) and not isinstance(number, bool) else None
        except OverflowError:  # an integer too large for a float
            price = None
        if price is None or not 0 <= price < math.inf:
            raise ConfigError(f"{source}: entry {model!r}: {key}={number!r} is not a price (a finite number >= 0)")
        numbers[key] = price
    return Price(numbers["input"], numbers["output"], numbers.get("cached_input"))


def _read_file(path: Path, source: str) -> Mapping[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{source}: cannot read {str(path)!r}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{source}: {str(path)!r} is not UTF-8 text (byte {error.start})") from None
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data: Any = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as error:
        raise ConfigError(
            f"{source}: {str(path)!r} is not valid {path.suffix.lstrip('.').upper() or 'JSON'}: {error}"
        ) from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {str(path)!r} must map model names to prices")
    return data


def prices_from_file(variable: str, text: str) -> dict[str, Price]:
    """The prices of the file a variable names (`params.PRICES` parses `OTEL_AGENTS_PRICES` with it)."""
    table = _read_file(Path(text), f"{variable}={text!r}")
    return {m: _entry(f"{variable} file {text!r}", m, v) for m, v in table.items()}


def prices_from_argument(source: str, argument: object) -> dict[str, Price]:
    """The prices of the `prices` argument: a path to a JSON or TOML file, or a mapping."""
    if isinstance(argument, (str, os.PathLike)):
        path = Path(argument)
        table = _read_file(path, source)
        return {m: _entry(f"{source} file {str(path)!r}", m, v) for m, v in table.items()}
    if isinstance(argument, Mapping):
        return {m: _entry(source, m, v) for m, v in argument.items()}
    raise ConfigError(f"{source}={argument!r}: expected a path to a JSON or TOML file, or a mapping")

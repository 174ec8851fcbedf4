"""The user's prices, read and checked: a JSON or TOML file (`OTEL_AGENTS_PRICES`, or a path given
to `configure(prices=...)`), or a mapping; each refusal names the file and the entry."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from otel_agents._internal.config.errors import ConfigError
from otel_agents._internal.genai.prices import Price


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

"""`otel-agents prices`: which price applies to a model, and where it comes from.

    otel-agents prices MODEL [--provider P] [--json]

The user's prices (`OTEL_AGENTS_PRICES`) win per model, as at run time; else the data of the
installed `genai-prices` release. P is a model client's provider as its spans name it
(`gen_ai.provider.name`: `openai`, `azure.ai.openai`, `anthropic`, `ollama`, ...) or a
`genai-prices` provider id (`google`, `mistral`, `openrouter`, ...); without it the model alone
picks the provider, as for a client of no known provider. Exit 1 when no price applies.

Cheap to import (the parser is built with every command's): prices are read when it runs.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from otel_agents._internal.genai.rates import ModelPrice, Rates

EXIT_UNPRICED: Final = 1
_RATES: Final = (
    ("input", "input"),
    ("cache_read", "cached input (cache reads)"),
    ("cache_write", "cache writes"),
    ("output", "output"),
    ("reasoning", "reasoning output"),
)


def add_parser(commands: Any) -> None:
    """`prices` and its options, on the CLI's subcommands."""
    prices = commands.add_parser(
        "prices", help="say which price applies to a model and where it comes from (your prices or genai-prices)"
    )
    prices.add_argument("model", help="the model name, as a client asks for it or a response names it")
    prices.add_argument(
        "--provider",
        help="the client's provider (gen_ai.provider.name: openai, azure.ai.openai, anthropic, ollama) or a "
        "genai-prices provider id (google, mistral, openrouter...); default: the model alone picks one",
    )
    prices.add_argument("--json", action="store_true", help="a JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    from otel_agents._internal.config.params import PRICES, environment
    from otel_agents._internal.config.settings import load_prices
    from otel_agents._internal.genai import genai_prices_source
    from otel_agents._internal.genai.prices import GENAI_PRICES_PROVIDERS

    env = environment(strict=True)  # a bad variable: exit 2, as every command
    table = load_prices(None, env)
    model: str = args.model
    provider: str | None = args.provider
    if provider is None or provider in GENAI_PRICES_PROVIDERS:
        price = table.lookup(model, provider)
    else:
        price = table.user_price(model) or genai_prices_source.lookup(model, (provider,), None)
    version = genai_prices_source.version()
    prices_file = next((env.get(name) for name in PRICES.variables if env.get(name)), None)
    report = _report(model, provider, price, version, prices_file)
    if (
        price is None
        and provider is not None
        and provider in GENAI_PRICES_PROVIDERS
        and not GENAI_PRICES_PROVIDERS[provider]
    ):
        report["served_locally"] = True
    print(json.dumps(report, indent=2) if args.json else _text(report))
    return 0 if price is not None else EXIT_UNPRICED


def _report(
    model: str, provider: str | None, price: ModelPrice | None, version: str | None, prices_file: str | None
) -> dict[str, Any]:
    from otel_agents._internal.genai.rates import SOURCE_USER

    report: dict[str, Any] = {"model": model, "provider": provider, "priced": price is not None}
    if price is None:
        report["looked_in"] = {"your_prices": prices_file, "genai_prices": version}
        return report
    if price.source == SOURCE_USER:
        report["source"] = {"name": "your prices", "file": prices_file, "entry": price.name}
    else:
        report["source"] = {
            "name": "genai-prices",
            "version": version,
            "data": f"as released in genai-prices {version}, never updated at run time",
            "model_id": price.name,
            "provider_id": price.provider,
        }
    report["usd_per_million_tokens"] = _rates(price.base)
    report["tiers"] = [
        {"above_input_tokens": threshold, "usd_per_million_tokens": _rates(rates)} for threshold, rates in price.tiers
    ]
    report["usd_per_request"] = price.per_request or None
    return report


def _rates(rates: Rates) -> dict[str, float]:
    found = {key: getattr(rates, key) for key, _ in _RATES}
    return {key: value for key, value in found.items() if value is not None}


def _text(report: dict[str, Any]) -> str:
    asked = f"{report['model']}" + (f" (provider {report['provider']})" if report["provider"] else "")
    if not report["priced"]:
        looked = report["looked_in"]
        yours = f"OTEL_AGENTS_PRICES={looked['your_prices']}" if looked["your_prices"] else "no OTEL_AGENTS_PRICES"
        theirs = (
            "a model served locally has no list price"
            if report.get("served_locally")
            else f"genai-prices {looked['genai_prices']} does not know it"
        )
        return f"{asked}: no price ({yours}; {theirs}): its calls get no cost. Give it one in OTEL_AGENTS_PRICES."
    source = report["source"]
    if source["name"] == "your prices":
        where = f"OTEL_AGENTS_PRICES={source['file']}" if source["file"] else "your prices"
        lines = [f"{asked}: your price, entry {source['entry']!r} of {where}"]
    else:
        lines = [
            f"{asked}: genai-prices {source['version']}, model {source['model_id']!r} of provider "
            f"{source['provider_id']!r} (the data of that installed release, never fetched)"
        ]
    lines += _rate_lines(report["usd_per_million_tokens"], "  ")
    for tier in report["tiers"]:
        lines.append(f"  past {tier['above_input_tokens']:,} input tokens a call, on all its tokens:")
        lines += _rate_lines(tier["usd_per_million_tokens"], "    ")
    if report["usd_per_request"]:
        lines.append(f"  ${report['usd_per_request']:g} a call")
    return "\n".join(lines)


def _rate_lines(rates: dict[str, float], indent: str) -> list[str]:
    names = dict(_RATES)
    return [f"{indent}{names[key]}: ${value:g} per million tokens" for key, value in rates.items()]

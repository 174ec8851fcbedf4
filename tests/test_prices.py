"""Prices: the user's over `genai-prices`' data as installed, looked up once a model, applied per call
as `genai-prices` applies them."""

from __future__ import annotations

from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_core.logging import LLMCallEvent
from autogen_core.models import CreateResult, RequestUsage
from autogen_ext.models.replay import ReplayChatCompletionClient
from genai_prices import Usage, calc_price

from otel_agents._internal.config.settings import load_prices
from otel_agents._internal.genai import genai_prices_source
from otel_agents._internal.genai.prices import PriceTable
from otel_agents._internal.genai.rates import SOURCE_GENAI_PRICES, SOURCE_USER
from tests.conftest import Capture
from tests.support.spans import one_trace
from tests.support.teams import MODEL_INFO

pytestmark = [pytest.mark.lowest_versions]


def listed(model: str, provider: str, **usage: int) -> float:
    return float(calc_price(Usage(**usage), model_ref=model, provider_id=provider).total_price)


USAGES = [
    {"input_tokens": 1234, "output_tokens": 567},
    {"input_tokens": 120_000, "output_tokens": 3_000, "cache_read_tokens": 100_000},
    {"input_tokens": 250_000, "output_tokens": 9_000, "cache_read_tokens": 50_000},
    {"input_tokens": 9_000, "output_tokens": 10, "cache_read_tokens": 1_000, "cache_write_tokens": 7_000},
]
MODELS = [
    ("gpt-4o-mini", "openai"),
    ("gpt-4.1", "openai"),
    ("o3-mini", "openai"),
    ("gpt-4o", "azure"),
    ("claude-sonnet-4-20250514", "anthropic"),
    ("claude-3-5-haiku-latest", "anthropic"),
    ("gemini-2.5-pro", "google"),
    ("gemini-2.5-flash", "google"),
    ("mistral-large-latest", "mistral"),
]

CLIENT_PROVIDERS = {"openai": "openai", "azure": "azure.ai.openai", "anthropic": "anthropic"}
"""The `gen_ai.provider.name` of the AutoGen client that calls each `genai-prices` provider."""


@pytest.mark.parametrize(("model", "provider"), MODELS)
def test_a_calls_cost_is_the_one_genai_prices_gives(model: str, provider: str) -> None:
    table = PriceTable()
    client_provider = CLIENT_PROVIDERS.get(provider)  # None: a client of no known provider
    for usage in USAGES:
        ours = table.cost(
            model,
            usage["input_tokens"],
            usage["output_tokens"],
            usage.get("cache_read_tokens", 0),
            cache_write_tokens=usage.get("cache_write_tokens", 0),
            provider=client_provider,
        )
        found = table.lookup(model, client_provider)
        assert found is not None and found.provider == provider
        assert ours == pytest.approx(listed(model, provider, **usage), rel=1e-12, abs=1e-15), usage


def test_a_tiered_price_past_its_threshold_applies_to_every_token() -> None:
    price = PriceTable().lookup("gemini-2.5-pro")
    assert price is not None and price.provider == "google" and price.tiers
    threshold = price.tiers[0][0]
    at, past = (
        PriceTable().cost("gemini-2.5-pro", threshold, 1000),
        PriceTable().cost("gemini-2.5-pro", threshold + 1, 1000),
    )
    assert at == pytest.approx(listed("gemini-2.5-pro", "google", input_tokens=threshold, output_tokens=1000))
    assert past == pytest.approx(listed("gemini-2.5-pro", "google", input_tokens=threshold + 1, output_tokens=1000))
    assert past is not None and at is not None and past > 1.5 * at, "the tier's rates, on all the call's tokens"


def test_the_users_price_wins_per_model() -> None:
    table = load_prices({"gpt-4o-mini": {"input": 1, "output": 2}}, environ={})
    mine = table.lookup("gpt-4o-mini-2024-07-18", "openai")
    assert mine is not None and mine.source == SOURCE_USER and mine.name == "gpt-4o-mini"
    assert table.cost("gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000, provider="openai") == pytest.approx(3.0)
    theirs = table.lookup("gpt-4o", "openai")
    assert theirs is not None and theirs.source == SOURCE_GENAI_PRICES and theirs.provider == "openai"


def test_a_model_neither_knows_is_unpriced_and_a_local_one_has_no_list_price() -> None:
    table = PriceTable()
    assert table.lookup("house-model-v1", "openai") is None
    assert table.cost("house-model-v1", 10, 10) is None
    assert table.lookup("gpt-4o-mini", "ollama") is None, "served locally: no provider's list price"
    assert table.lookup("llama3.2", "openai", "http://127.0.0.1:11434/v1") is None


def test_the_api_url_names_the_provider() -> None:
    table = PriceTable()
    found = table.lookup("gemini-2.5-flash", "openai", "https://generativelanguage.googleapis.com/v1beta/openai/")
    assert found is not None and found.provider == "google"
    local = table.lookup("gpt-4o-mini", "openai", "http://127.0.0.1:8000/v1")
    assert local is not None and local.provider == "openai", "an unknown URL: the client's provider"


def test_a_models_price_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    lookup = genai_prices_source.lookup

    def counting(model: str, *args: Any) -> Any:
        asked.append(model)
        return lookup(model, *args)

    monkeypatch.setattr(genai_prices_source, "lookup", counting)
    table = PriceTable()
    for _ in range(100):
        table.cost("gpt-4o-mini", 100, 10, provider="openai")
        table.cost("no-such-model", 100, 10, provider="openai")
    assert asked == ["gpt-4o-mini", "no-such-model"]


def test_reasoning_tokens_are_priced_where_the_source_prices_them() -> None:
    price = PriceTable().lookup("sonar-deep-research", "openai", "https://api.perplexity.ai")
    assert price is not None and price.base.reasoning is not None
    usage = {"input_tokens": 1000, "output_tokens": 5000}
    ours = price.cost(1000, 5000, reasoning_tokens=3000)
    theirs = calc_price(
        Usage(**usage, output_reasoning_tokens=3000), model_ref="sonar-deep-research", provider_id=price.provider
    )
    assert ours == pytest.approx(float(theirs.total_price), rel=1e-12)


class AnthropicChatCompletionClient(ReplayChatCompletionClient):
    """Stands in for autogen-ext's Anthropic client (the `anthropic` SDK is not installed here): its
    name, its model, and the `LLMCallEvent` it makes, with Anthropic's usage."""

    model = "claude-sonnet-4-20250514"

    async def create(self, *args: Any, **kwargs: Any) -> CreateResult:
        result = await super().create(*args, **kwargs)
        usage = {
            "input_tokens": 100,
            "cache_read_input_tokens": 4000,
            "cache_creation_input_tokens": 2000,
            "output_tokens": 50,
        }
        LLMCallEvent(
            messages=[], response={"model": self.model, "usage": usage}, prompt_tokens=100, completion_tokens=50
        )
        return result


async def test_anthropic_cache_reads_and_writes_are_priced(capture: Capture) -> None:
    reply = CreateResult(
        finish_reason="stop", content="hi", usage=RequestUsage(prompt_tokens=100, completion_tokens=50), cached=False
    )
    agent = AssistantAgent("solo", model_client=AnthropicChatCompletionClient([reply], model_info=MODEL_INFO))
    await agent.run(task="hello")

    (call,) = one_trace(capture.spans()).named("chat")
    assert call.attributes["gen_ai.provider.name"] == "anthropic"
    assert call.attributes["gen_ai.usage.cache_read.input_tokens"] == 4000
    expected = listed(
        "claude-sonnet-4-20250514",
        "anthropic",
        input_tokens=6100,
        cache_read_tokens=4000,
        cache_write_tokens=2000,
        output_tokens=50,
    )
    assert call.attributes["otel_agents.cost.usd"] == round(expected, 9)

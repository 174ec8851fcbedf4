"""`otel-agents prices MODEL [--provider P] [--json]`: which price applies, and where it comes from."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from otel_agents.cli import _prices

pytestmark = [pytest.mark.lowest_versions]


def prices(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="otel-agents")
    _prices.add_parser(parser.add_subparsers(dest="command"))
    code = _prices.run(parser.parse_args(["prices", *argv]))
    return code, capsys.readouterr().out


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out = prices(capsys, *argv, "--json")
    return code, json.loads(out)


def test_a_listed_model_names_genai_prices_its_release_and_the_figures_it_gives(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_AGENTS_PRICES", raising=False)
    code, report = as_json(capsys, "gpt-4o-mini-2024-07-18", "--provider", "openai")
    listed = calc_price(Usage(input_tokens=0), model_ref="gpt-4o-mini-2024-07-18", provider_id="openai").model_price
    assert code == 0 and report["priced"] is True
    assert report["source"]["name"] == "genai-prices" and report["source"]["provider_id"] == "openai"
    assert report["source"]["version"] == _prices_version()
    assert report["usd_per_million_tokens"] == {
        "input": float(listed.input_mtok),
        "cache_read": float(listed.cache_read_mtok),
        "output": float(listed.output_mtok),
    }

    code, text = prices(capsys, "gpt-4o-mini-2024-07-18", "--provider", "openai")
    assert text.splitlines()[0].startswith(
        f"gpt-4o-mini-2024-07-18 (provider openai): genai-prices {_prices_version()}"
    )
    assert "  input: $0.15 per million tokens" in text.splitlines()


def test_a_tiered_price_shows_its_tiers(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_AGENTS_PRICES", raising=False)
    code, report = as_json(capsys, "gemini-2.5-pro", "--provider", "google")
    assert code == 0 and report["source"]["provider_id"] == "google"
    (tier,) = report["tiers"]
    assert tier["above_input_tokens"] == 200_000
    assert tier["usd_per_million_tokens"]["input"] > report["usd_per_million_tokens"]["input"]


def test_the_users_file_wins_and_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    file = tmp_path / "prices.json"
    file.write_text(json.dumps({"gpt-4o-mini": {"input": 1, "output": 2}}))
    monkeypatch.setenv("OTEL_AGENTS_PRICES", str(file))
    code, report = as_json(capsys, "gpt-4o-mini-2024-07-18")
    assert code == 0
    assert report["source"] == {"name": "your prices", "file": str(file), "entry": "gpt-4o-mini"}
    assert report["usd_per_million_tokens"] == {"input": 1.0, "output": 2.0}
    code, text = prices(capsys, "gpt-4o-mini")
    assert text.splitlines()[0] == f"gpt-4o-mini: your price, entry 'gpt-4o-mini' of OTEL_AGENTS_PRICES={file}"


def test_an_unknown_model_is_unpriced_and_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_AGENTS_PRICES", raising=False)
    code, text = prices(capsys, "house-model-v1", "--provider", "openai")
    assert code == 1
    assert "no price" in text and "does not know it" in text and "OTEL_AGENTS_PRICES" in text
    code, text = prices(capsys, "gpt-4o-mini", "--provider", "ollama")
    assert code == 1 and "a model served locally has no list price" in text


def _prices_version() -> str:
    from importlib.metadata import version

    return version("genai-prices")

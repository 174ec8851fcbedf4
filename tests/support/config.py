"""The one check every bad-setting test makes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import otel_agents


def assert_configure_refuses(
    monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str], message: str, **kwargs: Any
) -> None:
    """With `env` set, `configure(**kwargs)` raises ConfigError whose text contains `message`."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(otel_agents.ConfigError) as raised:
        otel_agents.configure(**kwargs)
    assert message in str(raised.value)

"""The one check every bad-setting test makes."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

import otel_agents
from otel_agents._internal.config import params


def assert_configure_refuses(
    monkeypatch: pytest.MonkeyPatch, env: Mapping[str, str], message: str, **kwargs: Any
) -> None:
    """With `env` set, `configure(**kwargs)` refuses the bad setting, saying `message`.

    A bad argument, or a bad standard `OTEL_*` variable, raises ConfigError whose text contains
    `message`. A bad variable of ours (an `OTEL_AGENTS_*` one of `env`, `message` naming no
    argument) is, since 2026-12-04, what the OpenTelemetry specification asks of
    environment variables (CHANGELOG, "Changed"): `configure()` warns once, saying `message`, and
    treats the variable as unset; a strict read of the variables (the CLI's) still raises with
    `message`."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ours = [name for name in env if name.startswith("OTEL_AGENTS_")]
    if not ours or any(f"{key}=" in message for key in kwargs):
        with pytest.raises(otel_agents.ConfigError) as raised:
            otel_agents.configure(**kwargs)
        assert message in str(raised.value)
        return
    with pytest.raises(otel_agents.ConfigError) as raised:
        strict = params.environment(strict=True)
        for param in params.PARAMS:
            param.from_environ(strict)
    assert message in str(raised.value), "the CLI refuses it"
    said = _Said()
    params._warned.clear()  # each variable is warned about once a process: this call's warning
    logging.getLogger("otel_agents").addHandler(said)
    try:
        otel_agents.configure(**kwargs)
    finally:
        logging.getLogger("otel_agents").removeHandler(said)
    warned = [text for text in said.texts if message in text]
    assert len(warned) == 1, f"one warning saying {message!r}: {said.texts}"
    assert " is ignored: " in warned[0] or "left out" in warned[0], warned[0]


class _Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(record.getMessage())

"""Beside OpenLIT's OpenAI instrumentation, a model call of AutoGen's OpenAI client is one `chat` span, its
tokens are counted once, and no prompt or reply leaves the process while content capture is off.

OpenLIT pins `openai<3`, which the main environment's AutoGen stack is past: scripts/test.sh runs
this file in `.venv-openlit`; elsewhere it is skipped."""

from __future__ import annotations

import contextvars
import importlib
from collections.abc import Iterator

import pytest

import otel_agents
from otel_agents._internal.genai import conventions as others
from otel_agents._internal.genai.inference import others_stand_down
from tests.support.beside import Instrumentor, assert_one_chat_span_and_http_kept, one_call
from tests.support.openai_server import OpenAIServer

pytestmark = [pytest.mark.openlit]

pytest.importorskip("openlit", reason="OpenLIT runs in scripts/test.sh's .venv-openlit")

OPENLIT_SCOPE = "openlit.instrumentation.openai"


@pytest.fixture
def openlit_config() -> Iterator[None]:
    """OpenLIT's configuration as `openlit.init()` leaves it (its defaults, and its metric instruments
    on a meter of ours: `openlit()` below), put back afterwards."""
    from openlit._config import OpenlitConfig

    saved = dict(vars(OpenlitConfig))
    OpenlitConfig.reset_to_defaults()
    yield
    for name in set(vars(OpenlitConfig)) - set(saved):
        delattr(OpenlitConfig, name)
    for name, value in saved.items():
        if not name.startswith("__"):
            setattr(OpenlitConfig, name, value)


def openlit(telemetry: otel_agents.Telemetry) -> Instrumentor:
    from openlit._config import OpenlitConfig
    from openlit.instrumentation.openai import OpenAIInstrumentor
    from openlit.otel.metrics import setup_meter

    metrics_dict, error = setup_meter(
        application_name="beside",
        environment="test",
        meter=telemetry.meter_provider.get_meter("openlit"),
        otlp_endpoint=None,
        otlp_headers=None,
    )
    assert error is None
    OpenlitConfig.metrics_dict = metrics_dict
    instrumentor = OpenAIInstrumentor()
    # its tracer is the global provider's (configure() made ours global); `openlit.init()` captures content by default
    instrumentor.instrument(capture_message_content=True, disable_metrics=False)
    return instrumentor


def test_openlit_s_framework_flag_is_where_we_set_it() -> None:
    helpers = importlib.import_module(others.OPENLIT_HELPERS_MODULE)
    flag = helpers._framework_llm_span_active
    assert isinstance(flag, contextvars.ContextVar)
    assert not helpers.is_framework_llm_active()
    with others_stand_down():
        assert helpers.is_framework_llm_active(), "set while our call runs"
    assert not helpers.is_framework_llm_active(), "and put back after it"


@pytest.mark.parametrize("streaming", [False, True], ids=["create", "create_stream"])
async def test_beside_openlit_a_call_is_one_chat_span_counted_once_without_content(
    openai_server: OpenAIServer, openlit_config: None, streaming: bool
) -> None:
    seen = await one_call(openai_server, streaming=streaming, instrument=openlit)

    assert_one_chat_span_and_http_kept(seen)
    assert OPENLIT_SCOPE not in seen.scopes, "OpenLIT recorded no span"
    assert seen.counted_tokens() == seen.billed_tokens(), "each billed token counted once"
    assert seen.leaked() == []

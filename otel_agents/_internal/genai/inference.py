"""A model call as util-genai records it: the `chat {model}` span and the `gen_ai.client.*` metrics.

Everything GenAI instrumentations of OpenTelemetry emit goes through `opentelemetry-util-genai`'s
`TelemetryHandler`; so do our model calls. That keeps the span's and the metrics' `gen_ai.*`
attributes as that library tracks the conventions, and lets its suppression work: a GenAI
instrumentation of the client library underneath (`opentelemetry-instrumentation-genai-openai`)
finds our inference in the context and records no second span and no second token count.

What util-genai does not do our way is done here: message content follows our policy (off unless
`configure(capture_content=...)` or the variable says so, redacted and bounded), never util-genai's
own reading of `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: we hand it no messages, only
the attributes our policy allows. An error is recorded by its type name only (an exception's
message may carry user content). util-genai's log events are not emitted: we have no log pipeline.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from opentelemetry import metrics, trace
from opentelemetry._logs import NoOpLoggerProvider
from opentelemetry.context import Context, get_value, set_value
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.invocation import CLIENT_INFERENCE_CONTEXT_KEY, Error, InferenceData

from otel_agents._internal import keys as sc
from otel_agents._internal.genai import conventions as others
from otel_agents._version import __version__

if TYPE_CHECKING:
    from otel_agents._internal.genai.content import ContentPolicy

logger = logging.getLogger(__name__)

SCOPE: Final = "otel_agents"
_EVENT_MODES: Final = ("EVENT_ONLY", "SPAN_AND_EVENT")

_MISSING: Final = object()


class _Settings(Protocol):
    @property
    def content(self) -> ContentPolicy: ...


class Recorder(Protocol):
    """What a model call records with (a pipeline's `Recording`): its content policy and its handler."""

    @property
    def settings(self) -> _Settings: ...

    @property
    def genai_handler(self) -> TelemetryHandler: ...


def make_handler(
    tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider, *, exported: bool
) -> TelemetryHandler:
    """The one `TelemetryHandler` of a pipeline (its `Recording` makes it at its first model call).

    Its tracer is the run-aware provider's, so a call's span lands in its run's trace; with no
    metrics destination (`exported=False`) its meter is a no-op one, so no measurement is made (as
    for our own instruments)."""
    return TelemetryHandler(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider if exported else metrics.NoOpMeterProvider(),
        logger_provider=NoOpLoggerProvider(),
        instrumentation_scope_name=SCOPE,
        instrumentation_scope_version=__version__,
    )


class Inference:
    """One model call, started now: a util-genai inference invocation, not attached to the context.

    The caller makes `context` current wherever the call runs (its span, and the marker util-genai's
    suppression looks for), and calls `finish` once."""

    def __init__(
        self,
        telemetry: Recorder,
        *,
        provider: str,
        request_model: str | None,
        agent: str | None,
        streaming: bool = False,
        conversation_id: str | None = None,
    ) -> None:
        self._content = telemetry.settings.content
        # Inside another GenAI instrumentation's inference, util-genai gives us no span of our own:
        # what we know is handed to that outer invocation, and we touch no span.
        self.suppressed = isinstance(get_value(CLIENT_INFERENCE_CONTEXT_KEY), InferenceData)
        invocation = telemetry.genai_handler.inference(
            provider, request_model=request_model, conversation_id=conversation_id
        )
        invocation.suspend()  # started attached; the caller attaches `context` around the call itself
        if streaming:
            invocation.request_stream = True
        if agent is not None:
            invocation.attributes[sc.GEN_AI_AGENT_NAME] = agent
            invocation.metric_attributes[sc.GEN_AI_AGENT_NAME] = agent
        invocation.attributes[sc.OPENINFERENCE_SPAN_KIND] = sc.KIND_LLM
        self._invocation = invocation
        # Traceloop's OpenAI (and other LLM) instrumentors record nothing under this key
        self._context = set_value(others.TRACELOOP_SUPPRESS_LLM_KEY, True, invocation.context)

    @property
    def context(self) -> Context:
        """The context holding the call's span (for the call itself, and for exemplars), and the
        keys other LLM instrumentations stand down on."""
        return self._context

    def finish(
        self,
        *,
        response_model: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_input_tokens: int | None = None,
        finish_reasons: Sequence[str] | None = None,
        cost_usd: float | None = None,
        content: Mapping[str, str] | None = None,
        error: BaseException | None = None,
    ) -> None:
        """End the span and record the call's duration and tokens (util-genai's metrics)."""
        invocation = self._invocation
        if response_model is not None:
            invocation.response_model_name = response_model
        invocation.input_tokens = input_tokens
        invocation.output_tokens = output_tokens
        invocation.cache_read_input_tokens = cache_read_input_tokens
        if finish_reasons is not None:
            invocation.finish_reasons = finish_reasons
        if cost_usd is not None:
            invocation.attributes[sc.COST_USD] = cost_usd
        if content and self._content.enabled:
            if self._content.on_span:
                invocation.attributes.update(content)
            if self._content.mode in _EVENT_MODES and not self.suppressed:
                invocation.span.add_event(sc.GEN_AI_INFERENCE_DETAILS_EVENT, dict(content))
        if error is None:
            invocation.stop()
            return
        error_type = type(error).__name__  # the type the caller receives, never its message
        if not self.suppressed:
            invocation.span.add_event("exception", {"exception.type": error_type})
        invocation.fail(Error(message=error_type, type=error_type, exception=error))


@contextlib.contextmanager
def others_stand_down() -> Iterator[None]:
    """While the client runs: the flags other LLM instrumentations read outside OpenTelemetry's
    context (OpenLIT's, when OpenLIT is imported) say that this call is already recorded."""
    helpers = sys.modules.get(others.OPENLIT_HELPERS_MODULE)
    if helpers is None:
        yield
        return
    set_active: Callable[[], Any] | None = getattr(helpers, others.OPENLIT_SET_FRAMEWORK_LLM_ACTIVE, None)
    reset: Callable[[Any], None] | None = getattr(helpers, others.OPENLIT_RESET_FRAMEWORK_LLM_ACTIVE, None)
    token = _MISSING
    if set_active is not None and reset is not None:
        try:
            token = set_active()
        except Exception:
            logger.debug("otel-agents could not set OpenLIT's flag", exc_info=True)
    try:
        yield
    finally:
        if token is not _MISSING and reset is not None:
            try:
                reset(token)
            except Exception:
                logger.debug("otel-agents could not reset OpenLIT's flag", exc_info=True)

"""Every convention of other OpenAI instrumentations otel-agents relies on, in one place.

While one of our model calls runs, another instrumentation of the client library underneath would
record the same call again: a second `chat` span, its tokens counted a second time, and the
prompts and replies it captures by default although our content capture is off. OpenTelemetry's
own (`opentelemetry-instrumentation-genai-openai`) stands down under util-genai's inference key
(`genai.inference`); the others each honour a flag of their own, listed here. We set only flags
that mean "a language-model call is already being recorded", never OpenTelemetry's
`_SUPPRESS_INSTRUMENTATION_KEY`: that one also silences the HTTP client's span and its injection of
`traceparent` into the request, which self-hosted model servers are traced by.

None of these is a promise of those libraries: each is read off their source and pinned by a test
where the library is installed (tests/test_other_openai_instrumentations.py, and
tests/test_openlit.py in scripts/test.sh's `.venv-openlit`).
"""

from __future__ import annotations

from typing import Final

# --- Traceloop / OpenLLMetry: opentelemetry-instrumentation-openai (and its other LLM instrumentors)

TRACELOOP_SUPPRESS_LLM_KEY: Final = "suppress_language_model_instrumentation"
"""`opentelemetry.semconv_ai.SUPPRESS_LANGUAGE_MODEL_INSTRUMENTATION_KEY`: an OpenTelemetry context
key (a plain string, read with `context.get_value`). Its OpenAI chat, completion, embedding and image
wrappers return the call unrecorded when it is truthy; Traceloop's other LLM instrumentors read the
same key, and its LangChain instrumentation sets it for the reason we do. Its own injection of
`traceparent` into the request (`propagate_trace_context`) is skipped with the span. The Responses
and Assistants wrappers read only `_SUPPRESS_INSTRUMENTATION_KEY`: AutoGen's OpenAI client does not
call them."""

# --- OpenLIT: openlit.instrumentation.openai ---------------------------------------------------

OPENLIT_HELPERS_MODULE: Final = "openlit.__helpers"
"""Private module of OpenLIT holding the flag its framework instrumentations (LiteLLM's) set so
that the OpenAI instrumentor below them stands down: a `contextvars.ContextVar`, not an OpenTelemetry
context key. Read only when OpenLIT is already imported (it instruments nothing otherwise)."""
OPENLIT_SET_FRAMEWORK_LLM_ACTIVE: Final = "set_framework_llm_active"
"""`set_framework_llm_active() -> Token`: OpenLIT's chat-completions wrappers (`create`, sync and async)
call the client unrecorded while it is set. Its `parse` and Responses wrappers do not read it."""
OPENLIT_RESET_FRAMEWORK_LLM_ACTIVE: Final = "reset_framework_llm_active"
"""`reset_framework_llm_active(token)`: puts the flag back."""

# --- OpenInference: openinference-instrumentation-openai -----------------------------------------

OPENINFERENCE_HAS_NO_NARROW_KEY: Final = True
"""Its wrapper of the client's `request` reads only `_SUPPRESS_INSTRUMENTATION_KEY` (and so does
`OITracer.start_span`): it cannot be silenced without silencing the HTTP client too, so we leave it
on. docs/zero-code.md names the switch: `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai`."""
OPENAI_INSTRUMENTOR_ENTRY_POINT: Final = "openai"
"""The `opentelemetry_instrumentor` entry point name OpenInference's, Traceloop's and OpenTelemetry's
own OpenAI instrumentors all register: disabling it by name disables every one installed."""

"""A `chat {model}` span per model call, for every `ChatCompletionClient`.

AutoGen 0.7.5 gives model calls no span. `create` and `create_stream` are wrapped on every
subclass of `autogen_core.models.ChatCompletionClient` that defines them (OpenAI, Azure OpenAI,
Anthropic, Ollama, the replay client, your own), once per class. A call inside a run goes under the
agent turn that made it, or under the run span when no agent made it (a selector choosing the next
speaker); its tokens and cost are added to the run's totals, so each token is counted once. The span
and the `gen_ai.client.*` metrics are util-genai's (`genai.inference`), so a GenAI instrumentation of
the client library underneath (OpenTelemetry's OpenAI one) adds no second span or token count.

The response model and cached-token count come from the `LLMCallEvent` (or `LLMStreamEndEvent`)
that clients build during the call to log it to `autogen_core.events`. The events' `__init__` is
wrapped to hand each one to the call in flight, so logging is not involved: the application's
logging configuration stays as it was, and no log record is made that it would not have made.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import wrapping
from otel_agents._internal.autogen.wrapping import on_subclass, wrap_subclasses
from otel_agents._internal.genai.content import ContentPolicy
from otel_agents._internal.genai.content import input_messages as content_input_messages
from otel_agents._internal.genai.content import output_messages as content_output_messages
from otel_agents._internal.genai.inference import Inference, others_stand_down
from otel_agents._internal.genai.prices import to_nano
from otel_agents._internal.recording import Recording
from otel_agents._internal.run.follow import RunStream
from otel_agents._internal.tracing.globals import current
from otel_agents._internal.tracing.registry import REGISTRY, Node

if TYPE_CHECKING:
    from autogen_core.models import CreateResult

logger = logging.getLogger(__name__)


_MESSAGES, _EXTRA_CREATE_ARGS = ag.CREATE_ARGUMENTS

_current_call: contextvars.ContextVar[ModelCall | None] = contextvars.ContextVar("otel_agents_call", default=None)


def provider_name(client: object) -> str:
    for cls in type(client).__mro__:
        provider = ag.MODEL_CLIENT_PROVIDERS.get(cls.__name__)
        if provider is not None:
            return provider
    return type(client).__module__.split(".")[0]


def api_url(client: object) -> str | None:
    """The base URL of the API the client calls (its SDK client's `base_url`), so a call is priced
    as its provider there prices it (Gemini or OpenRouter through the OpenAI client, Azure)."""
    sdk_client = getattr(client, ag.CLIENT_SDK, None)
    url = getattr(sdk_client, ag.SDK_BASE_URL, None) if sdk_client is not None else None
    return str(url) if url is not None else None


def request_model(client: object, extra_create_args: Mapping[str, Any] | None) -> str | None:
    """The model asked for: the call's `extra_create_args`, else the client's configuration."""
    for source in (
        extra_create_args,
        getattr(client, ag.CLIENT_CREATE_ARGS, None),
        getattr(client, ag.CLIENT_RAW_CONFIG, None),
    ):
        if isinstance(source, Mapping) and isinstance(source.get("model"), str) and source["model"]:
            return str(source["model"])
    model = getattr(client, "model", None)
    return model if isinstance(model, str) and model else None


class ModelCall:
    """One model call, from its start to its result or exception: its `chat {model}` span and
    `gen_ai.client.*` metrics (through util-genai, `genai.inference`), its cost, and its share of
    the run's totals."""

    def __init__(
        self,
        telemetry: Recording,
        client: object,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        node: Node | None = None,
        streaming: bool = False,
    ) -> None:
        self._telemetry = telemetry
        self._content: ContentPolicy = telemetry.settings.content
        messages = kwargs.get(_MESSAGES, args[0] if args else None)
        self._input = content_input_messages(messages) if self._content.enabled and messages else None
        self.model = request_model(client, kwargs.get(_EXTRA_CREATE_ARGS))
        self.response_model: str | None = None
        self.cached_input_tokens: int | None = None
        self.cache_write_tokens = 0
        self.reasoning_tokens = 0
        self._cache_beside_input = False
        """Whether the cache tokens are counted apart from the prompt tokens (Anthropic's usage)."""
        self._client = client
        self._provider = provider_name(client)
        self._ended = False
        self._error: BaseException | None = None
        self._result: CreateResult | None = None
        self.node = node
        """Where the call was made (its turn, tool, or run), resolved once, at its start."""
        self._inference = Inference(
            telemetry,
            provider=self._provider,
            request_model=self.model,
            agent=self.agent,
            streaming=streaming,
            conversation_id=node.run.conversation_id if node is not None else None,
        )
        self.context = self._inference.context

    def asks_stream_usage(self, client: object, kwargs: Mapping[str, Any]) -> bool:
        """Whether to ask an OpenAI client for usage on this streamed call
        (`OTEL_AGENTS_STREAM_USAGE=request`), when the call does not say itself."""
        if self._telemetry.settings.stream_usage != "request" or ag.OPENAI_STREAM_USAGE_ARGUMENT in kwargs:
            return False
        extra = kwargs.get(_EXTRA_CREATE_ARGS)
        if isinstance(extra, Mapping) and "stream_options" in extra:
            return False
        return any(cls.__name__ == ag.OPENAI_CLIENT_BASE for cls in type(client).__mro__)

    @property
    def agent(self) -> str | None:
        return self.node.agent if self.node is not None and not self.node.is_runtime else None

    @property
    def turn(self) -> int | None:
        """The span id of the agent turn the call was made in (None: made by no agent)."""
        return self.node.anchor.span_id if self.agent is not None and self.node is not None else None

    def on_item(self, item: object) -> None:
        if type(item).__name__ == ag.CREATE_RESULT_CLASS:
            self._result = cast("CreateResult", item)

    def stopped(self, reason: str) -> None:
        pass  # a stream abandoned by its consumer: the span ends with what it has

    def failed(self, exc: BaseException) -> None:
        self._error = exc

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        result = self._result
        input_tokens = output_tokens = cost = None
        priced_model = self.response_model or self.model
        run = self.node.run if self.node is not None else None
        if result is not None and not _reported_usage(result):
            # unknown is not zero: no tokens, no cost, counted as such (a stream without usage)
            self._telemetry.instruments.calls_usage_unknown.add(1, {sc.GEN_AI_REQUEST_MODEL: priced_model or "unknown"})
            if run is not None:
                run.add_call(
                    agent=self.agent,
                    model=priced_model,
                    input_tokens=0,
                    output_tokens=0,
                    cost_usd=None,
                    usage_known=False,
                )
        elif result is not None:
            usage = result.usage
            input_tokens, output_tokens = int(usage.prompt_tokens), int(usage.completion_tokens)
            cost = self._cost(priced_model, input_tokens, output_tokens)
            if cost is None:
                _unpriced(self._telemetry, priced_model, input_tokens + output_tokens)
            else:  # to the nano-dollar: its attribute, its run's total and the metric carry no float noise
                cost = to_nano(cost)
            if run is not None:
                run.add_call(
                    agent=self.agent,
                    model=priced_model,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    cost_usd=cost,
                    turn=self.turn,
                )
        content: dict[str, str] = {}
        if self._content.enabled:
            if self._input is not None:
                content[sc.GEN_AI_INPUT_MESSAGES] = self._content.json(self._input)
            if result is not None:
                content[sc.GEN_AI_OUTPUT_MESSAGES] = self._content.json(content_output_messages(result))
        self._inference.finish(
            response_model=self.response_model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_input_tokens=self.cached_input_tokens if input_tokens is not None else None,
            finish_reasons=(str(result.finish_reason),) if result is not None else None,
            cost_usd=cost,
            content=content,
            error=self._error,
        )
        if cost is not None:
            self._telemetry.instruments.model_call_cost(
                cost,
                model=self.model,
                agent=self.agent,
                workflow=run.workflow if run is not None else None,
                context=self.context,  # exemplars point at this call
            )

    def _cost(self, model: str | None, input_tokens: int, output_tokens: int) -> float | None:
        if not model:
            return None
        cached = self.cached_input_tokens or 0
        if self._cache_beside_input:  # priced as every input token, the cached ones with them
            input_tokens += cached + self.cache_write_tokens
        return self._telemetry.prices.cost(
            model,
            input_tokens,
            output_tokens,
            cached,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
            provider=self._provider,
            api_url=api_url(self._client),
        )

    def on_event(self, payload: Mapping[str, Any]) -> None:
        """Read the response model, cached, cache-write and reasoning tokens from an `LLMCallEvent`'s
        response (OpenAI's usage, or Anthropic's, whose cache tokens are not in its input tokens)."""
        response = payload.get("response")
        if not isinstance(response, Mapping):
            return
        model = response.get("model")
        if isinstance(model, str) and model:
            self.response_model = model
        usage = response.get("usage")
        if not isinstance(usage, Mapping):
            return
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        if isinstance(cached, int):
            self.cached_input_tokens = cached
        details = usage.get("completion_tokens_details")
        reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
        if isinstance(reasoning, int):
            self.reasoning_tokens = reasoning
        read, write = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
        if isinstance(read, int) or isinstance(write, int):
            self._cache_beside_input = True
            self.cached_input_tokens = read if isinstance(read, int) else 0
            self.cache_write_tokens = write if isinstance(write, int) else 0


def _reported_usage(result: CreateResult) -> bool:
    """Whether the client reported usage: AutoGen's clients give `RequestUsage(0, 0)` for a call
    whose response carried none (a stream made without `include_usage`); a real call always has
    prompt tokens."""
    usage = result.usage
    return bool(usage.prompt_tokens or usage.completion_tokens)


_UNPRICED_NAMES_KEPT: Final = 1024
_warned_unpriced: set[str] = set()
"""Models named in an unpriced warning, so each is named once; forgotten all at once when full (a
service calling that many unpriced models may see a name twice)."""
process_state.hold(
    __name__,
    "_warned_unpriced",
    bound=f"{_UNPRICED_NAMES_KEPT} names, then cleared",
    size=lambda: len(_warned_unpriced),
    forget=_warned_unpriced.clear,
)


def _unpriced(telemetry: Recording, model: str | None, tokens: int) -> None:
    """Count the tokens of a call we cannot price; warn once per model."""
    name = model or "unknown"
    telemetry.instruments.tokens_unpriced.add(tokens, {sc.GEN_AI_REQUEST_MODEL: name})
    if name not in _warned_unpriced:
        if len(_warned_unpriced) >= _UNPRICED_NAMES_KEPT:
            _warned_unpriced.clear()
        _warned_unpriced.add(name)
        if model is None:
            logger.warning("otel-agents: a model client reports no model name; its calls get no cost")
        else:
            logger.warning(
                "otel-agents: no price for model %r; its calls get no cost (add it with OTEL_AGENTS_PRICES)",
                name,
            )


def _delegates(client: object) -> bool:
    """Whether `client` holds another model client, to which it hands its calls (autogen-ext's
    `ChatCompletionCache`, a user's wrapper): then that client's call is the one that leaves the
    process, and has the span; a call the wrapper answers itself (a cache hit) has none."""
    from autogen_core.models import ChatCompletionClient

    try:
        held = vars(client).values()
    except TypeError:  # no __dict__ (slots): holds nothing we can see
        return False
    return any(isinstance(value, ChatCompletionClient) for value in held)


def _start(
    client: object, args: Sequence[Any], kwargs: Mapping[str, Any], *, streaming: bool = False
) -> ModelCall | None:
    if _current_call.get() is not None or not wrapping.active():  # super().create(): one span per call
        return None
    try:
        if _delegates(client):  # the client it hands the call to makes the span, if the call leaves
            return None
        node = REGISTRY.lookup(trace.get_current_span().get_span_context())
        if node is None and not wrapping.every_run():  # only the runs you tap
            return None
        run_telemetry = node.run.recording if node is not None else None
        telemetry = run_telemetry if run_telemetry is not None else current(None)
        if telemetry.disabled:
            return None
        return ModelCall(telemetry, client, args, kwargs, node=node, streaming=streaming)
    except Exception:
        logger.warning("otel-agents could not trace a model call", exc_info=True)
        return None


@wrapping.method_wrapper
async def _wrap_create(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _start(instance, args, kwargs)
    if call is None:
        return await wrapped(*args, **kwargs)
    token = otel_context.attach(call.context)
    call_token = _current_call.set(call)
    try:
        with others_stand_down():
            result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        call.failed(exc)
        raise
    else:
        call.on_item(result)
        return result
    finally:
        _current_call.reset(call_token)
        otel_context.detach(token)
        _end(call)


@wrapping.method_wrapper
def _wrap_create_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _traced_stream(wrapped, instance, args, kwargs)


async def _traced_stream(
    create_stream: Callable[..., AsyncGenerator[Any, None]], client: Any, args: Any, kwargs: dict[str, Any]
) -> AsyncGenerator[Any, None]:
    """`create_stream(*args, **kwargs)` (bound to `client`) traced."""
    call = _start(client, args, kwargs, streaming=True)  # at the first item asked for: the call starts then
    if call is None:
        async with contextlib.aclosing(create_stream(*args, **kwargs)) as untraced:
            async for item in untraced:
                yield item
        return
    if call.asks_stream_usage(client, kwargs):
        kwargs = {**kwargs, ag.OPENAI_STREAM_USAGE_ARGUMENT: True}
    call_token = _current_call.set(call)
    try:
        stream = create_stream(*args, **kwargs)
    except BaseException as exc:
        call.failed(exc)
        _end(call)
        raise
    finally:
        _current_call.reset(call_token)
    # closed when this stream is: the client's response and the call's span end with it
    async with contextlib.aclosing(RunStream(_with_current_call(stream, call), lambda: call)) as followed:
        async for item in followed:
            yield item


async def _with_current_call(stream: AsyncGenerator[Any, None], call: ModelCall) -> AsyncGenerator[Any, None]:
    """The client's stream, each step of it run with `call` as the current call (for its LLM
    events) and other instrumentations' flags set; set and reset within the step, so closing the
    stream later, anywhere, is safe."""
    try:
        while True:
            token = _current_call.set(call)
            try:
                with others_stand_down():
                    item = await stream.__anext__()
            except StopAsyncIteration:
                return
            finally:
                _current_call.reset(token)
            yield item
    finally:
        await stream.aclose()


def _end(call: ModelCall) -> None:
    try:
        call.end()
    except Exception:
        logger.warning("otel-agents could not end a model call span", exc_info=True)


@wrapping.method_wrapper
def _wrap_event_init(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    wrapped(*args, **kwargs)
    call = _current_call.get() if wrapping.active() else None
    if call is not None:
        try:
            call.on_event(getattr(instance, ag.LLM_EVENT_KWARGS))
        except Exception:
            logger.debug("otel-agents could not read an LLM event", exc_info=True)


def wrapped_in_subclasses() -> tuple[tuple[type, tuple[str, ...]], ...]:
    """Each class whose subclasses `install()` wraps, with the names it wraps there."""
    import autogen_core.logging
    from autogen_core.models import ChatCompletionClient

    events = tuple((getattr(autogen_core.logging, event), ("__init__",)) for event in ag.LLM_EVENT_CLASSES)
    return ((ChatCompletionClient, tuple(ag.MODEL_CLIENT_METHODS)), *events)


def install() -> None:
    """Wrap every ChatCompletionClient subclass, defined so far or from now on, and the LLM
    events' `__init__` (idempotent, cheap to repeat)."""
    (client, _), *events = wrapped_in_subclasses()
    create, create_stream = ag.MODEL_CLIENT_METHODS
    wrappers: dict[str, Callable[[Any], Any]] = {create: _wrap_create, create_stream: _wrap_create_stream}
    wrap_subclasses(client, wrappers)
    on_subclass(client, wrappers)  # a client class imported later (as under the distro): as it is created
    for event, _ in events:
        wrap_subclasses(event, {"__init__": _wrap_event_init})

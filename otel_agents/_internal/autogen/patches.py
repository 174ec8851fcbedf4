"""What otel-agents wraps in AutoGen, and where a run starts.

`install()` (every `configure()`, each tap, and `AutoGenInstrumentor`) puts in place, through
`wrapping` so that `uninstrument()` can give every original back:
- model clients' `create`/`create_stream` (`model_clients`), tools' `run` (`tools`), and the
  changes to private AutoGen modules (`private`: parsed links remembered, AutoGen's tracers placed);
- where runs start: `BaseGroupChat.run_stream` (a team's `run` goes through it),
  `BaseChatAgent.run_stream` and `BaseChatAgent.run` (public). Called inside a traced run (a team
  as a participant, `TeamTool`, `AgentTool`, `SocietyOfMindAgent`), each gets an
  `invoke_workflow {name}` span under that run's workflow, with the inner turns under it (AutoGen
  makes no turn span for a team participant). Called outside any run, each is a traced run of its
  own when AutoGen is instrumented (`wrapping.trace_every_run(True)`: `configure()`'s default and
  `AutoGenInstrumentor`), else AutoGen's own stream comes back untouched (`tap` traces it).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_agents._internal import keys as sc
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import wrapping
from otel_agents._internal.autogen.tracer_hook import AUTOGEN_TRACERS
from otel_agents._internal.run import attribution
from otel_agents._internal.run.follow import Kind, RunStream
from otel_agents._internal.run.start import start_run, workflow_name
from otel_agents._internal.run.stop import CANCELLED
from otel_agents._internal.run.workflow import WorkflowSpan, in_run
from otel_agents._internal.tracing.globals import current
from otel_agents._internal.tracing.registry import REGISTRY, Node

logger = logging.getLogger(__name__)


_support: tuple[tuple[str, ...], str | None] | None = None
"""(the supported range, the conflict with the installed AutoGen or None), checked once per range."""


def unsupported_autogen() -> str | None:
    """Why the installed AutoGen is not one otel-agents supports (None: it is)."""
    global _support
    if _support is None or _support[0] != tuple(ag.INSTRUMENTED_PACKAGES):
        from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

        conflict = get_dependency_conflicts(list(ag.INSTRUMENTED_PACKAGES))
        _support = (tuple(ag.INSTRUMENTED_PACKAGES), str(conflict) if conflict is not None else None)
        if conflict is not None:
            logger.warning("otel-agents: AutoGen is not instrumented: %s", conflict)
    return _support[1]


_installed: tuple[int, tuple[tuple[type, tuple[str, ...]], ...]] | None = None
"""After a whole `install()`: how many times `restore_all()` had run as it began, and each base
class with the method names it wraps on the base's subclasses."""


def install() -> None:
    """Put every wrapper in place (once; classes defined and methods assigned since the last call
    are picked up); on an AutoGen otel-agents does not support, nothing (one warning): the app
    runs as without us."""
    import importlib

    global _installed
    if unsupported_autogen() is not None:
        return

    # imported here, not with the package: `import otel_agents` stays cheap (util-genai, AutoGen)
    from otel_agents._internal.autogen import model_clients, private, tools, warnings_at_caller

    restored = wrapping.restored()  # an uninstrument() meanwhile makes the next start install again
    model_clients.install()
    warnings_at_caller.install()
    tools.install(save_state=_wrap_save_state_unmarked)
    private.install_link_cache()
    private.install_tracer_hooks(AUTOGEN_TRACERS)
    team = getattr(importlib.import_module(ag.TEAM_CLASS[0]), ag.TEAM_CLASS[1])
    agent = getattr(importlib.import_module(ag.AGENT_CLASS[0]), ag.AGENT_CLASS[1])
    wrapping.replace(team, ag.RUN_STREAM_METHOD, _wrap_run_stream)
    wrapping.replace(agent, ag.RUN_STREAM_METHOD, _wrap_run_stream)
    wrapping.replace(agent, ag.AGENT_RUN_METHOD, _wrap_agent_run)
    # a team's conversation: carried by its save_state/load_state, ended by reset; an agent's saved
    # state stays AutoGen's own (a team inside it carries no conversation either)
    save_state, load_state = ag.STATE_METHODS
    on_messages, on_messages_stream = ag.AGENT_MESSAGE_METHODS
    wrapped: list[tuple[type, tuple[str, ...]]] = []
    each: tuple[tuple[type, dict[str, Callable[[Any], Any]]], ...] = (
        (team, {save_state: _wrap_save_state, load_state: _wrap_load_state, ag.TEAM_RESET_METHOD: _wrap_reset}),
        (
            agent,
            {
                save_state: _wrap_save_state_unmarked,
                ag.AGENT_RESET_METHOD: _wrap_reset,
                on_messages: _wrap_on_messages,
                on_messages_stream: _wrap_on_messages_stream,
            },
        ),
    )
    for cls, wrappers in each:
        wrapping.wrap_subclasses(cls, wrappers)
        wrapping.on_subclass(cls, wrappers)  # classes defined from now on: as they are created
        wrapped.append((cls, tuple(wrappers)))
    _installed = (restored, (*wrapped, *model_clients.wrapped_in_subclasses(), *tools.wrapped_in_subclasses()))


def install_new_classes() -> None:
    """`install()` when it would change anything: not since `uninstrument()`, a wrapper of ours
    replaced by someone else (a reload), or a model client, tool, team or agent class defined (or
    a wrapped method assigned) since it last ran. Every run's start calls this; the usual answer,
    nothing new, costs a read of the classes' methods."""
    done = _installed
    if (
        done is None
        or done[0] != wrapping.restored()
        or not wrapping.all_in_place()
        or any(wrapping.unwrapped_in_subclasses(base, names) for base, names in done[1])
    ):
        install()


_grpc_hook = False


def install_grpc_when_imported() -> None:
    """The gRPC worker runtime's patch (`private.install_grpc`), put in place when the app imports
    autogen-ext's gRPC runtime (now, if it has), while AutoGen is instrumented. Not imported here:
    `grpc` alone costs a process some 6 MiB. `create_runtime(host_address=...)` installs it too."""
    global _grpc_hook
    if not _grpc_hook:
        import wrapt

        _grpc_hook = True
        wrapt.register_post_import_hook(_on_grpc_runtime_import, ag.GRPC_RUNTIME_MODULE)  # now, if imported
    elif ag.GRPC_RUNTIME_MODULE in sys.modules:  # instrumented again: the hook has fired already
        _on_grpc_runtime_import(sys.modules[ag.GRPC_RUNTIME_MODULE])


def _on_grpc_runtime_import(module: object) -> None:
    if wrapping.every_run():
        from otel_agents._internal.autogen import private

        private.install_grpc()


def _starter(runner: object) -> tuple[Callable[[], WorkflowSpan | None], Kind] | None:
    """How a run of `runner` starting here is recorded, or None (AutoGen's own stream, untouched).

    Instrumented, every run is recorded; whether as a run of its own or nested in the traced run
    current where it starts is decided at its first item (a stream made in one place may be
    iterated inside another traced run: `tap(my_filter(team.run_stream()))`). Otherwise only a run
    started inside a traced run is recorded, nested in it.
    """
    made_in, given = otel_context.get_current(), attribution.given_here()
    name = workflow_name(runner)
    if wrapping.every_run():
        telemetry = current(None)
        if telemetry.disabled:
            return None
        install_new_classes()  # model client and tool classes defined since instrumenting

        def start() -> WorkflowSpan | None:
            return _nested(name, otel_context.get_current()) or start_run(
                telemetry, name, made_in, runner=runner, given=given
            )

        return start, "run"
    if _cause(made_in) is None:
        return None
    return (lambda: _nested(name, made_in)), "nested"


def _cause(here: otel_context.Context) -> Node | None:
    cause = REGISTRY.lookup(trace.get_current_span(here).get_span_context())
    return cause if cause is not None and not cause.run.ended else None


def _in_a_message_handler() -> bool:
    """Whether AutoGen's runtime is handling a message here (a team's turn calls its agent from a
    handler; so does a `RoutedAgent` wrapping an agent): then the agent's call is part of that
    work, whatever spans are or are not recorded around it."""
    from autogen_core import MessageHandlerContext

    try:
        MessageHandlerContext.agent_id()
    except RuntimeError:
        return False
    return True


def _within_a_run(here: otel_context.Context) -> bool:
    """Whether `here` is inside a run, open or ended (a team running on after its consumer left)."""
    if in_run(here):
        return True
    current_span = trace.get_current_span(here).get_span_context()
    if not current_span.is_valid:
        return False
    return REGISTRY.lookup(current_span) is not None or REGISTRY.of_ended_run(current_span, None) is not None


def _nested(name: str, here: otel_context.Context) -> WorkflowSpan | None:
    """An `invoke_workflow {name}` span under the workflow of the traced run current `here`."""
    cause = _cause(here)
    if cause is None:
        return None
    under = trace.set_span_in_context(trace.NonRecordingSpan(cause.workflow), here)
    return WorkflowSpan(cause.run, name, under, within=cause.trail)


def _wrap_run_stream(original: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(original)
    def run_stream(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        stream = original(self, *args, **kwargs)
        if not wrapping.active():
            return stream
        try:
            how = _starter(self)
        except Exception:  # never break the run
            return stream
        if how is None:
            return stream
        return RunStream(stream, how[0], kind=how[1], name=workflow_name(self), runner=self)

    return run_stream


def _wrap_save_state_unmarked(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """An agent's or a tool's save: AutoGen's state as it is, and no team saved inside it adds
    the conversation (`SocietyOfMindAgent`, `TeamTool`)."""

    @functools.wraps(original)
    async def save_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _saving.set(True)
        try:
            return await original(self, *args, **kwargs)
        finally:
            _saving.reset(token)

    return save_state


def _wrap_save_state(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def save_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        outermost = not _saving.get()
        token = _saving.set(True)
        try:
            state = await original(self, *args, **kwargs)
        finally:
            _saving.reset(token)
        if not wrapping.active() or not outermost:  # a team inside an agent or a tool: none
            return state
        try:
            return attribution.with_conversation(self, state)
        except Exception:  # the state as AutoGen made it, whatever happens here
            logger.warning("otel-agents could not add the conversation to a saved state", exc_info=True)
            return state

    return save_state


_saving: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_agents_saving_state", default=False)


def _wrap_load_state(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def load_state(self: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, state, *args, **kwargs)  # AutoGen ignores our key: pinned by a test
        if wrapping.active():
            try:
                attribution.resume(self, state)
            except Exception:
                logger.warning("otel-agents could not read the conversation of a loaded state", exc_info=True)
        return result

    return load_state


def _wrap_reset(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(original)
    async def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        attribution.forget(self)
        return result

    return reset


def _wrap_agent_run(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """An agent's `run` does not stream: its message spans come from the `TaskResult`'s messages
    (no latency), recorded when it returns."""

    def start(agent: Any) -> WorkflowSpan | None:
        how = _starter(agent)
        return how[0]() if how is not None else None

    return _awaited(original, start, _record_task_result)


def _awaited(
    original: Callable[..., Awaitable[Any]],
    start: Callable[[Any], WorkflowSpan | None],
    record: Callable[[WorkflowSpan, Any], None],
) -> Callable[..., Awaitable[Any]]:
    """`original` (an agent's `run` or `on_messages`) recorded by what `start(agent)` makes, if
    anything, and its result by `record`."""

    @functools.wraps(original)
    async def awaited(self: Any, *args: Any, **kwargs: Any) -> Any:
        recorder = None
        if wrapping.active():
            try:
                recorder = start(self)
            except Exception:  # never break the call
                recorder = None
        if recorder is None:
            return await original(self, *args, **kwargs)
        return await _recorded(recorder, original(self, *args, **kwargs), record)

    return awaited


def _record_task_result(recorder: WorkflowSpan, result: Any) -> None:
    for message in getattr(result, "messages", ()):
        recorder.on_item(message, timed=False)
    recorder.on_item(result)


def _record_response(recorder: WorkflowSpan, response: Any) -> None:
    for message in getattr(response, "inner_messages", None) or ():
        recorder.on_item(message, timed=False)
    recorder.on_item(response, timed=False)


async def _recorded(recorder: WorkflowSpan, call: Awaitable[Any], record: Callable[[WorkflowSpan, Any], None]) -> Any:
    """Await `call` (an agent's `run` or `on_messages`) with the run's span current, then record
    what it returned; the run ends whatever happens."""
    token = otel_context.attach(recorder.context)
    try:
        result = await call
    except asyncio.CancelledError:
        recorder.stopped(CANCELLED)
        raise
    except BaseException as exc:
        recorder.failed(exc)
        raise
    else:
        try:
            record(recorder, result)
        except Exception:  # recording never breaks the run
            logger.warning("otel-agents could not record the result of %r", recorder.run.workflow, exc_info=True)
        return result
    finally:
        otel_context.detach(token)
        try:
            recorder.end()
        except Exception:
            logger.warning("otel-agents could not end a span", exc_info=True)


def _message_run_starter(agent: object) -> Callable[[], WorkflowSpan | None] | None:
    """How a run of `agent`'s `on_messages`/`on_messages_stream` called here is recorded: as a
    run of its own, an `invoke_agent {agent}` root, when the app calls it outside any run while
    AutoGen is instrumented; None inside a run (AutoGen's turn in a team, the agent's `run`,
    `AgentTool`, `on_messages` calling `on_messages_stream`: nothing of ours is added)."""
    if not wrapping.every_run() or _within_a_run(otel_context.get_current()) or _in_a_message_handler():
        return None
    telemetry = current(None)
    if telemetry.disabled:
        return None
    install_new_classes()
    made_in, given, name = otel_context.get_current(), attribution.given_here(), workflow_name(agent)
    return lambda: start_run(telemetry, name, made_in, runner=agent, given=given, operation=sc.OPERATION_INVOKE_AGENT)


def _wrap_on_messages(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    def start(agent: Any) -> WorkflowSpan | None:
        starter = _message_run_starter(agent)
        return starter() if starter is not None else None

    return _awaited(original, start, _record_response)


def _wrap_on_messages_stream(original: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(original)
    def on_messages_stream(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        stream = original(self, *args, **kwargs)
        if not wrapping.active():
            return stream
        try:
            start = _message_run_starter(self)
            if start is None:
                turn = _turn_here()
                return _marked(stream, turn) if turn is not None else stream
        except Exception:  # never break the call
            return stream
        return RunStream(stream, start, kind="run", name=workflow_name(self), runner=self)

    return on_messages_stream


def _turn_here() -> Node | None:
    """The agent turn (AutoGen's `invoke_agent` span, in a run) current here, if any."""
    here = trace.get_current_span().get_span_context()
    node = REGISTRY.lookup(here)
    if node is None or node.is_runtime or node.agent is None or node.anchor != here or node.run.ended:
        return None
    return node


async def _marked(stream: AsyncIterator[Any], turn: Node) -> AsyncIterator[Any]:
    """The turn's stream, each item remembered as this turn's (its message span goes under it)."""
    run, anchor = turn.run, turn.anchor
    try:
        async for item in stream:
            try:  # a Response's message is what the team streams
                run.mark_produced(getattr(item, ag.RESPONSE_MESSAGE, item), anchor, time.time_ns())
            except Exception:  # recording never breaks the turn
                logger.debug("otel-agents could not remember a turn's item", exc_info=True)
            yield item
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()

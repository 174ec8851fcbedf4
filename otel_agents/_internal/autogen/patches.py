"""What otel-agents wraps in AutoGen; each wrapper hands over to `run/` (`run.starts` decides
whether a call is a run of its own, nested in the run current there, or none).

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

import contextvars
import logging
import sys
from collections.abc import Callable
from typing import Any

from otel_agents._internal import process_state
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.autogen import wrapping
from otel_agents._internal.autogen.tracer_hook import AUTOGEN_TRACERS
from otel_agents._internal.run import attribution, starts, turns
from otel_agents._internal.run.awaited import record_response, record_task_result, recorded
from otel_agents._internal.run.follow import Kind, RunStream
from otel_agents._internal.run.start import workflow_name
from otel_agents._internal.run.workflow import WorkflowSpan

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
    wrapping.remember(())  # no reading yet: one made now could miss a method assigned meanwhile


def install_new_classes() -> None:
    """`install()` when it would change anything: not since `uninstrument()`, a wrapper of ours
    replaced by someone else (a reload), or a model client, tool, team or agent class defined (or
    a wrapped method assigned) since it last ran. Every run's start calls this; the usual answer,
    nothing new, costs a read of the classes' methods: the methods themselves are looked at only
    when one is not the one found there by the last look that found nothing to install."""
    done = _installed
    if done is None or done[0] != wrapping.restored():
        install()
        return
    bases = done[1]
    reading = wrapping.attributes_now(bases)  # read before the look: what changes after it differs next time
    if wrapping.unchanged(reading):
        return
    if not wrapping.all_in_place() or any(wrapping.unwrapped_in_subclasses(base, names) for base, names in bases):
        install()
    else:
        wrapping.remember(reading)


_grpc_hook = False


def _forget_installed() -> None:
    global _support, _installed
    _support = _installed = None


process_state.hold(
    __name__,
    "_support",
    "_installed",
    bound="one each",
    size=lambda: (_support is not None) + (_installed is not None),
    forget=_forget_installed,
)
process_state.hold(
    __name__,
    "_grpc_hook",
    bound="one import hook of the gRPC runtime, kept (wrapt takes none back): it patches nothing "
    "while AutoGen is not instrumented",
    size=lambda: int(_grpc_hook),
    forget=None,
)


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


def _starts(runner: object) -> tuple[Callable[[], WorkflowSpan | None], Kind] | None:
    """`starts.of_run`, with the classes defined since `install()` wrapped first when every run is
    traced."""
    every_run = wrapping.every_run()
    if every_run:
        install_new_classes()  # model client and tool classes defined since instrumenting
    return starts.of_run(runner, every_run=every_run)


@wrapping.method_wrapper
def _wrap_run_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    stream = wrapped(*args, **kwargs)
    if not wrapping.active():
        return stream
    try:
        how = _starts(instance)
    except Exception:  # never break the run
        return stream
    if how is None:
        return stream
    return RunStream(stream, how[0], kind=how[1], name=workflow_name(instance), runner=instance)


@wrapping.method_wrapper
async def _wrap_save_state_unmarked(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An agent's or a tool's save: AutoGen's state as it is, and no team saved inside it adds
    the conversation (`SocietyOfMindAgent`, `TeamTool`)."""
    token = _saving.set(True)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _saving.reset(token)


@wrapping.method_wrapper
async def _wrap_save_state(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    outermost = not _saving.get()
    token = _saving.set(True)
    try:
        state = await wrapped(*args, **kwargs)
    finally:
        _saving.reset(token)
    if not wrapping.active() or not outermost:  # a team inside an agent or a tool: none
        return state
    try:
        return attribution.with_conversation(instance, state)
    except Exception:  # the state as AutoGen made it, whatever happens here
        logger.warning("otel-agents could not add the conversation to a saved state", exc_info=True)
        return state


_saving: contextvars.ContextVar[bool] = contextvars.ContextVar("otel_agents_saving_state", default=False)


@wrapping.method_wrapper
async def _wrap_load_state(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = await wrapped(*args, **kwargs)  # AutoGen ignores our key: pinned by a test
    if wrapping.active():
        try:
            attribution.resume(instance, args[0] if args else kwargs.get(ag.LOAD_STATE_ARGUMENT))
        except Exception:
            logger.warning("otel-agents could not read the conversation of a loaded state", exc_info=True)
    return result


@wrapping.method_wrapper
async def _wrap_reset(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = await wrapped(*args, **kwargs)
    attribution.forget(instance)
    return result


def _awaited(
    start: Callable[[Any], WorkflowSpan | None], record: Callable[[WorkflowSpan, Any], None]
) -> Callable[[Any], wrapping.Wrapper]:
    """The wrap of an awaited call (an agent's `run` or `on_messages`): recorded by what
    `start(agent)` makes, if anything, and its result by `record`."""

    @wrapping.method_wrapper
    async def awaited(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        recorder = None
        if wrapping.active():
            try:
                recorder = start(instance)
            except Exception:  # never break the call
                recorder = None
        if recorder is None:
            return await wrapped(*args, **kwargs)
        return await recorded(recorder, wrapped(*args, **kwargs), record)

    return awaited


def _start_agent_run(agent: Any) -> WorkflowSpan | None:
    how = _starts(agent)
    return how[0]() if how is not None else None


_wrap_agent_run = _awaited(_start_agent_run, record_task_result)
"""An agent's `run` does not stream: its message spans come from the `TaskResult`'s messages
(no latency), recorded when it returns."""


def _message_call_starts(agent: object) -> Callable[[], WorkflowSpan | None] | None:
    """`starts.of_message_call`, with the classes defined since `install()` wrapped first when it
    starts a run."""
    start = starts.of_message_call(agent, every_run=wrapping.every_run())
    if start is not None:
        install_new_classes()
    return start


def _start_message_call(agent: Any) -> WorkflowSpan | None:
    starter = _message_call_starts(agent)
    return starter() if starter is not None else None


_wrap_on_messages = _awaited(_start_message_call, record_response)


@wrapping.method_wrapper
def _wrap_on_messages_stream(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    stream = wrapped(*args, **kwargs)
    if not wrapping.active():
        return stream
    try:
        start = _message_call_starts(instance)
        if start is None:
            turn = turns.turn_here()
            return turns.marked(stream, turn) if turn is not None else stream
    except Exception:  # never break the call
        return stream
    return RunStream(stream, start, kind="run", name=workflow_name(instance), runner=instance)

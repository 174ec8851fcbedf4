"""Who a run is for, and which conversation it belongs to.

- `run_attributes(...)`: a context manager (sync and async, nestable, inner values winning per key)
  whose values go on every run started inside it. Without it, `user.id`, `session.id` and
  `gen_ai.conversation.id` come from W3C baggage entries of the same names, so a front end's
  baggage flows through. Baggage never sets metric labels.
- Conversations: a team's (or a single agent's) runs between two `reset()` calls are one
  conversation. Its id is the one given to `run_attributes`, else baggage's, else the one a loaded
  state carries, else a new one made at the first run. `save_state()` carries it, with the last
  run's span context, under `STATE_KEY`; after `load_state()` of that state (in another process
  too) the next run has the same id and a span link to that last run.
"""

from __future__ import annotations

import contextvars
import threading
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, Final

from opentelemetry import baggage
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext, TraceFlags

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state

STATE_KEY: Final = "otel_agents"
"""The key of ours in a saved team or agent state (AutoGen ignores keys it does not know on load)."""
MAX_ATTRIBUTES: Final = 32
MAX_CHARS: Final = 256
RESERVED_PREFIXES: Final = ("gen_ai.", "otel_agents.")

Primitive = str | bool | int | float


@dataclass(frozen=True)
class Attribution:
    """What `run_attributes` blocks give the runs started inside them."""

    user_id: str | None = None
    session_id: str | None = None
    conversation_id: str | None = None
    attributes: Mapping[str, Primitive] = field(default_factory=lambda: MappingProxyType({}))

    def within(self, outer: Attribution) -> Attribution:
        """These values over `outer`'s: ours win, key by key."""
        return Attribution(
            self.user_id if self.user_id is not None else outer.user_id,
            self.session_id if self.session_id is not None else outer.session_id,
            self.conversation_id if self.conversation_id is not None else outer.conversation_id,
            MappingProxyType({**outer.attributes, **self.attributes}),
        )

    def span_attributes(self) -> dict[str, Primitive]:
        """The run span's attributes: the user's, then `user.id` and `session.id` when known."""
        out: dict[str, Primitive] = dict(self.attributes)
        if self.user_id is not None:
            out[sc.USER_ID] = self.user_id
        if self.session_id is not None:
            out[sc.SESSION_ID] = self.session_id
        return out


_NOTHING_GIVEN: Final = Attribution()
_given: contextvars.ContextVar[Attribution | None] = contextvars.ContextVar("otel_agents_run_attributes", default=None)


def _current() -> Attribution:
    return _given.get() or _NOTHING_GIVEN


def _identifier(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"run_attributes({name}={value!r}): expected a non-empty string")
    if len(value) > MAX_CHARS:
        raise ValueError(f"run_attributes({name}=...): {len(value)} characters, at most {MAX_CHARS}")
    return value


def _checked(attributes: object) -> Mapping[str, Primitive]:
    if attributes is None:
        return MappingProxyType({})
    if not isinstance(attributes, Mapping):
        raise TypeError(f"run_attributes(attributes=...): expected a mapping, not {type(attributes).__name__}")
    if len(attributes) > MAX_ATTRIBUTES:
        raise ValueError(f"run_attributes(attributes=...): {len(attributes)} keys, at most {MAX_ATTRIBUTES}")
    checked: dict[str, Primitive] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"run_attributes(attributes=...): key {key!r} is not a non-empty string")
        if len(key) > MAX_CHARS:
            raise ValueError(f"run_attributes(attributes=...): key {key[:40]!r}... is over {MAX_CHARS} characters")
        if key.startswith(RESERVED_PREFIXES):
            raise ValueError(
                f"run_attributes(attributes=...): {key!r} is reserved (gen_ai.* and otel_agents.* are "
                "otel-agents' own; use user_id=, session_id=, conversation_id= for those)"
            )
        if not isinstance(value, str | bool | int | float):
            raise TypeError(
                f"run_attributes(attributes=...): {key!r} is a {type(value).__name__}; "
                "expected a string, a number or a bool"
            )
        if isinstance(value, str) and len(value) > MAX_CHARS:
            raise ValueError(f"run_attributes(attributes=...): {key!r} is over {MAX_CHARS} characters")
        checked[key] = value
    return MappingProxyType(checked)


class run_attributes:  # a function to its users: `with otel_agents.run_attributes(...):`
    """Values for every run started inside this block (sync `with` or `async with`; nestable, the
    inner value winning per key): `user.id`, `session.id` and `gen_ai.conversation.id` on the run
    span (the conversation id also on its `invoke_agent` and `chat` spans), and `attributes` on
    the run span: at most 32, string keys used as given (`gen_ai.*` and `otel_agents.*` are
    reserved), strings, numbers or bools, keys and strings of at most 256 characters."""

    def __init__(
        self,
        *,
        user_id: str | None = None,
        session_id: str | None = None,
        conversation_id: str | None = None,
        attributes: Mapping[str, Primitive] | None = None,
    ) -> None:
        self._given = Attribution(
            _identifier("user_id", user_id),
            _identifier("session_id", session_id),
            _identifier("conversation_id", conversation_id),
            _checked(attributes),
        )
        # one stack of tokens per task: the same object may serve several tasks at once
        self._tokens: contextvars.ContextVar[tuple[contextvars.Token[Attribution | None], ...]] = (
            contextvars.ContextVar(f"otel_agents_run_attributes_{id(self):x}", default=())
        )

    def __enter__(self) -> run_attributes:
        merged = self._given.within(_current())
        if len(merged.attributes) > MAX_ATTRIBUTES:
            raise ValueError(
                f"run_attributes(attributes=...): {len(merged.attributes)} keys with the blocks around it, "
                f"at most {MAX_ATTRIBUTES}"
            )
        self._tokens.set((*self._tokens.get(), _given.set(merged)))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        *rest, token = self._tokens.get()
        self._tokens.set(tuple(rest))
        _given.reset(token)

    async def __aenter__(self) -> run_attributes:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def given_here() -> Attribution:
    """What the `run_attributes` blocks around this point give (taken where a run is started, with
    the run's parent: a stream made in one place and iterated in another is recorded as made)."""
    return _current()


def at_run_start(parent: Context | None, given: Attribution | None = None) -> Attribution:
    """What a run is given: `given` (else the `run_attributes` blocks around this point), else the
    baggage of `parent`."""
    given = _current() if given is None else given
    if given.user_id is not None and given.session_id is not None and given.conversation_id is not None:
        return given
    user, session, conversation = (_from_baggage(key, parent) for key in _BAGGAGE_KEYS)
    return given.within(Attribution(user, session, conversation))


_BAGGAGE_KEYS: Final = (sc.USER_ID, sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID)


def _from_baggage(key: str, parent: Context | None) -> str | None:
    value = baggage.get_baggage(key, parent)
    return value if isinstance(value, str) and value and len(value) <= MAX_CHARS else None


# --- conversations ---------------------------------------------------------------------------


@dataclass
class Conversation:
    id: str
    last_run: SpanContext | None = None
    """The latest run's span (what `save_state` carries)."""
    last_run_id: str | None = None
    resumed_from: SpanContext | None = None
    """The run before a `load_state`: the next run links to it (once)."""
    resumed_run_id: str | None = None


_conversations: weakref.WeakKeyDictionary[Any, Conversation] = weakref.WeakKeyDictionary()
"""Per team or agent, released with it (and at `reset()`)."""
_lock = threading.Lock()
process_state.new_locks_in_forked_child(__name__, "_lock")


def _forget_conversations() -> None:
    with _lock:
        _conversations.clear()


process_state.hold(
    __name__,
    "_conversations",
    bound="weak, per team or agent; its reset() forgets it",
    size=lambda: len(_conversations),
    forget=_forget_conversations,
)


def new_conversation_id() -> str:
    return uuid.uuid4().hex


def conversation_of(runner: object | None, given: str | None) -> tuple[str, SpanContext | None]:
    """The conversation id of a run of `runner` starting now, and the span it links to (the last
    run before the state it was loaded from, once)."""
    with _lock:
        conversation = _get(runner)
        chosen = given or (conversation.id if conversation is not None else None) or new_conversation_id()
        link = conversation.resumed_from if conversation is not None else None
        if runner is not None:
            kept = conversation if conversation is not None else Conversation(chosen)
            kept.id, kept.resumed_from = chosen, None
            _put(runner, kept)
        return chosen, link


def run_started(runner: object | None, span: SpanContext, run_id: str | None) -> None:
    with _lock:
        conversation = _get(runner)
        if conversation is not None:
            conversation.last_run, conversation.last_run_id = span, run_id


def forget(runner: object) -> None:
    """`reset()`: the next run starts a new conversation."""
    with _lock:
        try:
            _conversations.pop(runner, None)
        except TypeError:  # not hashable: none was kept for it
            pass


def with_conversation(runner: object, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """`save_state()`'s result with the conversation (id, last run) under `STATE_KEY`."""
    with _lock:
        conversation = _get(runner)
    if conversation is None or not isinstance(state, Mapping):
        return state
    saved: dict[str, Any] = {"conversation_id": conversation.id}
    last = conversation.last_run or conversation.resumed_from  # saved again before any new run
    if last is not None:
        saved["last_run"] = {
            "trace_id": format(last.trace_id, "032x"),
            "span_id": format(last.span_id, "016x"),
            "run_id": conversation.last_run_id if conversation.last_run is not None else conversation.resumed_run_id,
        }
    return {**state, STATE_KEY: saved}


def resume(runner: object, state: object) -> None:
    """`load_state(state)`: the runner goes on with the conversation the state carries."""
    saved = state.get(STATE_KEY) if isinstance(state, Mapping) else None
    if not isinstance(saved, Mapping) or not isinstance(saved.get("conversation_id"), str):
        forget(runner)  # a state we did not save: what it continues is not known, a new conversation
        return
    last_run = saved.get("last_run")
    run_id = last_run.get("run_id") if isinstance(last_run, Mapping) else None
    conversation = Conversation(
        saved["conversation_id"],
        resumed_from=_span_context(last_run),
        resumed_run_id=run_id if isinstance(run_id, str) else None,
    )
    with _lock:
        _put(runner, conversation)


def _span_context(saved: object) -> SpanContext | None:
    if not isinstance(saved, Mapping):
        return None
    try:
        trace_id, span_id = int(str(saved["trace_id"]), 16), int(str(saved["span_id"]), 16)
    except (KeyError, ValueError):
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _get(runner: object | None) -> Conversation | None:
    if runner is None:
        return None
    try:
        return _conversations.get(runner)
    except TypeError:  # not weakly referenceable: no conversation kept for it
        return None


def _put(runner: object, conversation: Conversation) -> None:
    try:
        _conversations[runner] = conversation
    except TypeError:
        pass

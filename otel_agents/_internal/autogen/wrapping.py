"""Every change otel-agents makes to AutoGen goes through here, so that it can be taken back.

Each wrapper is a `wrapt.FunctionWrapper` (`Wrapper`, made by `method_wrapper(...)` or
`function_wrapper(...)` from a function of wrapt's signature `(wrapped, instance, args, kwargs)`).
Two exceptions, each `mark`ed: the
class-creation hook of `on_subclass`, which wraps nothing when the base inherits
`__init_subclass__`, and the link cache of `private` (the hottest path; wrapt's call of a module
function costs some 6,700 instructions more than a closure's).
`replace(owner, name, wrap)` puts `wrap(original)` in place of `owner.name` and keeps a ledger of
what it replaced; `restore_all()` (`AutoGenInstrumentor.uninstrument()`) gives each original back,
by identity, wherever our wrapper is still the one in place. Where another instrumentation wrapped
ours afterwards, ours stays inside theirs and passes every call straight through (`active()` is
False), so theirs keeps working and we record nothing; instrumenting again wakes ours up there
(found through `__wrapped__`) rather than wrapping theirs a second time.
"""

from __future__ import annotations

import copy
import functools
import logging
import operator
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import wrapt

from otel_agents._internal import process_state

MARK: Final = "__otel_agents_wrapped__"
_MISSING: Final = object()
logger = logging.getLogger(__name__)
_lock = threading.RLock()
process_state.new_locks_in_forked_child(__name__, "_lock")


@dataclass(frozen=True)
class _Replaced:
    owner: Any
    name: str
    original: Any
    """What `owner.__dict__[name]` held before (`_MISSING`: it was inherited)."""
    wrapper: Any


_ledger: list[_Replaced] = []
_dormant: list[_Replaced] = []
"""Ours, left inside someone else's wrapper by `restore_all()`: woken again, not doubled, by `replace`."""
_active = False


def active() -> bool:
    """Whether our wrappers record anything (False after `restore_all()`)."""
    return _active


_every_run = False


def trace_every_run(on: bool) -> None:
    """Whether AutoGen is instrumented: a run started outside any traced run is traced, and a
    model call made outside any run gets its span. Otherwise (`configure(instrument=False)`, or a
    tap after `uninstrument()`) only the runs you tap are traced."""
    global _every_run
    _every_run = on


def every_run() -> bool:
    return _every_run


def _forget() -> None:
    global _every_run
    _every_run = False
    restore_all()


process_state.hold(
    __name__,
    "_ledger",
    "_active",
    "_every_run",
    "_restored",
    "_last_reading",
    "_ledger_outside_the_walk",
    bound="one entry per wrapped function, emptied by restore_all(); restore_all() is counted; one "
    "reading of the wrapped places (a few dozen methods), replaced by the next, dropped by restore_all(); "
    "the ledger's places outside the walk, worked out again when the ledger changes, dropped by restore_all()",
    size=lambda: len(_ledger) + _every_run,
    forget=_forget,
)
process_state.hold(
    __name__,
    "_dormant",
    bound="one entry per wrapper of ours restore_all() left inside another's wrapper (theirs is not "
    "ours to undo): asleep there, woken by instrumenting again; kept",
    size=lambda: len(_dormant),
    forget=None,
)


WrapperFunction = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]
"""wrapt's wrapper signature: `(wrapped, instance, args, kwargs)`; `wrapped` is bound already."""


class BoundWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[type-arg]
    """Ours, bound to an instance (or a class): copied, deep-copied and pickled as a bound method
    is (wrapt's own proxies refuse all three), so `copy.deepcopy(partial(agent.run, ...))` works
    as without otel-agents."""

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        instance = self._self_instance
        return getattr, (instance if instance is not None else self._self_owner, self.__name__)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        instance = self._self_instance
        return self if instance is None else getattr(copy.deepcopy(instance, memo), self.__name__)


class Wrapper(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    """One of ours: a `wrapt.FunctionWrapper` that `is_ours` knows by a class attribute (set on
    the instance, the mark would be written through to the function wrapped)."""

    __bound_function_wrapper__ = BoundWrapper  # wrapt's hook; also spares its slower lookup


setattr(Wrapper, MARK, True)
setattr(BoundWrapper, MARK, True)  # wrapt 1.x's bound proxies read attributes off the function, not ours


class MethodWrapper(Wrapper):
    """Ours, of a method: also when it is called straight from the class's `__dict__` with the
    instance first (as a hand-written patch over ours may do), the wrapper sees that instance."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args:  # no instance: as the method itself fails
            return self.__wrapped__(*args, **kwargs)
        instance = args[0]
        wrapper: WrapperFunction = self._self_wrapper  # type: ignore[assignment]
        return wrapper(functools.partial(self.__wrapped__, instance), instance, args[1:], kwargs)


def function_wrapper(function: WrapperFunction) -> Callable[[Any], Wrapper]:
    """`function` (of wrapt's signature; `instance` is None) as the `wrap` of a module's function
    that `replace` takes."""

    def wrap(original: Any) -> Wrapper:
        return Wrapper(original, function)

    return wrap


def method_wrapper(function: WrapperFunction) -> Callable[[Any], Wrapper]:
    """`function` (of wrapt's signature) as the `wrap` of a class's method that `replace` takes."""

    def wrap(original: Any) -> Wrapper:
        return MethodWrapper(original, function)

    return wrap


def mark(function: Any) -> Any:
    if not is_ours(function):  # a `Wrapper`, or a proxy of ours, is marked by its class
        setattr(function, MARK, True)
    return function


def is_ours(function: object) -> bool:
    """Whether `function` is a wrapper of ours, or another's with ours inside (in its chain of
    `__wrapped__`: functools.wraps does not copy a `Wrapper`'s mark, wrapt's proxies read it)."""
    depth = 16
    while depth > 0 and function is not None:
        if getattr(function, MARK, False):
            return True
        function = getattr(function, "__wrapped__", None)
        depth -= 1
    return False


def replace(owner: Any, name: str, wrap: Callable[[Any], Any], *, original: Any = _MISSING) -> bool:
    """Put `wrap(original)` in place of `owner.name` (once); False when it is already ours.

    `original` defaults to `owner.name` as found (inherited, for a class, when not in its own
    `__dict__`; then restoring removes ours rather than copying the inherited one in)."""
    global _active
    with _lock:
        _active = True
        own = owner.__dict__.get(name, _MISSING)  # a class or a module
        for entry in [e for e in _dormant if e.owner is owner and e.name == name]:
            _dormant.remove(entry)
            if entry.wrapper is own or _wraps(own, entry.wrapper):  # ours is still in there: woken up
                _ledger.append(entry)
                return False
        if is_ours(own):
            return False
        target = getattr(owner, name) if original is _MISSING else original
        wrapper = mark(wrap(target))
        setattr(owner, name, wrapper)
        _ledger.append(_Replaced(owner, name, own, wrapper))
        return True


def _wraps(outer: object, inner: object, depth: int = 16) -> bool:
    """Whether `inner` is in `outer`'s chain of `__wrapped__` (functools.wraps, wrapt)."""
    while depth > 0 and outer is not None:
        if outer is inner:
            return True
        outer = getattr(outer, "__wrapped__", None)
        depth -= 1
    return False


def wrap_subclasses(base: type, wrappers: Mapping[str, Callable[[Any], Any]]) -> None:
    """Replace `name` with `wrappers[name](original)` on `base` and each subclass defining it.

    Idempotent (classes defined, and methods assigned, since the last call are picked up);
    abstract methods and methods already wrapped are left alone.
    """
    with _lock:
        pending: list[type] = [base]
        while pending:
            cls = pending.pop()
            pending.extend(cls.__subclasses__())
            for name, wrap in wrappers.items():
                method = cls.__dict__.get(name)
                if _to_wrap(method) or (_dormant and _asleep(cls, name)):  # new, or ours to wake up
                    replace(cls, name, wrap, original=method)


SUBCLASS_HOOK: Final = "__init_subclass__"


def on_subclass(base: type, wrappers: Mapping[str, Callable[[Any], Any]]) -> bool:
    """From now on, every subclass of `base` gets `wrappers` on the methods it defines as it is
    created (`base.__init_subclass__`, the hook Python gives class creation): a model client class
    imported after instrumenting is traced from its first call, in a run or not. Calls the
    `__init_subclass__` that was in place (base's own, else the next in the MRO), then wraps;
    `restore_all()` takes the hook away. False when the hook is in place already."""

    def hook(original: Any) -> Any:
        own = base.__dict__.get(SUBCLASS_HOOK)
        before = own.__func__ if isinstance(own, classmethod) else None

        def __init_subclass__(cls: Any, /, **kwargs: Any) -> None:
            if before is not None:
                before(cls, **kwargs)
            else:
                super(base, cls).__init_subclass__(**kwargs)  # type: ignore[arg-type]
            if _active:
                try:
                    with _lock:
                        for name, wrap in wrappers.items():
                            method = cls.__dict__.get(name)
                            if _to_wrap(method):
                                replace(cls, name, wrap, original=method)
                except Exception:  # a class is always created, traced or not
                    logger.warning("otel-agents could not wrap %s", cls.__qualname__, exc_info=True)

        return classmethod(__init_subclass__)

    return replace(base, SUBCLASS_HOOK, hook)


def unwrapped_in_subclasses(base: type, names: tuple[str, ...]) -> bool:
    """Whether `wrap_subclasses(base, ...)` of these names would wrap anything now (a class
    defined, or a method assigned, since it last ran); reads only."""
    for cls in _classes_under(base):
        own = cls.__dict__
        for name in names:
            if _to_wrap(own.get(name)):
                return True
    return False


def _classes_under(base: type) -> list[type]:
    """`base` and every subclass of it, at any depth."""
    found: list[type] = []
    pending: list[type] = [base]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        found.append(cls)
    return found


def all_in_place() -> bool:
    """Whether every wrapper in the ledger is still in place (ours, or inside another's wrapper
    that carries our mark): a reload or a plain reassignment elsewhere is noticed here."""
    for entry in list(_ledger):
        now = entry.owner.__dict__.get(entry.name)
        if now is not entry.wrapper and not is_ours(now):
            return False
    return True


def attributes_now(bases: tuple[tuple[type, tuple[str, ...]], ...]) -> tuple[object, ...]:
    """What stands now at every place `all_in_place()` and `unwrapped_in_subclasses(base, names)`
    read: each ledger entry's attribute, then each name on each subclass of each base (None where
    the class defines none). A reading the same as an earlier one (`unchanged`) means nothing
    was wrapped, replaced, defined or assigned there since; reads only, and costs less than those
    two checks (a look at each method's mark and `__wrapped__` costs more than its identity)."""
    found: list[object] = [namespace.get(name) for namespace, name in _outside_the_walk(bases)]
    for base, names in bases:
        for cls in _classes_under(base):
            own = cls.__dict__
            for name in names:
                found.append(own.get(name))
    return tuple(found)


_ledger_outside_the_walk: tuple[int, int, object, tuple[tuple[Any, str], ...]] = (-1, -1, None, ())
"""(restore_all()'s count, the ledger's length, the bases, the places): the ledger's places that no
base's walk in `attributes_now` reads (the class-creation hooks, module functions, `run` methods),
each as its owner's namespace and the name. Within one count of restore_all() the ledger only
grows, so the two numbers say when to work them out again."""


def _outside_the_walk(bases: tuple[tuple[type, tuple[str, ...]], ...]) -> tuple[tuple[Any, str], ...]:
    global _ledger_outside_the_walk
    restored, length, of, places = _ledger_outside_the_walk
    if restored != _restored or length != len(_ledger) or of is not bases:
        restored, length = _restored, len(_ledger)  # (an entry added meanwhile: worked out again next time)
        walked = {(cls, name) for base, names in bases for cls in _classes_under(base) for name in names}
        places = tuple((e.owner.__dict__, e.name) for e in list(_ledger) if (e.owner, e.name) not in walked)
        _ledger_outside_the_walk = (restored, length, bases, places)
    return places


_last_reading: tuple[object, ...] = ()
"""The last reading of `attributes_now` that a full look found nothing to wrap at (`remember`);
`restore_all()` drops it (it holds our wrappers, and through them the classes they were in)."""


def unchanged(reading: tuple[object, ...]) -> bool:
    """Whether `reading` holds the same objects as the one remembered, place by place (by identity:
    a wrapt proxy is `==` to the function it wraps)."""
    before = _last_reading
    return len(reading) == len(before) and all(map(operator.is_, reading, before))


def remember(reading: tuple[object, ...]) -> None:
    """Keep `reading` (a full look found nothing to wrap there), or () to forget the last one."""
    global _last_reading
    _last_reading = reading


def _to_wrap(method: object) -> bool:
    return method is not None and not is_ours(method) and not getattr(method, "__isabstractmethod__", False)


def _asleep(owner: Any, name: str) -> bool:
    """Whether ours at `owner.name` was left inside someone else's wrapper by `restore_all()`."""
    return any(entry.owner is owner and entry.name == name for entry in _dormant)


_restored = 0


def restored() -> int:
    """How many times `restore_all()` has run: a wrapper put back since then may stand alone."""
    return _restored


def restore_all() -> int:
    """Give back every original we replaced, newest first; the number given back.

    An attribute someone else replaced after us is left as it is (ours inside it passes through)."""
    global _active, _restored, _last_reading, _ledger_outside_the_walk
    with _lock:
        _active = False
        _restored += 1
        _last_reading = ()
        _ledger_outside_the_walk = (-1, -1, None, ())
        restored = 0
        while _ledger:
            entry = _ledger.pop()
            if entry.owner.__dict__.get(entry.name) is not entry.wrapper:
                _dormant.append(entry)  # wrapped again by someone else: theirs stays, ours passes through
                continue
            if entry.original is _MISSING:
                delattr(entry.owner, entry.name)
            else:
                setattr(entry.owner, entry.name, entry.original)
            restored += 1
        return restored


def replaced() -> list[tuple[Any, str]]:
    """What is replaced now (owner, name): for tests and debugging."""
    with _lock:
        return [(entry.owner, entry.name) for entry in _ledger]

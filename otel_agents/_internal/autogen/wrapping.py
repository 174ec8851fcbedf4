"""Wrapping a method on every subclass of an AutoGen base class that defines it, once per class."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

MARK: Final = "__otel_agents_wrapped__"
_lock = threading.Lock()


def mark(function: Any) -> Any:
    setattr(function, MARK, True)
    return function


def wrap_subclasses(base: type, wrappers: Mapping[str, Callable[[Any], Any]]) -> None:
    """Replace `name` with `wrappers[name](original)` on `base` and each subclass defining it.

    Idempotent and cheap to repeat (classes defined since the last call are picked up); abstract
    methods and methods already wrapped are left alone.
    """
    with _lock:
        pending: list[type] = [base]
        while pending:
            cls = pending.pop()
            pending.extend(cls.__subclasses__())
            for name, wrap in wrappers.items():
                method = cls.__dict__.get(name)
                if method is None or getattr(method, MARK, False) or getattr(method, "__isabstractmethod__", False):
                    continue
                setattr(cls, name, mark(wrap(method)))

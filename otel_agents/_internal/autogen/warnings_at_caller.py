"""AutoGen's warnings point at the application's call, not at otel-agents' wrappers.

AutoGen warns from inside a model call with `stacklevel=2` ("Resolved model mismatch ...", from
the OpenAI client's `create`): the frame it blames is `create`'s caller, which, once `create` is
wrapped, is our wrapper. While AutoGen is instrumented, `warnings.warn` (the module attribute
AutoGen calls) is replaced, through the wrapping ledger, by one that moves the blame past
otel-agents' frames (and wrapt's, where its C extension is off) to the first frame outside
them, as it would be without us; every other
warning is passed on with its stack level as given. Python 3.11 has no public way for the
callee's warning to skip the frames between (3.12's `skip_file_prefixes` is the caller's to pass).
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, Final

from otel_agents._internal.autogen import wrapping

_HIDDEN: Final = ("otel_agents.", "wrapt.")
"""Modules whose frames a warning's blame moves past: ours, and wrapt's (when its C extension is off)."""


def _warn_arguments(
    message: Any, category: Any = None, stacklevel: int = 1, source: Any = None, **kwargs: Any
) -> tuple[Any, Any, int, Any, dict[str, Any]]:
    return message, category, stacklevel, source, kwargs


@wrapping.function_wrapper
def _wrap_warn(wrapped: Any, instance: None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        message, category, stacklevel, source, rest = _warn_arguments(*args, **kwargs)
    except TypeError:  # as `warnings.warn` itself says it
        wrapped(*args, **kwargs)
        return
    wanted = stacklevel if isinstance(stacklevel, int) and stacklevel > 0 else 1
    # the frame blamed: the `wanted`-th up from this one, counting only frames that would be there
    # without us (the warner's own is the first); `level` counts every frame up to it
    frame, level, seen = inspect.currentframe(), 1, 0
    while frame is not None and frame.f_back is not None and seen < wanted:
        frame, level = frame.f_back, level + 1
        if not frame.f_globals.get("__name__", "").startswith(_HIDDEN):
            seen += 1
    wrapped(message, category, level, source, **rest)


def install() -> None:
    wrapping.replace(warnings, "warn", _wrap_warn)

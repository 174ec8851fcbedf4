"""AutoGen's warnings point at the application's call, not at otel-agents' wrappers.

AutoGen warns from inside a model call with `stacklevel=2` ("Resolved model mismatch ...", from
the OpenAI client's `create`): the frame it blames is `create`'s caller, which, once `create` is
wrapped, is our wrapper. While AutoGen is instrumented, `warnings.warn` (the module attribute
AutoGen calls) is replaced, through the wrapping ledger, by one that moves the blame past
otel-agents' frames to the first frame outside them, as it would be without us; every other
warning is passed on with its stack level as given. Python 3.11 has no public way for the
callee's warning to skip the frames between (3.12's `skip_file_prefixes` is the caller's to pass).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any, Final

from otel_agents._internal.autogen import wrapping

_OURS: Final = "otel_agents."


def _wrap_warn(original: Callable[..., None]) -> Callable[..., None]:
    def warn(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None, **kwargs: Any) -> None:
        level = stacklevel if isinstance(stacklevel, int) and stacklevel > 0 else 1
        frame = inspect.currentframe()  # this one; `level` frames up is the one the warning blames
        for _ in range(level):
            frame = frame.f_back if frame is not None else None
        while frame is not None and frame.f_globals.get("__name__", "").startswith(_OURS):
            frame = frame.f_back
            level += 1
        original(message, category, level + 1, source, **kwargs)

    warn.__wrapped__ = original  # type: ignore[attr-defined]
    return warn


def install() -> None:
    wrapping.replace(warnings, "warn", _wrap_warn)

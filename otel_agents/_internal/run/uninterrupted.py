"""Ending a run's span where no signal handler's exception can land half-way through.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread is,
and raises there what the handler raises (`sys.exit` in a SIGTERM or SIGALRM handler, SIGINT's
`KeyboardInterrupt`). Inside the SDK's `Span.end()`, after the span's end time is set and before
the span processors have it, that loses the run: the span counts as ended, so nothing ends it
again, and no exporter ever sees it. Blocking the signals cannot prevent it: the kernel hands a
signal to any thread that does not block it, and Python then runs the handler in the main thread
all the same. So for that step the Python handlers themselves are set aside: each signal that
comes is noted, and once the span has ended the handlers are put back and the handler of each
signal noted is run, right after, where Python would have run it (a signal's C-level effects,
such as asyncio's wakeup fd, happened when it came).

- Only in the main thread (Python runs handlers, and lets them be set, nowhere else); elsewhere
  the span just ends.
- Handlers set outside Python (None), the default action and an ignored signal are left alone,
  and so are the handlers of signals apps do not stop on (`_SIGNALS` says which are looked at);
  but SIGINT's default or ignoring, set since a look found a Python handler, is set aside once
  more (its signal, should it come meanwhile, raised again once it is back).
- A handler whose signal came before the handlers were set aside runs before the span ends: the
  span is still open then, and the caller's fallback ends it.
- Looking at a handler costs: the `signal` module turns a Python handler into its value by
  formatting a ValueError with the handler's repr, and asyncio's SIGINT handler holds the main task
  (some 67,000 instructions a look; a default handler's look some 5,600). So SIGINT, once a look
  found a Python handler there, is set aside last and in one call, the swap's own answer being the
  look: Python's table of handlers never holds None for a signal again once Python has set one, so
  what that answer names can always be put back, and with every other handler set aside by then, no
  handler can raise between the swap and its answer being noted.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Final

from otel_agents._internal import process_state

_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGBREAK")
    if hasattr(signal, name)
)
"""The signals whose handlers apps raise from (to stop, time out, reload). Looking at a signal's
handler costs (the module's last point); signals apps handle without raising (SIGCHLD's reaping,
SIGWINCH, profilers' timers) are left alone."""


_Handler = Callable[[int, FrameType | None], object] | int | None
"""What `signal.signal` answers: a Python handler, `SIG_DFL` or `SIG_IGN` (None: set outside
Python, never answered for a signal Python has set a handler of)."""
_SIGINT: Final = signal.SIGINT
_sigint_in_one_call = False
"""Whether a look found a Python handler of SIGINT (a run's end has set it aside): from then on it
is set aside in one call, last."""


def _look_at_sigint_again() -> None:
    global _sigint_in_one_call
    _sigint_in_one_call = False


process_state.hold(
    __name__,
    "_sigint_in_one_call",
    bound="one flag",
    size=lambda: int(_sigint_in_one_call),
    forget=_look_at_sigint_again,
)


def uninterrupted(action: Callable[[], object]) -> None:
    """Call `action` (a span's `end`) with the main thread's Python signal handlers set aside,
    then run those whose signals came meanwhile."""
    if threading.current_thread() is not threading.main_thread():
        action()
        return
    came: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        came.append(signum)

    global _sigint_in_one_call
    set_aside: dict[int, _Handler] = {}
    try:
        in_one_call = _sigint_in_one_call
        for signum in _SIGNALS:
            if in_one_call and signum == _SIGINT:
                continue  # below, last
            handler = signal.getsignal(signum)
            if callable(handler):
                set_aside[signum] = handler  # noted first: whatever lands next, it is put back
                try:
                    signal.signal(signum, note)
                except (ValueError, OSError):  # not the main interpreter: its handlers are not ours to set
                    del set_aside[signum]
                    in_one_call = False
                    break
                if signum == _SIGINT:
                    _sigint_in_one_call = True
        if in_one_call:
            set_aside[_SIGINT] = signal.signal(_SIGINT, note)
            if not callable(set_aside[_SIGINT]):  # the default or ignored since: put back all the same
                _sigint_in_one_call = False  # (and looked at next time)
        action()
    finally:
        _put_back(set_aside, came)


def _put_back(set_aside: dict[int, _Handler], came: list[int]) -> None:
    """Put every handler set aside back, even when one put back already raises on the way (its
    signal came in between); then run the handler of each signal noted, as Python would have (a
    signal whose handler was the default or ignored is raised again, now that it is back)."""
    raised: BaseException | None = None
    for signum, handler in set_aside.items():
        if handler is None:  # (never: see _Handler) it cannot be set back, and would be tried for ever
            continue
        while True:  # `signal.signal` runs the handlers of signals pending first, and when one
            try:  # raises, it has not set the handler: set it again
                signal.signal(signum, handler)
                break
            except BaseException as exc:
                raised = raised or exc
    for signum in dict.fromkeys(came):  # once each: the kernel too keeps one of each pending
        handler = set_aside[signum]
        try:
            if callable(handler):
                handler(signum, None)
            else:
                signal.raise_signal(signum)
        except BaseException as exc:  # (the frame a handler is given may be None)
            raised = raised or exc
    if raised is not None:
        raise raised

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
  and so are the handlers of signals apps do not stop on (`_SIGNALS` says which are looked at).
- A handler whose signal came before the handlers were set aside runs before the span ends: the
  span is still open then, and the caller's fallback ends it.
- A process forked meanwhile (from another thread: a process pool's worker) gets the handlers
  back at once: it would otherwise keep the note for good (a SIGTERM would no longer stop it).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

from otel_agents._internal import process_state

_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGBREAK")
    if hasattr(signal, name)
)
"""The signals whose handlers apps raise from (to stop, time out, reload). Looking at a signal's
handler costs: the `signal` module turns a Python handler into its value by formatting a ValueError
with the handler's repr (asyncio's SIGINT handler holds the main task: some 0.1 M instructions a
look). Signals apps handle without raising (SIGCHLD's reaping, SIGWINCH, profilers' timers) are
left alone."""


def uninterrupted(action: Callable[[], object]) -> None:
    """Call `action` (a span's `end`) with the main thread's Python signal handlers set aside,
    then run those whose signals came meanwhile."""
    if threading.current_thread() is not threading.main_thread():
        action()
        return
    came: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        came.append(signum)

    global _set_aside_now
    set_aside: dict[int, _Handler] = {}
    _set_aside_now = set_aside  # (a fork from another thread from now on puts them back in its child)
    try:
        for signum in _SIGNALS:
            handler = signal.getsignal(signum)
            if callable(handler):
                set_aside[signum] = handler  # noted first: whatever lands next, it is put back
                try:
                    signal.signal(signum, note)
                except (ValueError, OSError):  # not the main interpreter: its handlers are not ours to set
                    del set_aside[signum]
                    break
        action()
    finally:
        try:
            _put_back(set_aside, came)
        finally:
            _set_aside_now = None


_Handler = Callable[[int, FrameType | None], object]
_set_aside_now: dict[int, _Handler] | None = None
"""The handlers set aside while a run's span ends in the main thread, else None."""


def _put_back_in_child() -> None:
    """(In a forked child.) The handlers set aside in the parent as it forked, put back."""
    global _set_aside_now
    set_aside, _set_aside_now = _set_aside_now, None
    for signum, handler in list((set_aside or {}).items()):
        try:
            signal.signal(signum, handler)
        except Exception:  # the others are put back all the same
            continue


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_put_back_in_child)
process_state.hold(
    __name__,
    "_set_aside_now",
    bound="the handlers set aside while a run's span ends (at most one per signal looked at), else None",
    size=lambda: len(_set_aside_now or ()),
    forget=None,
)


def _put_back(set_aside: dict[int, _Handler], came: list[int]) -> None:
    """Put every handler set aside back, even when one put back already raises on the way (its
    signal came in between); then run the handler of each signal noted, as Python would have."""
    raised: BaseException | None = None
    for signum, handler in set_aside.items():
        while True:  # `signal.signal` runs the handlers of signals pending first, and when one
            try:  # raises, it has not set the handler: set it again
                signal.signal(signum, handler)
                break
            except BaseException as exc:
                raised = raised or exc
    for signum in dict.fromkeys(came):  # once each: the kernel too keeps one of each pending
        try:
            set_aside[signum](signum, None)
        except BaseException as exc:  # (the frame a handler is given may be None)
            raised = raised or exc
    if raised is not None:
        raise raised

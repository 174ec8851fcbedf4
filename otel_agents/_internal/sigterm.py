"""SIGTERM: deliver what the pipeline holds, then let the signal do what it would have done.

A process stopped by SIGTERM runs no exit handlers when the signal's default action ends it, and
uvicorn stops that way on purpose (after its graceful shutdown it puts back the handlers it found
and raises the signal again), so the spans still queued for export would be lost. `install()` puts
a handler in front of the one it finds; when the signal comes it exports within
`OTEL_AGENTS_EXIT_TIMEOUT_S`, then hands the signal on: to the handler it found, when that was a
Python function; else it puts back the default action and raises the signal again, so the process
ends when and with the status it would have.

- Installed from the main thread only (Python's rule), over the default action or a Python
  function; an ignored SIGTERM (or a handler set outside Python) is left as it is.
- A handler installed after ours that never puts ours back is the one that runs: ours does
  nothing then (the process's exit handlers still run when that handler ends it with `sys.exit`).
- Open runs are ended (stop kind `shutdown`) only where the signal ends the process; a Python
  handler handed the signal may shut down gracefully and let them finish.
- The export runs in a thread of its own and is waited for at most the timeout: the signal
  interrupts the main thread anywhere, perhaps holding a lock the export needs.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from otel_agents._internal import process_state
from otel_agents._internal.export.soon import FLUSH_SOON
from otel_agents._internal.run.workflow import end_open_runs
from otel_agents._internal.telemetry import latest
from otel_agents._internal.tracing import globals as current_recording

logger = logging.getLogger(__name__)

_Handler = Callable[[int, FrameType | None], Any] | int | None


class SigtermHandler:
    """Ours: export, then hand the signal on to `previous` (the handler found at install)."""

    def __init__(self, previous: _Handler) -> None:
        self.previous = previous

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        hands_on = callable(self.previous)
        try:
            export_before_exit(end_runs=not hands_on)
        except Exception:  # the signal is handed on whatever the export did
            logger.warning("otel-agents: exporting at SIGTERM failed", exc_info=True)
        if callable(self.previous):
            self.previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)


def export_before_exit(*, end_runs: bool) -> None:
    """Deliver what the latest pipeline holds (or the global providers, as under the distro) and
    every provider a run's end asked to flush, within `OTEL_AGENTS_EXIT_TIMEOUT_S`; with
    `end_runs`, the runs still open are ended first (`shutdown`) and delivered with the rest."""
    from otel_agents._internal.export.pipeline import shutdown_within

    telemetry = latest()
    # without `configure()` (under the distro): the global providers, through a view of them
    recording = telemetry.recording if telemetry is not None else current_recording.current(None)
    timeout_s = recording.settings.exit_timeout_s
    timeout_ms = max(1, int(timeout_s * 1000))
    tracer_provider, meter_provider = recording.sdk_tracer_provider, recording.meter_provider
    providers = [p for p in FLUSH_SOON.pending() if p is not tracer_provider]

    def export() -> None:
        if end_runs:
            end_open_runs(None)
        for provider in providers:
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                flush(timeout_ms)
        if telemetry is not None:
            telemetry.force_flush(timeout_ms)
            return
        for provider in (tracer_provider, meter_provider):
            flush = getattr(provider, "force_flush", None)  # the API's no-op providers have none
            if flush is not None:
                flush(timeout_ms)

    shutdown_within([export], timeout_s)


_lock = threading.Lock()
process_state.new_locks_in_forked_child(__name__, "_lock")


def _ours_installed() -> bool:
    try:
        return isinstance(signal.getsignal(signal.SIGTERM), SigtermHandler)
    except (ValueError, OSError):
        return False


process_state.hold(
    __name__,
    "SigtermHandler",
    bound="one handler, in signal's table; uninstall() puts back the one it found",
    size=_ours_installed,
    forget=lambda: uninstall(),  # `uninstall` is defined below
)


def install() -> None:
    """Put our handler in front of SIGTERM's, unless it is ours already, SIGTERM is ignored or
    handled outside Python, or this is not the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        try:
            found = signal.getsignal(signal.SIGTERM)
            if isinstance(found, SigtermHandler) or not (found is signal.SIG_DFL or callable(found)):
                return
            signal.signal(signal.SIGTERM, SigtermHandler(found))
        except (ValueError, OSError):  # not the main interpreter: signals are not ours to handle
            logger.debug("otel-agents: could not install the SIGTERM handler", exc_info=True)


def uninstall() -> None:
    """Put back the handler ours was installed over, if ours is still the one installed."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        try:
            found = signal.getsignal(signal.SIGTERM)
            if isinstance(found, SigtermHandler):
                signal.signal(signal.SIGTERM, found.previous)
        except (ValueError, OSError, TypeError):
            logger.debug("otel-agents: could not put SIGTERM's handler back", exc_info=True)

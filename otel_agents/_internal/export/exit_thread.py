"""A thread started ahead of the process's exit, so that the exit can wait for its shutdown with
a timeout.

From Python 3.12 on, no thread can be started once the interpreter has begun to exit, and exit
handlers run after that. A shutdown run in the exiting thread itself cannot be given up on: an
export under way to an endpoint that is down retries up to its exporter's timeout (10 s), and the
metrics' last export after it as long again. So `configure()` starts this daemon thread, idle on an
event, while threads can still start; at exit the shutdown runs on it and the exiting thread waits
for it `OTEL_AGENTS_EXIT_TIMEOUT_S` at most (a daemon thread never holds the exit). Where a new
thread can start (Python 3.11) one is started as before. A forked child starts its own at its first
`configure()`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from otel_agents._internal import process_state

logger = logging.getLogger(__name__)


class ExitThread:
    """One idle daemon thread that runs one job at exit; `run()` falls back to it."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._job: Callable[[], object] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the idle thread unless it runs already (or no thread can start any more)."""
        with self._lock:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._wait, name="otel-agents-exit", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # already exiting: `run()` runs the job in its caller
                return
            self._thread = thread

    def started(self) -> bool:
        """Whether the idle thread is there."""
        return self._thread is not None

    def run(self, job: Callable[[], object], seconds: float) -> bool:
        """Run `job` on another thread and wait for it `seconds` at most: a new thread, else the idle
        one; where neither is there, in the caller, unbounded. True if it finished in time."""
        thread = threading.Thread(target=_quietly, args=(job,), name="otel-agents-exit", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # the interpreter is exiting (Python 3.12+)
            with self._lock:
                idle, self._thread = self._thread, None
                if idle is not None:
                    self._job = job
                    self._wake.set()
            if idle is None:
                _quietly(job)
                return True
            return self._done.wait(timeout=max(0.0, seconds))
        thread.join(timeout=max(0.0, seconds))
        return not thread.is_alive()

    def _wait(self) -> None:
        self._wake.wait()
        try:
            if self._job is not None:
                _quietly(self._job)
        finally:
            self._done.set()


def _quietly(job: Callable[[], object]) -> None:
    try:
        job()
    except Exception:
        logger.warning("otel-agents: shutting down at exit failed", exc_info=True)


EXIT_THREAD = ExitThread()
process_state.hold(
    __name__,
    "EXIT_THREAD",
    bound="one idle daemon thread, started before the exit needs it (a new one may not start then); kept",
    size=lambda: int(EXIT_THREAD.started()),
    forget=None,
)

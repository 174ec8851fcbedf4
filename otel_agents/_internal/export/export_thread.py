"""The export thread: one daemon thread that flushes soon after a run ends and runs the exit's
shutdown.

Soon after a run: a run's spans wait in a batch queue until the SDK's schedule
(`OTEL_BSP_SCHEDULE_DELAY`) exports them, and a service stopped before then loses them. So a root
run's end asks (`flush_soon`) for the provider that records it to be flushed, on this thread,
never in the caller's (an event loop must not wait for an export). The caller's cost is a dict
insertion under a lock and setting an event. Requests coalesce: one flush per provider however
many runs ended while the previous one ran (by identity: a provider need not be hashable).

At exit: from Python 3.12 on, no thread can start once the interpreter has begun to exit, and exit
handlers run after that. A shutdown run in the exiting thread itself cannot be given up on: an
export under way to an endpoint that is down retries up to its exporter's timeout (10 s), and the
metrics' last export after it as long again. So `configure()` starts this thread while threads can
still start, and at exit (`run_at_exit`) the shutdown runs on it after the flush under way, if
any, while the exiting thread waits `OTEL_AGENTS_EXIT_TIMEOUT_S` at most; flushes still asked for
are dropped then (the shutdown delivers what they would have). Where the thread is not running it
is started for the job; where none can start, the job runs in the caller, unbounded.

- A daemon: it never keeps the process alive. A forked child starts its own at its first use.
- Public SDK API only: `TracerProvider.force_flush()`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

THREAD_NAME = "otel-agents-export"


class ExportThread:
    """The process's export thread (`EXPORT_THREAD`): started by `start()` or the first request."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # also in a forked child: the parent's thread is not there, its requests are the parent's
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: dict[int, Any] = {}  # by id: a provider need not be hashable
        self._exit_job: Callable[[], object] | None = None
        self._exit_done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start the thread unless it runs already; False where no thread can start any more."""
        with self._lock:
            return self._started()

    def _started(self) -> bool:  # under the lock
        if self._thread is not None:
            return True
        thread = threading.Thread(target=self._work, name=THREAD_NAME, daemon=True)
        try:
            thread.start()
        except RuntimeError:  # the interpreter is exiting (Python 3.12+)
            return False
        self._thread = thread
        return True

    def flush_soon(self, provider: Any) -> None:
        """Flush `provider` soon (its `force_flush()`, on this thread); returns at once. Once the
        exit's shutdown is handed over, nothing: it delivers what the flush would have."""
        with self._lock:
            if self._exit_job is not None or not self._started():
                return
            self._pending[id(provider)] = provider
        if not self._wake.is_set():
            self._wake.set()

    def forget(self, provider: Any) -> None:
        """`provider` is shut down: no flush of it is pending any more."""
        with self._lock:
            self._pending.pop(id(provider), None)

    def pending(self) -> list[Any]:
        """The providers asked for and not flushed yet."""
        with self._lock:
            return list(self._pending.values())

    def run_at_exit(self, job: Callable[[], object], seconds: float) -> bool:
        """Drop the flushes asked for, run `job` on this thread and wait for it `seconds` at most
        (in the caller, unbounded, where no thread can run it). True if it finished in time."""
        with self._lock:
            self._pending.clear()
            running = self._exit_job is None and self._started()
            if running:
                self._exit_job = job
        if not running:
            _quietly(job)
            return True
        self._wake.set()
        return self._exit_done.wait(timeout=max(0.0, seconds))

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            self._wake.wait()
            with self._lock:
                if self._thread is not me:
                    return  # forked: this object now belongs to another process's thread
                self._wake.clear()
                providers, self._pending = self._pending, {}
                job = self._exit_job
            if job is not None:
                try:
                    _quietly(job)
                finally:
                    self._exit_done.set()
                return
            for provider in providers.values():
                flush = getattr(provider, "force_flush", None)
                if flush is None:
                    continue
                try:
                    flush()
                except Exception:  # the next run's spans are flushed all the same
                    logger.debug("otel-agents: flushing a provider after a run failed", exc_info=True)


def _quietly(job: Callable[[], object]) -> None:
    try:
        job()
    except Exception:
        logger.warning("otel-agents: shutting down at exit failed", exc_info=True)


EXPORT_THREAD = ExportThread()
"""The process's one export thread."""

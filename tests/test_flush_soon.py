"""The flush after a run's end: at once after a quiet spell, and at most one each interval while runs
keep ending (a thread that wants the GIL costs the event loop for as long as it waits for it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from otel_agents._internal.export.soon import FLUSH_INTERVAL_S, FlushSoon

WAIT_S = 10.0
"""How long a test waits for a flush it expects (it comes in milliseconds)."""


class Provider:
    """A provider that notes when each flush of it began, and says so; `hold` keeps its flushes
    from returning until the test sets it."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        self.flushed_at: list[float] = []
        self.flushed = threading.Semaphore(0)
        self.hold = hold

    def force_flush(self) -> bool:
        self.flushed_at.append(time.monotonic())
        self.flushed.release()
        if self.hold is not None:
            assert self.hold.wait(WAIT_S)
        return True

    def wait_for_flush(self) -> bool:
        return self.flushed.acquire(timeout=WAIT_S)


def flush_thread_of(flush_soon: FlushSoon) -> threading.Thread:
    (thread,) = [t for t in threading.enumerate() if t.name == "otel-agents-flush-soon" and t is flush_soon._thread]
    return thread


@pytest.fixture
def flush_soon() -> Iterator[FlushSoon]:
    """A flush thread of the test's own, an hour between two flushes unless the test sets less
    before its first request; stopped after the test."""
    flushing = FlushSoon(interval_s=3600.0)
    yield flushing
    flushing.stop()


def test_the_interval_is_a_fifth_of_a_second() -> None:
    assert FLUSH_INTERVAL_S == 0.2
    assert FlushSoon().interval_s == FLUSH_INTERVAL_S


def test_a_run_ending_after_a_quiet_spell_is_flushed_at_once(flush_soon: FlushSoon) -> None:
    provider = Provider()
    flush_soon.request(provider)
    assert provider.wait_for_flush(), "the first flush waited for the interval"


def test_runs_ending_within_the_interval_share_one_flush_an_interval_after_the_last(flush_soon: FlushSoon) -> None:
    flush_soon.interval_s = 2.0
    first, second = Provider(), Provider()
    flush_soon.request(first)
    assert first.wait_for_flush()
    flush_soon.request(first)
    flush_soon.request(second)
    flush_soon.request(first)
    assert first.wait_for_flush() and second.wait_for_flush()
    assert len(first.flushed_at) == 2, "the requests within the interval were flushed once"
    assert first.flushed_at[1] - first.flushed_at[0] >= 2.0 * 0.9, "flushed again within the interval"
    assert not flush_soon.pending()


def test_stop_ends_the_thread_waiting_out_the_interval_and_drops_what_waited(flush_soon: FlushSoon) -> None:
    provider = Provider()
    flush_soon.request(provider)
    assert provider.wait_for_flush()
    thread = flush_thread_of(flush_soon)
    flush_soon.request(provider)  # waits out the hour
    assert flush_soon.pending() == [provider]
    flush_soon.stop()
    thread.join(timeout=WAIT_S)
    assert not thread.is_alive(), "the thread still waits out the interval after stop()"
    assert provider.flushed_at[1:] == [] and not flush_soon.pending()


def test_forgetting_the_last_provider_ends_the_thread_waiting_out_the_interval(flush_soon: FlushSoon) -> None:
    provider = Provider()
    flush_soon.request(provider)
    assert provider.wait_for_flush()
    thread = flush_thread_of(flush_soon)
    flush_soon.request(provider)
    flush_soon.forget(provider)  # shut down: its shutdown sends what it holds
    thread.join(timeout=WAIT_S)
    assert not thread.is_alive()
    assert not flush_soon.running()


def test_a_request_after_stop_is_flushed_at_once_by_a_new_thread(flush_soon: FlushSoon) -> None:
    provider = Provider()
    flush_soon.request(provider)
    assert provider.wait_for_flush()
    flush_soon.stop()
    flush_soon.request(provider)
    assert provider.wait_for_flush(), "a new thread waited for the old one's interval"


def test_a_new_thread_keeps_the_interval_too(flush_soon: FlushSoon) -> None:
    flush_soon.interval_s = 2.0
    provider = Provider()
    flush_soon.request(provider)
    assert provider.wait_for_flush()
    flush_soon.stop()
    flush_soon.request(provider)  # a new thread: at once
    assert provider.wait_for_flush()
    flush_soon.request(provider)
    assert provider.wait_for_flush()
    assert provider.flushed_at[2] - provider.flushed_at[1] >= 2.0 * 0.9, "the new thread kept no interval"


def test_a_thread_stopped_while_it_flushes_ends_once_the_flush_returns(flush_soon: FlushSoon) -> None:
    release = threading.Event()
    slow, other = Provider(hold=release), Provider()
    flush_soon.request(slow)
    assert slow.wait_for_flush()  # the first thread is inside the slow flush
    first = flush_thread_of(flush_soon)
    flush_soon.stop()
    flush_soon.request(other)  # a second thread takes the request (and clears the wake-up)
    try:
        assert other.wait_for_flush()
        release.set()
        first.join(timeout=WAIT_S)
        assert not first.is_alive(), "the stopped thread lingers after its flush"
    finally:
        release.set()

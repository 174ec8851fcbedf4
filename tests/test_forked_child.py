"""A child forked while another thread of the parent was inside otel-agents (a worker pool forking
while a run ends elsewhere): the child's runs are traced, not left waiting for ever on a lock that
a thread the child does not have held at the fork."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal import process_state
from otel_agents._internal.run import attribution, outcomes
from otel_agents._internal.tracing import publish_roots, registry
from tests.support.forks import said_in_a_forked_child
from tests.support.teams import writers_room


def _every_lock_renewed_at_a_fork() -> list[object]:
    return [getattr(owner, name) for owner, names in list(process_state._locks_to_renew.items()) for name in names]


def _a_run() -> str:
    """Configure, run a team and record the run's outcome: the exported roots' names."""
    gc.enable()  # (the parent held it off across the fork)
    exported = InMemorySpanExporter()
    telemetry = otel_agents.configure(span_exporter=exported, store=False)
    result = asyncio.run(writers_room(max_messages=3).run(task="go"))
    otel_agents.record_outcome(result, "accepted")
    telemetry.force_flush()
    return ",".join(span.name for span in exported.get_finished_spans() if span.parent is None)


@pytest.mark.every_python
def test_a_child_forked_while_another_thread_held_otel_agents_locks_traces_its_own_runs() -> None:
    otel_agents.configure(span_exporter=InMemorySpanExporter(), store=False)
    asyncio.run(writers_room(max_messages=3).run(task="warm up"))  # every lock made and used once
    locks = _every_lock_renewed_at_a_fork()
    renewed = {id(lock) for lock in locks}
    for module_lock in (registry.REGISTRY._lock, outcomes._lock, attribution._lock, publish_roots._lock):
        assert id(module_lock) in renewed, "the locks on a run's path are among them"

    holding, release = threading.Event(), threading.Event()
    held: list[object] = []

    def another_thread_inside_otel_agents() -> None:
        try:
            for lock in locks:
                if not lock.acquire(timeout=30):  # type: ignore[attr-defined]
                    return  # held elsewhere: the test fails below, it does not hang
                held.append(lock)
            holding.set()
            release.wait(timeout=120)
        finally:
            for lock in reversed(held):
                lock.release()  # type: ignore[attr-defined]
            holding.set()

    # no collection here while the locks are held: one that ended a run an earlier test dropped
    # would wait for them in this thread, and the thread holding them waits for this one
    gc.disable()
    thread = threading.Thread(target=another_thread_inside_otel_agents)
    thread.start()
    try:
        assert holding.wait(timeout=60) and len(held) == len(locks), "another thread holds them all"
        said, status = said_in_a_forked_child(_a_run)
    finally:
        release.set()
        thread.join(timeout=60)
        gc.enable()
    assert said == "invoke_workflow writers-room", f"the child's run: {said or 'stuck on a lock'} (status {status})"

"""Outcomes (DESIGN section 3): what a run achieved, told by your callable as the run ends
(`configure(outcome=...)`, `OTEL_AGENTS_OUTCOME`), or by `record_outcome()` at any time after.

- As the run ends, before its span ends and before its keep decision: the callable gets the
  `TaskResult` (or `Response`) the run returned, bounded by 5 s; its outcome is a
  `gen_ai.evaluation.result` event on the run span, and counted (`otel_agents.run.outcomes`).
- While the run is open, `record_outcome(run_id, ...)` adds the same event to its span.
- After it ended: the embedded store, the metric, and a log event in the run's trace context where
  the application has a logs pipeline (a global SDK `LoggerProvider`: the distro's with
  `OTEL_LOGS_EXPORTER`, or one the app set up; otel-agents sets up none of its own).

Memory: the runs of the last `RECENT_RUNS` starts are known in memory (their id, trace, outcomes);
a result a run returned is known while the application holds it (a weak reference) and the run is
(a run `record_outcome(run_id)` puts back into the table is found by its id only).
An older run is found by its id in the store. An ended run nobody has named yet is two ints in the
table (its id, and its trace, span and team packed): under 200 bytes with the table's slots, where
a `RunRef` with its id's text took some 290 (a run the outcome callable named keeps its `RunRef`).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
import logging
import re
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from opentelemetry import trace

from otel_agents._internal import keys as sc
from otel_agents._internal import process_state
from otel_agents._internal.export import otel_conventions as otel
from otel_agents._internal.genai.content import ContentPolicy
from otel_agents._internal.genai.outcomes import Outcome, checked, from_callable
from otel_agents._internal.run.workflow import WorkflowSpan
from otel_agents._internal.tracing.globals import current

logger = logging.getLogger(__name__)

RECENT_RUNS: Final = 4096
"""Runs known in memory, by id (the oldest started forgotten first; the store still knows them)."""
CALLABLE_TIMEOUT_S: Final = 5.0
_SPAN_ID_BITS: Final = (1 << 64) - 1
_IDS_BITS: Final = 192
"""A packed entry: its team's number above the trace id (128 bits) and span id (64 bits)."""
_DRAWN_ID: Final = re.compile(r"[0-9a-f]{32}")
"""A run id as otel-agents draws it (`new_run_id`): keyed by its int (`sys.getsizeof` 44, where its
text's is 81)."""


def _key(run_id: str) -> int | str:
    """`run_id` as the table keys it: an id otel-agents drew as its int, any other as its text."""
    return int(run_id, 16) if _DRAWN_ID.fullmatch(run_id) else run_id


def _id_of(key: int | str) -> str:
    return f"{key:032x}" if isinstance(key, int) else key


class RunRef:
    """What an outcome needs of a run, and no more (`RECENT_RUNS` of them are kept): its id, where
    its trace is, what records it, the names of its outcomes, and its span while it is open."""

    __slots__ = ("ids", "key", "live", "outcomes", "recording", "team", "workflow")

    def __init__(
        self,
        run_id: str,
        trace_id: int,
        span_id: int,
        workflow: str,
        recording: Any,
        live: weakref.ref[WorkflowSpan] | None,
    ) -> None:
        self.key = _key(run_id)
        """Its id as the table keys it."""
        self.ids = trace_id << 64 | span_id
        """Its trace id and its span's id in one int (one object of 56 bytes, not two of 80)."""
        self.workflow = sys.intern(workflow) if type(workflow) is str else workflow
        """Its team's name, one text for all the runs of a name (a team built for each run names
        each run with a text of its own)."""
        self.recording = recording
        self.live = live
        """The run's span while it is open (let go as it ends)."""
        self.outcomes: tuple[str, ...] = ()
        """The names of its outcomes recorded: a second of the same name is refused."""
        self.team = -1
        """The number `_teams` gave its (team name, recording) pair as it entered the table."""

    @property
    def run_id(self) -> str:
        return _id_of(self.key)

    def packed(self) -> int:
        """(An ended run with no outcome taken.) Its trace, span and team in one int."""
        return self.team << _IDS_BITS | self.ids

    @property
    def trace_id(self) -> int:
        return self.ids >> 64

    @property
    def span_id(self) -> int:
        return self.ids & _SPAN_ID_BITS

    def open_span(self) -> WorkflowSpan | None:
        live = self.live
        workflow = live() if live is not None else None
        return workflow if workflow is not None and not workflow.ended else None

    def take(self, name: str) -> bool:
        """(Under the lock.) Take the outcome name for this run; False if it was taken already."""
        if name in self.outcomes:
            return False
        self.outcomes = (*self.outcomes, name)
        return True

    def give_back(self, name: str) -> None:
        """(Under the lock.) The outcome name was not recorded after all."""
        self.outcomes = tuple(taken for taken in self.outcomes if taken != name)


class _Teams:
    """The (team name, recording) pairs of the runs in the table, each numbered once, counted by the
    entries holding it: a pair is let go with the last (a packed entry keeps its number only)."""

    __slots__ = ("holders", "next_number", "numbers", "pairs")

    def __init__(self) -> None:
        self.numbers: dict[tuple[str, int], int] = {}
        """(team name, id of the recording) -> its number."""
        self.pairs: dict[int, tuple[str, Any]] = {}
        self.holders: dict[int, int] = {}
        self.next_number = 0

    def hold(self, workflow: str, recording: Any) -> int:
        number = self.numbers.get((workflow, id(recording)))
        if number is None:
            number = self.numbers[workflow, id(recording)] = self.next_number
            self.next_number += 1
            self.pairs[number] = (workflow, recording)
            self.holders[number] = 0
        self.holders[number] += 1
        return number

    def let_go(self, number: int) -> None:
        left = self.holders[number] - 1
        if left:
            self.holders[number] = left
            return
        workflow, recording = self.pairs.pop(number)
        del self.holders[number], self.numbers[workflow, id(recording)]

    def clear(self) -> None:
        self.numbers.clear()
        self.pairs.clear()
        self.holders.clear()


_lock = threading.RLock()
"""Re-entrant: a stream dropped in a reference cycle ends its run (and so comes to `ended`) from
the garbage collector, which may run inside an allocation made under this very lock."""
process_state.new_locks_in_forked_child(__name__, "_lock")
_runs: dict[int | str, RunRef | int] = {}
"""Run id (as `_key` keys it) -> its `RunRef`, or, for an ended run nobody has named, `packed()`."""
_started: deque[int | str] = deque()
"""The keys of `_runs`, oldest first (a deque: 8 bytes a run, where an OrderedDict takes some 50)."""
_teams = _Teams()
_results: dict[int, tuple[weakref.ref[Any], int | str]] = {}
"""id(result) -> (the result, weakly; its run's key): a result leaves when it is collected."""
_warned: set[str] = set()


def _forget() -> None:
    with _lock:
        _runs.clear()
        _started.clear()
        _teams.clear()
        _results.clear()
        _warned.clear()


process_state.hold(
    __name__,
    "_runs",
    "_started",
    "_teams",
    "_results",
    "_warned",
    bound=f"{RECENT_RUNS} runs and their teams; a result while it lives and its run is known; 64 warnings",
    size=lambda: len(_runs) + len(_teams.pairs) + len(_results) + len(_warned),
    forget=_forget,
)


def _team_of(entry: RunRef | int) -> int:
    """The number of an entry's team, packed or not."""
    return entry >> _IDS_BITS if isinstance(entry, int) else entry.team


def _put(ref: RunRef) -> None:
    """(Under the lock.) A run not in the table enters it, the newest (one already there keeps its
    place: ids are drawn at random, and `_from_store` looks first)."""
    ref.team = _teams.hold(ref.workflow, ref.recording)
    replaced = _runs.get(ref.key)
    _runs[ref.key] = ref
    if replaced is None:
        _started.append(ref.key)
    else:
        _teams.let_go(_team_of(replaced))
    _keep_recent()


def _ref_of(key: int | str, entry: RunRef | int) -> RunRef:
    """(Under the lock.) The entry as a `RunRef`: itself, or one unpacked (not in the table)."""
    if not isinstance(entry, int):
        return entry
    team = _team_of(entry)
    ids = entry & ((1 << _IDS_BITS) - 1)
    workflow, recording = _teams.pairs[team]
    ref = RunRef(_id_of(key), ids >> 64, ids & _SPAN_ID_BITS, workflow, recording, None)
    ref.key, ref.team = key, team  # the table's own key object, not a second one
    return ref


def _own_ref(key: int | str) -> RunRef | None:
    """(Under the lock.) The table's own `RunRef` of a run (a packed entry unpacked in place), to
    take an outcome's name on; None when the run is not in the table."""
    entry = _runs.get(key)
    if isinstance(entry, int):
        entry = _runs[key] = _ref_of(key, entry)
    return entry


def started(workflow: WorkflowSpan) -> None:
    """A root run started: known by its id from now on."""
    if workflow.run_id is None:
        return
    context = workflow.span.get_span_context()
    ref = RunRef(
        workflow.run_id,
        context.trace_id,
        context.span_id,
        workflow.run.workflow,
        workflow.run.recording,
        weakref.ref(workflow),
    )
    with _lock:
        _put(ref)


def _keep_recent() -> None:
    """(Under the lock.) Forget the oldest runs past RECENT_RUNS, their teams and their results."""
    while len(_started) > RECENT_RUNS:
        old = _started.popleft()
        entry = _runs.pop(old, None)
        if entry is not None:
            _teams.let_go(_team_of(entry))
        _results_of(old)


def _results_of(run_key: int | str) -> None:
    """(Under the lock.) The results of a forgotten run are forgotten with it."""
    for key in [key for key, (_, owner) in list(_results.items()) if owner == run_key]:
        _results.pop(key, None)


def ended(workflow: WorkflowSpan) -> None:
    """A root run ended: its span is let go, and the result it returned (if any) names it from now on."""
    if workflow.run_id is None:
        return
    run_key = _key(workflow.run_id)
    with _lock:
        known = _runs.get(run_key)
        if isinstance(known, RunRef):
            known.live = None
            if not known.outcomes:  # nobody has named it yet: two ints from now on
                _runs[run_key] = known.packed()
    result = workflow.result
    if result is None:
        return
    with _lock:
        if run_key in _runs:
            _remember_result(result, run_key)


def _remember_result(result: object, run_key: int | str) -> None:
    """(Under the lock.) `result` names its run from now on, while it lives (a result that cannot
    be weakly referred to is not remembered: by id alone would be unsafe; the run id still works)."""
    key = id(result)
    try:
        ref = weakref.ref(result, lambda _, key=key: _results.pop(key, None))  # type: ignore[misc]
    except TypeError:
        return
    _results[key] = (ref, run_key)


async def settle(workflow: WorkflowSpan) -> None:
    """As the run ends, before its span does: the outcome callable's verdict on what it returned."""
    recording = workflow.run.recording
    result = workflow.result
    if recording is None or result is None:
        return
    call = _callable_of(recording)
    if call is None:
        return
    try:
        returned = await _judged(call, result)
    except TimeoutError:
        _warn_once(f"otel-agents: the outcome callable {_named(call)} took over {CALLABLE_TIMEOUT_S:g} s; no outcome")
        return
    except Exception as error:  # never into the run
        _warn_once(f"otel-agents: the outcome callable {_named(call)} raised {type(error).__name__}; no outcome")
        return
    try:
        outcome = from_callable(returned)
    except ValueError as error:
        _warn_once(
            f"otel-agents: the outcome callable {_named(call)} returned {returned!r} ({error}): expected a label, "
            "(label, score) or None; no outcome"
        )
        return
    if outcome is not None:
        with _lock:
            ref = _own_ref(_key(workflow.run_id or ""))
            if ref is not None:
                ref.take(outcome.name)
        workflow.add_outcome(outcome)


async def _judged(call: Callable[[Any], Any], result: object) -> Any:
    """What `call(result)` returns, within one deadline of CALLABLE_TIMEOUT_S; outside the run (no
    span of it current: a judge's own model calls are not the run's). A sync callable runs on a
    daemon thread of its own (one that overruns is left to finish, never waited for at exit)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CALLABLE_TIMEOUT_S
    if inspect.iscoroutinefunction(call):
        returned: Any = call(result)
    else:
        done: asyncio.Future[Any] = loop.create_future()

        def run() -> None:
            try:
                value, error = call(result), None
            except BaseException as raised:  # handed to the waiting task (it decides)
                value, error = None, raised
            try:
                loop.call_soon_threadsafe(_settle_future, done, value, error)
            except RuntimeError:  # an overrunning judge: its loop has closed meanwhile, nobody waits
                pass

        threading.Thread(target=run, name="otel-agents-outcome", daemon=True).start()
        async with asyncio.timeout_at(deadline):
            returned = await done
    if inspect.isawaitable(returned):
        task = (  # its own task, in a fresh context: not the run's
            loop.create_task(returned, context=contextvars.Context())
            if inspect.iscoroutine(returned)
            else asyncio.ensure_future(returned)
        )
        async with asyncio.timeout_at(deadline):
            returned = await task
    return returned


def _settle_future(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # timed out meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _callable_of(recording: Any) -> Callable[[Any], Any] | None:
    """The callable `configure(outcome=...)` gave, or `OTEL_AGENTS_OUTCOME`'s, imported now (once)."""
    chosen = recording.settings.outcome
    if chosen is None or callable(chosen):
        return chosen  # type: ignore[no-any-return]
    imported = getattr(recording, "outcome_imported", None)
    if imported is not None:
        return imported or None
    module_name, _, function = str(chosen).partition(":")
    try:
        found = getattr(importlib.import_module(module_name), function)
        if not callable(found):
            raise TypeError(f"{chosen} is not callable")
    except Exception as error:
        _warn_once(f"otel-agents: OTEL_AGENTS_OUTCOME={chosen}: {type(error).__name__}: {error}; no outcomes recorded")
        recording.outcome_imported = False
        return None
    recording.outcome_imported = found
    return found  # type: ignore[no-any-return]


def record_outcome(
    run: object,
    label: str,
    *,
    score: float | None = None,
    explanation: str | None = None,
    name: str = "outcome",
) -> None:
    """Record what `run` achieved: `run` is the `TaskResult` (or an agent's `Response`) a traced run
    returned, or a run id (as `otel-agents runs` lists it, or a unique prefix); `label` a short text
    such as `success`; `score` a number. One outcome per run and name. A ValueError says what is
    wrong, and nothing is recorded."""
    outcome = checked(name, label, score, explanation)
    found = _find(run)
    with _lock:
        ref = _own_ref(found.key)  # the name is taken on the table's entry, however found
        if ref is None:  # pushed out of the table since it was found (newer runs): back in, the newest
            _put(found)
            ref = found
            if not isinstance(run, str):  # found by the result it returned: that result names it again
                _remember_result(run, found.key)
        if not ref.take(outcome.name):  # taken: a second call of the same name is refused
            raise ValueError(f"run {ref.run_id} already has an outcome named {outcome.name!r}")
    workflow = ref.open_span()
    if workflow is not None and workflow.add_outcome(outcome):  # still open: an event on its span
        return
    try:
        _after_the_end(ref, outcome)
    except ValueError:
        with _lock:
            ref.give_back(outcome.name)
        raise


def _find(run: object) -> RunRef:
    if isinstance(run, str):
        return _by_id(run)
    with _lock:
        entry = _results.get(id(run))
        if entry is not None and entry[0]() is run and entry[1] in _runs:
            return _ref_of(entry[1], _runs[entry[1]])
    kind = type(run).__name__
    raise ValueError(
        f"this {kind} was not returned by a traced run that otel-agents still knows (pass the run id instead)"
    )


def _by_id(run_id: str) -> RunRef:
    wanted = run_id.strip().lower()
    if not wanted:
        raise ValueError("run='': expected a run id")
    with _lock:
        key = _key(wanted)
        exact = _runs.get(key)
        if exact is not None:
            return _ref_of(key, exact)
        matches = [_ref_of(key, entry) for key, entry in _runs.items() if _id_of(key).startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ValueError(f"run {run_id!r}: {len(matches)} runs start so; give more of the id")
    from_store = _from_store(wanted)
    if from_store is None:
        raise ValueError(f"run {run_id!r}: no such run (in this process, or in the store)")
    return from_store


def _from_store(run_id: str) -> RunRef | None:
    """A run the store knows (an older one, or another process's)."""
    recording = current(None)
    directory = store_of(recording)
    if directory is None:
        return None
    from otel_agents._internal.export.store.reader import RunNotFound, Store

    try:
        stored = Store(directory).find_run(run_id)
        spans = Store(directory).spans(stored.trace_id)
    except (RunNotFound, FileNotFoundError):
        return None
    root = next((s for s in spans if s.attributes.get(sc.RUN_ID) == stored.run_id), None)
    ref = RunRef(
        stored.run_id,
        int(stored.trace_id, 16),
        int(root.span_id, 16) if root is not None else 0,
        stored.team or "unknown",
        recording,
        None,
    )
    with _lock:
        found = _runs.get(ref.key)
        if found is None:
            _put(ref)
            return ref
        return _ref_of(ref.key, found)


def store_of(recording: Any) -> Path | None:
    """The store directory `recording` writes runs to, if it writes any there."""
    settings = getattr(recording, "settings", None)
    if settings is None or "store" not in settings.traces_exporters:
        return None
    directory: Path | None = settings.store_dir
    return directory


def _after_the_end(ref: RunRef, outcome: Outcome) -> None:
    """The run has ended: the store (a ValueError when it holds an outcome of that name for the
    run already, from another process say), the metric, and a log event in its trace context."""
    directory = store_of(ref.recording)
    if directory is not None:
        from otel_agents._internal.export.store.writer import StoreWriter

        try:
            stored = StoreWriter(directory).write_outcome(ref.run_id, outcome.name, outcome.label, outcome.score)
        except Exception as error:  # a store that cannot be written: the metric and the log still get it
            _warn_once(f"otel-agents: could not store an outcome in {directory}: {type(error).__name__}: {error}")
        else:
            if not stored:
                raise ValueError(f"run {ref.run_id} already has an outcome named {outcome.name!r} (in the store)")
    recording = ref.recording
    if recording is not None and recording.instruments is not None:
        recording.instruments.outcome(workflow=ref.workflow, outcome=outcome)
    _log_event(ref, outcome)


def _log_event(ref: RunRef, outcome: Outcome) -> None:
    """A `gen_ai.evaluation.result` log record in the run's trace context, where the application
    has a logs pipeline."""
    logs = importlib.import_module(otel.LOGS_API_MODULE)
    provider = logs.get_logger_provider()
    sdk_logs = importlib.import_module(otel.SDK_LOGS_MODULE)
    if not isinstance(provider, sdk_logs.LoggerProvider):
        return  # no logs pipeline: none is set up here
    content = ref.recording.settings.content if ref.recording is not None else ContentPolicy()
    attributes = outcome.attributes(content)
    attributes[sc.RUN_ID] = ref.run_id
    span_context = trace.SpanContext(ref.trace_id, ref.span_id, is_remote=False, trace_flags=trace.TraceFlags(1))
    context = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    try:
        provider.get_logger("otel_agents").emit(
            logs.LogRecord(
                timestamp=time.time_ns(),
                context=context,
                severity_number=logs.SeverityNumber.INFO,
                attributes=attributes,
                event_name=sc.GEN_AI_EVALUATION_RESULT_EVENT,
            )
        )
    except Exception:
        logger.debug("otel-agents could not log an outcome", exc_info=True)


def _named(call: object) -> str:
    return getattr(call, "__qualname__", None) or type(call).__name__


def _warn_once(text: str) -> None:
    if text not in _warned and len(_warned) < 64:
        _warned.add(text)
        logger.warning(text)

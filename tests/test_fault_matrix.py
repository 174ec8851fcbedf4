"""The fault matrix: nothing lost, whichever way a run ends, its process ends, or its backend fails.

Each cell is a small app of ours (tests/support/fault_app.py) run in a subprocess: one AutoGen run
through the real `OpenAIChatCompletionClient` against a local OpenAI-compatible server, traced by
`otel_agents.configure()` into the embedded store and over OTLP/HTTP to a real Jaeger (or to an
endpoint that is down, answers 500, or comes back between two runs). Each cell asserts:

- each run is stored exactly once, whole (one trace, one root: the run span), with the stop kind
  the contract names;
- where the backend is up, each stored trace arrives in Jaeger exactly once (every span, no span
  twice); down or answering 500, none arrives, every span is counted as dropped, and one warning
  of ours says so; recovering, the run that ends after the recovery arrives whole;
- the app's exit code and stdout are those of the same app untraced (one untraced run per way of
  ending, shared by the cells that end that way), and its stderr has nothing of ours but the
  documented warnings (frames of our wrappers inside the app's own tracebacks aside).

And each cell's stop kind is what the untraced app did in it: its exit code, and how it says its
run stopped (`test_each_cell_expects_what_the_untraced_app_did`). A signal is sent while the local
server holds the app's second model call unanswered, and the call is released only once the signal
has landed: where it lands does not depend on the machine's load.

The cells: every way a run ends (19, the process returning, the backend up); every way the process
ends mid-run (8: `sys.exit` with the stream dropped and kept, `raise SystemExit`, `sys.exit` in a
signal handler, an unhandled exception, SIGINT, SIGTERM of a plain script and of uvicorn); every
state of the backend (down, 500, recovering in the middle of a run: 3); and the pairs that interact (5: SIGTERM and
`sys.exit` against a backend that is down, an unhandled exception against one answering 500, a
model error against a backend that is down, a stream left early against one that is down):
35 cells and 27 untraced runs, three at a time, in about 75 s. They run on the newest Python found
only (`newest_python`: scripts/test.sh runs them in its environment; an older one skips them, unless
`FAULT_MATRIX_HERE=1`); tests/test_leaving_a_run_early.py pins the exits on every Python.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from otel_agents._internal.export.store.reader import Store
from tests.support.backends import built_backends
from tests.support.bad_backends import failing_endpoint, refusing_endpoint
from tests.support.jaeger import Jaeger, poll, running_jaeger
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.processes import free_port
from tests.support.relay import Relay

pytestmark = [pytest.mark.backend, pytest.mark.newest_python]

ROOT = Path(__file__).resolve().parents[1]

DRAFTS = (Reply("draft"), Reply("notes"), Reply("draft 2"), Reply("notes 2"), Reply("draft 3"), Reply("notes 3"))
HELD_SECOND = (Reply("draft"), Reply("notes", hold=True), Reply("draft 2"), Reply("notes 2"))
"""The server keeps the second call unanswered until the test releases it: the app is waiting for
that reply, wherever the machine's load put the rest of it, when the test signals it."""


@dataclass(frozen=True)
class Cell:
    ending: str
    exit: str = "returns"
    backend: str = "up"
    """`up` (Jaeger), `down` (a closed port), `500`, `recovering` (down through the first run and the
    start of the second, up from the middle of the second)."""
    stop_kinds: tuple[str, ...] = ()
    script: tuple[Reply, ...] = DRAFTS
    signal: int | None = None
    """Sent while the server holds the second model call; the call is released once the signal has
    landed (no longer pending in the process), or left held if the signal ended the process."""
    every_call_in_the_run: bool = True
    """Every call the server answered is a `chat` span of the stored run (not where a signal ends the
    process with a call in flight)."""
    unanswered_calls: int = 0
    """Calls that never reached the server (a connection refused): `chat` spans too."""

    @property
    def name(self) -> str:
        return f"{self.ending}-{self.exit}-{self.backend}"

    @property
    def way(self) -> tuple[str, str]:
        """The way of ending (its untraced baseline is shared by every cell that ends so)."""
        return self.ending, self.exit


def ending(name: str, stop_kind: str, script: tuple[Reply, ...] = DRAFTS, **more: Any) -> Cell:
    return Cell(name, stop_kinds=(stop_kind,), script=script, **more)


TOOL_CALL = Reply(tool_call=("lookup", {"query": "tracing"}))
CELLS = (
    # how the run ends (the process returns, the backend is up)
    ending("max_messages", "max_messages"),
    ending("text_mention", "text_mention", (Reply("draft"), Reply("APPROVE"))),
    ending("handoff", "handoff", (Reply(tool_call=("transfer_to_user", {})),)),
    ending("timeout", "timeout", (Reply("draft", delay_s=0.5), *DRAFTS)),
    ending("token_budget", "token_budget"),
    ending("external", "external"),
    ending("loop_guard", "loop_guard", (Reply("same"),) * 8),
    ending("completed", "completed"),
    ending("cancellation_token", "cancelled", (Reply("draft"), Reply("notes", delay_s=1), *DRAFTS)),
    ending("break", "consumer_closed"),
    ending("aclosing", "consumer_closed"),
    ending("consumer_raises", "consumer_closed"),
    ending("asyncio_timeout", "cancelled", (Reply("draft", delay_s=2),)),
    ending("wait_for", "cancelled", (Reply("draft", delay_s=2),)),
    ending("model_429", "error", (Reply("slow down", status=429),)),
    ending("model_connection_error", "error", (), unanswered_calls=1),
    ending("tool_raises", "max_messages", (TOOL_CALL, *DRAFTS)),
    Cell("mid_run", stop_kinds=("max_messages",)),
    Cell("mid_run_awaited", stop_kinds=("max_messages",)),
    # how the process ends, mid-run
    Cell("mid_run", "sys_exit", stop_kinds=("consumer_closed",)),
    Cell("mid_run_kept", "sys_exit", stop_kinds=("shutdown",)),  # a kept stream: open until the exit
    Cell("mid_run", "raise_system_exit", stop_kinds=("consumer_closed",)),
    Cell("mid_run", "unhandled", stop_kinds=("consumer_closed",)),
    Cell(
        "mid_run_awaited", "signal_sys_exit", stop_kinds=("consumer_closed",), script=HELD_SECOND,
        signal=signal.SIGUSR1, every_call_in_the_run=False,
    ),
    Cell(
        "mid_run", "sigint", stop_kinds=("cancelled",), script=HELD_SECOND, signal=signal.SIGINT,
        every_call_in_the_run=False,
    ),
    Cell(
        "mid_run", "sigterm", stop_kinds=("shutdown",), script=HELD_SECOND, signal=signal.SIGTERM,
        every_call_in_the_run=False,
    ),
    Cell("service", "sigterm_uvicorn", stop_kinds=("max_messages",), script=HELD_SECOND, signal=signal.SIGTERM),
    # where the spans go
    Cell("max_messages", backend="down", stop_kinds=("max_messages",)),
    Cell("max_messages", backend="500", stop_kinds=("max_messages",)),
    Cell(
        "max_messages", backend="recovering", stop_kinds=("max_messages", "max_messages"),
        script=(Reply("draft"), Reply("notes"), Reply("draft 2"), Reply("notes 2", hold=True)),
    ),
    # the pairs that interact
    Cell(
        "mid_run", "sigterm", "down", stop_kinds=("shutdown",), script=HELD_SECOND, signal=signal.SIGTERM,
        every_call_in_the_run=False,
    ),
    Cell("mid_run", "sys_exit", "down", stop_kinds=("consumer_closed",)),
    Cell("mid_run", "unhandled", "500", stop_kinds=("consumer_closed",)),
    Cell("model_429", backend="down", stop_kinds=("error",), script=(Reply("slow down", status=429),)),
    Cell("break", backend="down", stop_kinds=("consumer_closed",)),
)  # fmt: skip
WAYS = {cell.way: cell for cell in CELLS if cell.backend != "recovering"}
"""The ways of ending, each run untraced once (the recovering cells' runs end as `max_messages` does)."""


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    notes: list[str]
    store: Path
    billed: int
    """Model calls the local server answered."""
    service: str = ""
    destination: str = ""
    requests_at_destination: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    answered: str | None = None
    """What the service answered its `/run` request (the run's stop reason), where the app is one."""


def environment(cell: Cell, workdir: Path, server: OpenAIServer, *, traced: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and not k.startswith("FAULT_")}
    env.update(
        FAULT_ENDING=cell.ending,
        FAULT_EXIT=cell.exit,
        FAULT_TRACED="1" if traced else "0",
        FAULT_NOTES=str(workdir / "notes"),
        FAULT_OPENAI_URL=server.base_url,
        FAULT_REFUSING_URL=f"http://127.0.0.1:{free_port()}/v1",
        FAULT_PORT=str(free_port()),
        OTEL_AGENTS_STORE=str(workdir / "store"),
        OTEL_SERVICE_NAME=f"fault-{cell.name}",
        OTEL_METRICS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_TIMEOUT="2",
        OTEL_AGENTS_EXIT_TIMEOUT_S="3",
        PYTHONPATH=str(ROOT),
    )
    return env


def run_app(
    cell: Cell, workdir: Path, *, traced: bool, destination: str | None = None, gate: Relay | None = None
) -> Outcome:
    """Run the cell's app once (traced, to `destination`, or untraced) and return how it went."""
    workdir.mkdir(parents=True)
    answered: list[str] = []
    with OpenAIServer(script=list(cell.script)) as server:
        env = environment(cell, workdir, server, traced=traced)
        if destination is not None:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = destination
        if gate is not None:
            env["FAULT_GATE"] = str(workdir / "gate")
        with (workdir / "stdout").open("w") as out, (workdir / "stderr").open("w") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.fault_app"], cwd=ROOT, env=env, stdout=out, stderr=err
            )
            request = None
            try:
                if cell.exit == "sigterm_uvicorn":
                    request = threading.Thread(
                        target=_request_run, args=(int(env["FAULT_PORT"]), answered, process), daemon=True
                    )
                    request.start()
                if cell.signal is not None:  # the app waits for the held call's reply: signal it there
                    assert _waited_for(lambda: server.held_count >= 1, process), "the held call never came"
                    process.send_signal(cell.signal)
                    assert _waited_for(lambda: _landed(process, cell.signal), process), "the signal never landed"
                    server.release()
                if gate is not None:  # the backend comes back in the middle of the second run
                    assert _waited_for(lambda: "waiting" in _notes(workdir), process), "the first run never ended"
                    (workdir / "gate").touch()
                    assert _waited_for(lambda: server.held_count >= 1, process), "the second run never went on"
                    gate.up()
                    server.release()
                process.wait(timeout=90)
                if request is not None:
                    request.join(timeout=30)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=10)
        billed = server.request_count
    return Outcome(
        returncode=process.returncode,
        stdout=(workdir / "stdout").read_text(),
        stderr=(workdir / "stderr").read_text(),
        notes=_notes(workdir),
        store=workdir / "store",
        billed=billed,
        service=env["OTEL_SERVICE_NAME"],
        answered=answered[0] if answered else None,
    )


def _request_run(port: int, answered: list[str], process: subprocess.Popen[Any]) -> None:
    """Ask the service for a run (once it listens) and keep its answer."""
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/run", timeout=60) as response:
                answered.append(response.read().decode())
            return
        except OSError:
            time.sleep(0.1)  # not listening yet: ask again


def _notes(workdir: Path) -> list[str]:
    path = workdir / "notes"
    return path.read_text().splitlines() if path.exists() else []


def _waited_for(condition: Any, process: subprocess.Popen[Any], within_s: float = 60) -> bool:
    """Poll `condition` until it holds, the process has ended, or `within_s` (a bound for a failure,
    never a wait the test relies on) has passed."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        if process.poll() is not None:
            return bool(condition())
        time.sleep(0.02)
    return False


def _landed(process: subprocess.Popen[Any], signum: int) -> bool:
    """The signal is no longer pending in the process: the kernel has handed it over (its Python
    handler, if it has one, runs before any other Python code of the main thread), or the process
    has ended. True where there is no /proc to tell."""
    try:
        status = Path(f"/proc/{process.pid}/status").read_text()
    except OSError:
        return True
    pending = 0
    for line in status.splitlines():
        if line.startswith(("SigPnd:", "ShdPnd:")):
            pending |= int(line.split()[1], 16)
    return not pending & (1 << (signum - 1))


@contextmanager
def destination_for(cell: Cell, jaeger: Jaeger) -> Iterator[tuple[str, Relay | None]]:
    """The OTLP endpoint the cell exports to, and the relay that brings it back (recovering)."""
    if cell.backend == "up":
        yield jaeger.otlp_http, None
    elif cell.backend == "down":
        with refusing_endpoint() as url:
            yield url, None
    elif cell.backend == "500":
        with failing_endpoint(500) as url:
            yield url, None
    else:
        relay = Relay(("127.0.0.1", jaeger.ports.otlp_http))
        with relay.running():
            yield relay.url, relay


@dataclass
class Matrix:
    jaeger: Jaeger
    traced: dict[str, Outcome]
    untraced: dict[tuple[str, str], Outcome]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    newest = _newest_python()
    if sys.version_info < newest and not os.environ.get("FAULT_MATRIX_HERE"):
        here = f"{newest[0]}.{newest[1]}"
        pytest.skip(f"the fault matrix runs on the newest Python only ({here} here; FAULT_MATRIX_HERE=1 runs it here)")
    backends = built_backends()
    workdir = tmp_path_factory.mktemp("faults")
    with ExitStack() as stack:
        jaeger = stack.enter_context(running_jaeger(backends.jaeger, workdir))

        def traced(cell: Cell) -> tuple[str, Outcome]:
            with destination_for(cell, jaeger) as (url, relay):
                return cell.name, run_app(cell, workdir / cell.name, traced=True, destination=url, gate=relay)

        def untraced(cell: Cell) -> tuple[tuple[str, str], Outcome]:
            return cell.way, run_app(cell, workdir / f"untraced-{cell.ending}-{cell.exit}", traced=False)

        with ThreadPoolExecutor(max_workers=3) as pool:
            traced_runs = pool.map(traced, CELLS)
            untraced_runs = pool.map(untraced, WAYS.values())
            matrix = Matrix(jaeger, dict(traced_runs), dict(untraced_runs))
        yield matrix


def _newest_python() -> tuple[int, int]:
    listed = [line.strip() for line in (ROOT / "ci" / "pythons.txt").read_text().splitlines()]
    found = [tuple(int(p) for p in v.split(".")) for v in listed if v and not v.startswith("#")]
    here = sys.version_info[:2]
    newest = max([here, *(v for v in found if _installed(v))])
    return (newest[0], newest[1])


def _installed(version: tuple[int, ...]) -> bool:
    name = f"python{version[0]}.{version[1]}"
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    return any(pyenv.glob(f"{version[0]}.{version[1]}.*/bin/{name}")) or bool(
        subprocess.run(["which", name], capture_output=True, check=False).returncode == 0
    )


# --- what a cell's stderr may hold ---------------------------------------------------------------

_IDS = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"0x[0-9a-f]+"), "<address>"),
    (re.compile(r"Task-\d+"), "Task-<n>"),
    (re.compile(r"line \d+"), "line <n>"),
)
EXIT_LINE = re.compile(r"^otel-agents: exiting with \d+ spans not delivered to OTLPSpanExporter \S+; they are dropped")
"""The exit's one line, where no outage warning came before it (the exit cut the retries short)."""
OUTAGE = re.compile(
    r"^otel-agents: could not export spans to OTLPSpanExporter \S+ \(.+\); dropping them until it recovers"
)
EXPORTERS_OWN = re.compile(r"^(Transient error .* while exporting spans? batch|Failed to export spans? batch)")
"""The OTLP exporter's own lines about its retries (documented in docs/backends.md): not ours."""


def stderr_lines(text: str) -> list[str]:
    """stderr without the frames of otel-agents' wrappers that tracebacks pass through (each a
    `File` line and the source lines under it), ids and line numbers made alike."""
    lines, skipping = [], False
    for line in text.splitlines():
        if line.startswith('  File "'):
            skipping = "/otel_agents/" in line
            if skipping:
                continue
        elif skipping and line.startswith("    "):
            continue
        else:
            skipping = False
        for pattern, stand_in in _IDS:
            line = pattern.sub(stand_in, line)
        lines.append(line)
    return lines


def theirs(cell: Cell, outcome: Outcome, baseline: Outcome) -> list[str]:
    """The lines of the traced app's stderr that neither the untraced app printed, nor are a
    documented warning of ours, nor the OTLP exporter's own: what must not be there."""
    expected = set(stderr_lines(baseline.stderr))
    return [
        line
        for line in stderr_lines(outcome.stderr)
        if line not in expected and not any(p.match(line) for p in (OUTAGE, EXIT_LINE, EXPORTERS_OWN))
    ]


# --- the cells -----------------------------------------------------------------------------------

EXIT_CODES = {
    "returns": 0,
    "sys_exit": 3,
    "raise_system_exit": 3,
    "unhandled": 1,
    "signal_sys_exit": 4,
    "sigint": -signal.SIGINT,  # asyncio.run raises KeyboardInterrupt, Python ends by SIGINT
    "sigterm": -signal.SIGTERM,
    "sigterm_uvicorn": -signal.SIGTERM,  # uvicorn re-raises the signal after its graceful shutdown
}
"""The exit code of the untraced app for each way its process ends."""
REASONS = (
    ("Maximum number of messages ", "max_messages"),
    ("Text 'APPROVE' mentioned", "text_mention"),
    ("Handoff to user ", "handoff"),
    ("Timeout of ", "timeout"),
    ("Token usage limit reached", "token_budget"),
    ("External termination requested", "external"),
    ("loop guard: ", "loop_guard"),
    ("None", "completed"),  # a lone agent's run stops by itself, with no reason
)
"""The stop reasons the app prints (`stopped: ...`), by the stop kind each means."""
SAID = {
    "cancelled": "cancelled",
    "timed out": "cancelled",
    "left": "consumer_closed",
    "consumer failed": "consumer_closed",
}
"""The app's other words for how its run ended (a model's error is `failed: ...`)."""


def stop_seen(way: tuple[str, str], outcome: Outcome) -> str:
    """The stop kind the app's own behaviour shows: what it said (or, a service, answered) about how
    its run stopped; where it said nothing, the run was still going when its process ended, and how
    that ended tells."""
    ending, _ = way
    said = outcome.stdout.splitlines() + ([f"stopped: {outcome.answered}"] if outcome.answered is not None else [])
    for line in said:
        if line.startswith("stopped: "):
            reason = line.removeprefix("stopped: ")
            return next((kind for prefix, kind in REASONS if reason.startswith(prefix)), f"stopped by {reason!r}")
        if line.startswith("failed: "):
            return "error"
        if line in SAID:
            return SAID[line]
    if outcome.returncode == -signal.SIGINT and "KeyboardInterrupt" in outcome.stderr:
        return "cancelled"  # asyncio.run cancelled the task reading the run
    if outcome.returncode == -signal.SIGTERM:
        return "shutdown"  # the process ended with the run open
    if outcome.returncode in (1, 3, 4):  # the app's error or SystemExit, raised where it read the run
        return "shutdown" if ending == "mid_run_kept" else "consumer_closed"  # a kept stream: open to the exit
    return f"nothing said, exit {outcome.returncode}"


@pytest.mark.parametrize("way", WAYS, ids=[f"{ending}-{exit_}" for ending, exit_ in WAYS])
def test_each_cell_expects_what_the_untraced_app_did(matrix: Matrix, way: tuple[str, str]) -> None:
    """A cell's stop kind is what the app untraced did in it (its exit code, and how it says its run
    stopped): a signal that did not land, or landed elsewhere, fails here by name."""
    baseline = matrix.untraced[way]
    expected = {cell.stop_kinds[-1] for cell in CELLS if cell.way == way}
    said = (
        f"untraced {way}: exit {baseline.returncode}, answered {baseline.answered!r}\n--- stdout\n{baseline.stdout}"
        f"\n--- stderr\n{baseline.stderr[-3000:]}"
    )
    assert baseline.returncode == EXIT_CODES[way[1]], said
    assert {stop_seen(way, baseline)} == expected, said


@pytest.mark.parametrize("cell", CELLS, ids=[cell.name for cell in CELLS])
def test_nothing_is_lost(matrix: Matrix, cell: Cell) -> None:
    outcome = matrix.traced[cell.name]
    baseline = matrix.untraced.get(cell.way) or matrix.untraced[(cell.ending, "returns")]
    said = f"{cell.name}: exit {outcome.returncode}\n--- stdout\n{outcome.stdout}\n--- stderr\n{outcome.stderr[-4000:]}"

    # the app as it is untraced
    assert outcome.returncode == baseline.returncode, said
    assert outcome.answered == baseline.answered, said
    if cell.backend != "recovering":
        assert outcome.stdout == baseline.stdout, said
    else:
        assert outcome.stdout == baseline.stdout * 2, said
    assert theirs(cell, outcome, baseline) == [], said

    # each run stored exactly once, whole, with its stop kind
    store = Store(outcome.store)
    runs = sorted(store.runs(limit=100), key=lambda run: run.started_ns)
    assert [run.stop_kind for run in runs] == list(cell.stop_kinds), said
    assert len({run.run_id for run in runs}) == len({run.trace_id for run in runs}) == len(runs), said
    stored: dict[str, list[Any]] = {}
    for run in runs:
        spans = store.spans(run.trace_id)
        ids = [span.span_id for span in spans]
        assert len(ids) == len(set(ids)), f"a span stored twice: {said}"
        roots = [span for span in spans if span.parent_span_id is None]
        assert [root.attributes.get("otel_agents.run.id") for root in roots] == [run.run_id], said
        assert all(span.parent_span_id in ids for span in spans if span.parent_span_id is not None), said
        stored[run.trace_id] = spans
    chats = sum(1 for spans in stored.values() for span in spans if span.name.startswith("chat "))
    if cell.every_call_in_the_run:
        calls = outcome.billed + cell.unanswered_calls
        assert chats == calls, f"{chats} chat spans for {calls} calls made: {said}"
    else:
        assert chats <= outcome.billed, said

    # exported exactly once where the backend is up; counted and warned once where it is not
    ours = [line for line in outcome.stderr.splitlines() if line.startswith("otel-agents")]
    if cell.backend in ("up", "recovering"):
        arriving = stored if cell.backend == "up" else dict(list(stored.items())[-1:])  # after the recovery
        for trace_id, spans in arriving.items():
            count = len(spans)
            found = poll(
                lambda trace_id=trace_id: matrix.jaeger.trace(trace_id),
                lambda t, count=count: t is not None and len(t["spans"]) >= count,
                within_s=20,
            )
            assert found is not None, f"trace {trace_id} never arrived in Jaeger: {said}"
            in_jaeger = [span["spanID"] for span in found["spans"]]
            assert sorted(in_jaeger) == sorted(span.span_id for span in spans), f"not the trace stored: {said}"
        if cell.backend == "up":
            assert ours == [], said
    else:
        assert outcome.service not in matrix.jaeger.services(), said
        assert len(ours) == 1 and (OUTAGE.match(ours[0]) or EXIT_LINE.match(ours[0])), f"one warning: {said}"
        dropped = [int(note.split()[1]) for note in outcome.notes if note.startswith("dropped ")]
        if dropped:  # the process ran its exit handlers (not ended by a signal)
            assert dropped == [sum(len(spans) for spans in stored.values())], f"every span counted: {said}"

    # every span accounted for, where the process ran its exit handlers: for each exporter, ended =
    # delivered + dropped + sampled out, and what the store and Jaeger hold is what was counted
    accounts = {a["destination"].split()[0]: a for a in map(json.loads, _account_notes(outcome.notes))}
    for account in accounts.values():
        lost = account["export_failed"] + account["not_exported"] + account["sampled_out"]
        assert account["ended"] == account["delivered"] + lost, f"{account}: {said}"
    if accounts:
        spans_stored = sum(len(spans) for spans in stored.values())
        assert accounts["StoreSpanExporter"]["delivered"] == spans_stored, said
        assert accounts["OTLPSpanExporter"]["ended"] == accounts["StoreSpanExporter"]["ended"], said
        if cell.backend == "up":
            assert accounts["OTLPSpanExporter"]["delivered"] == spans_stored, f"all of it to Jaeger: {said}"
        elif cell.backend in ("down", "500"):
            assert accounts["OTLPSpanExporter"]["delivered"] == 0, said


def _account_notes(notes: list[str]) -> list[str]:
    return [note.removeprefix("account ") for note in notes if note.startswith("account ")]

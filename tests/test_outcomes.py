"""Outcomes (issue "Outcomes", DESIGN section 3): what a run achieved, told by an outcome callable as
the run ends or by `record_outcome()` at any time after, through the real OpenAI client against the
local server; read back from the run span, the store, `runs`, `cost`, `explain` and the metric; and
every bad input refused with nothing recorded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.export.store.reader import Store
from otel_agents._internal.run import outcomes as outcomes_module
from tests.support.cli import cli
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.teams import openai_client, writers_room

ROOT = Path(__file__).resolve().parents[1]
EVENT = "gen_ai.evaluation.result"


def review(server: OpenAIServer, *, approves: bool) -> RoundRobinGroupChat:
    """A writer and a critic: the critic approves the first draft, or never does (the team then
    stops at its limit of 5 messages)."""
    server.play(
        [
            Reply(text="Draft of the launch note."),
            Reply(text="APPROVE" if approves else "Not yet: tighter."),
            Reply(text="Second draft."),
            Reply(text="Still not."),
        ]
    )
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    stop = TextMentionTermination("APPROVE") | MaxMessageTermination(5)
    return RoundRobinGroupChat([writer, critic], termination_condition=stop, name="review")


def approved(result: TaskResult) -> str:
    """The outcome callable of these tests: success when the critic approved."""
    return "success" if "APPROVE" in (result.stop_reason or "") else "failure"


def run_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("otel_agents.run.id")]


def outcome_events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == EVENT]


def counted(reader: InMemoryMetricReader) -> dict[tuple[str, str, str], int]:
    """`otel_agents.run.outcomes` by (team, name, label)."""
    data = reader.get_metrics_data()
    found: dict[tuple[str, str, str], int] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "otel_agents.run.outcomes":
                    for point in metric.data.data_points:
                        a = point.attributes or {}
                        key = (
                            str(a["gen_ai.workflow.name"]),
                            str(a["gen_ai.evaluation.name"]),
                            str(a["gen_ai.evaluation.score.label"]),
                        )
                        found[key] = int(point.value)
    return found


Recorded = tuple[InMemorySpanExporter, InMemoryMetricReader, Path, otel_agents.Telemetry]


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Recorded]:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    store = tmp_path / "store"
    with otel_agents.configure(
        span_exporter=exporter, metric_readers=[reader], store=store, outcome=approved
    ) as telemetry:
        yield exporter, reader, store, telemetry


async def test_the_outcome_callable_judges_each_run_as_an_event_on_its_span_stored_and_counted(
    recorded: Recorded, openai_server: OpenAIServer
) -> None:
    exporter, reader, store, telemetry = recorded
    for approves in (True, True, False):
        await review(openai_server, approves=approves).run(task="Write the launch note.")
    assert telemetry.force_flush()

    spans = run_spans(exporter)
    assert [outcome_events(s) for s in spans] == [
        [{"gen_ai.evaluation.name": "outcome", "gen_ai.evaluation.score.label": label}]
        for label in ("success", "success", "failure")
    ]
    stored = Store(store).outcomes()
    by_run = {str((s.attributes or {})["otel_agents.run.id"]): outcome_events(s)[0] for s in spans}
    assert {run_id: [(o.name, o.label) for o in found] for run_id, found in stored.items()} == {
        run_id: [("outcome", event["gen_ai.evaluation.score.label"])] for run_id, event in by_run.items()
    }
    assert counted(reader) == {("review", "outcome", "success"): 2, ("review", "outcome", "failure"): 1}


async def test_runs_cost_and_explain_show_the_outcomes_and_the_spend_per_successful_run(
    recorded: Recorded, openai_server: OpenAIServer
) -> None:
    _, _, store, telemetry = recorded
    for approves in (True, False, False, True, False):
        await review(openai_server, approves=approves).run(task="Write the launch note.")
    assert telemetry.force_flush()

    listed = json.loads(cli("--store", str(store), "runs", "--json").stdout)
    assert (
        sorted(tuple(o["label"] for o in run["outcomes"]) for run in listed) == [("failure",)] * 3 + [("success",)] * 2
    )
    (row,) = json.loads(cli("--store", str(store), "cost", "--by", "team", "--json").stdout)
    whole = sum(round(run["cost_usd"] * 1_000_000) for run in listed)
    assert row["outcomes"] == {"failure": 3, "success": 2}
    assert row["cost_per_outcome_usd"] == round(whole / 2) / 1_000_000, (
        "all five runs' cost over the two that succeeded"
    )
    (per_failure,) = json.loads(
        cli("--store", str(store), "cost", "--by", "team", "--json", "--outcome", "failure").stdout
    )
    assert per_failure["cost_per_outcome_usd"] == round(whole / 3) / 1_000_000
    table = cli("--store", str(store), "cost", "--by", "team").stdout
    assert "SUCCESS" in table and "PER SUCCESS" in table
    assert "OUTCOME" in cli("--store", str(store), "runs").stdout

    explained = json.loads(cli("--store", str(store), "explain", listed[0]["run_id"], "--json").stdout)
    assert explained["run"]["outcomes"] == listed[0]["outcomes"]


async def test_an_outcome_recorded_long_after_its_run_from_another_task_is_stored_and_counted(
    recorded: Recorded, openai_server: OpenAIServer
) -> None:
    exporter, reader, store, telemetry = recorded
    first = await review(openai_server, approves=True).run(task="Write the launch note.")
    await review(openai_server, approves=False).run(task="Write the launch note.")
    assert telemetry.force_flush()
    second_id = str((run_spans(exporter)[1].attributes or {})["otel_agents.run.id"])

    async def later() -> None:
        await asyncio.sleep(0.2)
        otel_agents.record_outcome(first, "good", score=0.9, name="quality", explanation="clear and short")
        otel_agents.record_outcome(second_id[:10], "poor", score=0.2, name="quality")

    await asyncio.create_task(later())
    stored = Store(store).outcomes()
    assert sorted((o.name, o.label, o.score) for found in stored.values() for o in found) == [
        ("outcome", "failure", None),
        ("outcome", "success", None),
        ("quality", "good", 0.9),
        ("quality", "poor", 0.2),
    ]
    assert counted(reader)[("review", "quality", "good")] == 1
    assert counted(reader)[("review", "quality", "poor")] == 1


async def test_every_bad_input_is_a_value_error_that_says_which_and_records_nothing(
    recorded: Recorded, openai_server: OpenAIServer
) -> None:
    exporter, reader, store, telemetry = recorded
    result = await review(openai_server, approves=True).run(task="Write the launch note.")
    assert telemetry.force_flush()
    run_id = str((run_spans(exporter)[0].attributes or {})["otel_agents.run.id"])
    before = (Store(store).outcomes(), counted(reader))

    never_returned = TaskResult(messages=[], stop_reason="made up")
    for call, says in (
        (lambda: otel_agents.record_outcome(never_returned, "success"), "was not returned by a traced run"),
        (lambda: otel_agents.record_outcome("f" * 32, "success"), "no such run"),
        (lambda: otel_agents.record_outcome("", "success"), "expected a run id"),
        (lambda: otel_agents.record_outcome(result, ""), "label=''"),
        (lambda: otel_agents.record_outcome(result, "   "), "label='   '"),
        (lambda: otel_agents.record_outcome(result, "ok", score=math.nan, name="q"), "score=nan"),
        (lambda: otel_agents.record_outcome(result, "ok", score=math.inf, name="q"), "score=inf"),
        (lambda: otel_agents.record_outcome(result, "ok", score=True, name="q"), "score=True"),  # type: ignore[arg-type]
        (lambda: otel_agents.record_outcome(result, "ok", score="0.5", name="q"), "score='0.5'"),  # type: ignore[arg-type]
        (lambda: otel_agents.record_outcome(result, "again"), "already has an outcome named 'outcome'"),
        (lambda: otel_agents.record_outcome(run_id, "again"), "already has an outcome named 'outcome'"),
        (lambda: otel_agents.record_outcome(result, "ok", name=""), "name=''"),
    ):
        with pytest.raises(ValueError, match=None) as raised:
            call()
        assert says in str(raised.value), (says, str(raised.value))
    assert (Store(store).outcomes(), counted(reader)) == before


async def test_an_outcome_callable_may_be_async_return_a_score_or_none_and_never_breaks_the_run(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scored(result: TaskResult) -> tuple[str, float]:
        await asyncio.sleep(0)
        return approved(result), 0.75

    def raises(result: TaskResult) -> str:
        raise RuntimeError("the judge is down")

    def slow(result: TaskResult) -> str:
        time.sleep(0.5)
        return "success"

    monkeypatch.setattr(outcomes_module, "CALLABLE_TIMEOUT_S", 0.1)
    caplog.set_level(logging.WARNING)
    seen: dict[str, list[list[dict[str, Any]]]] = {}
    for name, judge in (("scored", scored), ("none", lambda result: None), ("raises", raises), ("slow", slow)):
        exporter = InMemorySpanExporter()
        with otel_agents.configure(span_exporter=exporter, store=False, outcome=judge) as telemetry:
            results = [await review(openai_server, approves=True).run(task="go") for _ in range(2)]
            assert telemetry.force_flush()
        assert all(r.stop_reason and "APPROVE" in r.stop_reason for r in results), "the run is untouched"
        seen[name] = [outcome_events(s) for s in run_spans(exporter)]
    assert (
        seen["scored"]
        == [
            [
                {
                    "gen_ai.evaluation.name": "outcome",
                    "gen_ai.evaluation.score.label": "success",
                    "gen_ai.evaluation.score.value": 0.75,
                }
            ]
        ]
        * 2
    )
    assert seen["none"] == seen["raises"] == seen["slow"] == [[], []]
    warned = [r.getMessage() for r in caplog.records if "outcome callable" in r.getMessage()]
    assert len([w for w in warned if "raised RuntimeError" in w]) == 1, warned
    assert len([w for w in warned if "took over 0.1 s" in w]) == 1, warned


async def test_the_outcome_is_known_to_the_keep_decision(openai_server: OpenAIServer) -> None:
    summaries: list[dict[str, str]] = []

    def keep_failures(summary: otel_agents.RunSummary) -> bool:
        summaries.append(dict(summary.outcomes))
        return summary.outcomes.get("outcome") == "failure"

    exporter = InMemorySpanExporter()
    with otel_agents.configure(
        span_exporter=exporter, store=False, outcome=approved, sample_runs=0, keep_runs=keep_failures
    ) as telemetry:
        for approves in (True, False):
            await review(openai_server, approves=approves).run(task="go")
        assert telemetry.force_flush()
    assert summaries == [{"outcome": "success"}, {"outcome": "failure"}]
    (kept,) = run_spans(exporter)
    assert (kept.attributes or {})["otel_agents.sample.kept_because"] == "rule"
    assert outcome_events(kept)[0]["gen_ai.evaluation.score.label"] == "failure"


LOGGING_APP = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
import otel_agents
from tests.support.teams import writers_room

async def main():
    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    set_logger_provider(provider)  # the application's logs pipeline
    for capture in (False, True):
        with otel_agents.configure(store=False, capture_content=capture) as telemetry:
            result = await writers_room(max_messages=3).run(task="go")
            otel_agents.record_outcome(result, "success", score=1, explanation="the critic approved")
    print(json.dumps([
        {"trace_id": format(r.log_record.trace_id, "032x"), "event": r.log_record.event_name,
         "attributes": dict(r.log_record.attributes)}
        for r in logs.get_finished_logs()
    ]))

asyncio.run(main())
"""


def test_an_outcome_after_the_run_is_a_log_event_in_its_trace_where_the_app_has_a_logs_pipeline() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", LOGGING_APP, str(ROOT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    off, on = json.loads(done.stdout.strip().splitlines()[-1])
    for record in (off, on):
        assert record["event"] == EVENT and len(record["trace_id"]) == 32 and record["trace_id"] != "0" * 32
        assert record["attributes"]["gen_ai.evaluation.score.label"] == "success"
        assert record["attributes"]["gen_ai.evaluation.score.value"] == 1.0
        assert len(record["attributes"]["otel_agents.run.id"]) == 32
    assert "gen_ai.evaluation.explanation" not in off["attributes"], "content capture off: no explanation"
    assert on["attributes"]["gen_ai.evaluation.explanation"] == "the critic approved"


def test_an_outcome_function_named_by_the_variable_is_imported_at_the_first_runs_end(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "judging.py").write_text(
        "imported = []\nimported.append(1)\n\ndef verdict(result):\n    return 'success'\n"
    )
    app = tmp_path / "app.py"
    app.write_text(
        "import asyncio, sys\n"
        f"sys.path[:0] = [{str(ROOT)!r}, {str(tmp_path)!r}]\n"
        "import otel_agents\n"
        "from otel_agents._internal.export.store.reader import Store\n"
        "from tests.support.teams import writers_room\n"
        "async def main():\n"
        "    with otel_agents.configure(store=sys.argv[1]):\n"
        "        assert 'judging' not in sys.modules, 'imported at the first run\\'s end, not at start'\n"
        "        await writers_room(max_messages=3).run(task='go')\n"
        "    print(sorted(o.label for found in Store(sys.argv[1]).outcomes().values() for o in found))\n"
        "asyncio.run(main())\n"
    )
    import os

    env = {**os.environ, "OTEL_AGENTS_OUTCOME": "judging:verdict"}
    done = subprocess.run(
        [sys.executable, str(app), str(tmp_path / "store")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['success']"
    env["OTEL_AGENTS_OUTCOME"] = "judging_missing:verdict"
    done = subprocess.run(
        [sys.executable, str(app), str(tmp_path / "store2")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert done.stderr.count("OTEL_AGENTS_OUTCOME=judging_missing:verdict") == 1, done.stderr


async def test_a_consumer_that_leaves_on_the_result_still_gets_its_run_judged(openai_server: OpenAIServer) -> None:
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False, outcome=approved) as telemetry:
        async with contextlib.aclosing(review(openai_server, approves=True).run_stream(task="go")) as stream:
            async for item in stream:
                if isinstance(item, TaskResult):
                    break  # leaves on the result, before the stream's own end
        assert telemetry.force_flush()
    (run,) = run_spans(exporter)
    assert [e["gen_ai.evaluation.score.label"] for e in outcome_events(run)] == ["success"]


async def test_a_judge_that_returns_what_is_no_outcome_is_warned_about_by_what_it_returned(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False, outcome=lambda result: True) as telemetry:
        await review(openai_server, approves=True).run(task="go")
        assert telemetry.force_flush()
    (run,) = run_spans(exporter)
    assert outcome_events(run) == []
    assert any("returned True" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


async def test_a_judges_own_model_calls_are_not_the_runs(openai_server: OpenAIServer) -> None:
    async def judge(result: TaskResult) -> str:
        client = openai_client(openai_server)
        from autogen_core.models import UserMessage

        await client.create([UserMessage(content="Did it succeed?", source="judge")])
        return "success"

    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False, outcome=judge) as telemetry:
        await review(openai_server, approves=True).run(task="go")
        assert telemetry.force_flush()
    (run,) = run_spans(exporter)
    in_run = [s for s in exporter.get_finished_spans() if s.context.trace_id == run.context.trace_id]
    chats = [s for s in in_run if s.name.startswith("chat")]
    assert len(chats) == 2, "the writer's and the critic's calls; the judge's is a trace of its own"
    assert (run.attributes or {})["gen_ai.usage.input_tokens"] == sum(
        (c.attributes or {})["gen_ai.usage.input_tokens"] for c in chats
    )
    assert len([s for s in exporter.get_finished_spans() if s.name.startswith("chat")]) == 3


def last_run_id(exporter: InMemorySpanExporter) -> str:
    return str((run_spans(exporter)[-1].attributes or {})["otel_agents.run.id"])


async def test_an_ended_run_nobody_named_is_two_ints_in_the_table_and_is_named_later_once() -> None:
    """Memory by design: the last 4,096 runs stay known to `record_outcome`; an ended run nobody has
    named yet takes its id and one packed int there (under 120 bytes), not a `RunRef` and its id's
    text (over 200)."""
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], store=False) as telemetry:
        result = await writers_room(max_messages=2, name="packed").run(task="go")
        assert telemetry.force_flush()
        run_id = last_run_id(exporter)
        key, entry = list(outcomes_module._runs.items())[-1]
        assert isinstance(key, int) and isinstance(entry, int) and f"{key:032x}" == run_id
        assert sys.getsizeof(key) + sys.getsizeof(entry) < 120

        otel_agents.record_outcome(run_id[:12], "good", name="quality")
        assert isinstance(outcomes_module._runs[key], outcomes_module.RunRef), "named: unpacked in place"
        with pytest.raises(ValueError, match="already has an outcome named 'quality'"):
            otel_agents.record_outcome(result, "bad", name="quality")
        otel_agents.record_outcome(result, "fine", name="tone")
        assert counted(reader) == {("packed", "quality", "good"): 1, ("packed", "tone", "fine"): 1}


async def test_runs_past_the_bound_are_forgotten_with_their_teams_and_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outcomes_module, "RECENT_RUNS", 3)
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False) as telemetry:
        results, ids = [], []
        for team in ("first", "second", "first", "third", "third"):
            results.append(await writers_room(max_messages=2, name=team).run(task="go"))
            assert telemetry.force_flush()
            ids.append(last_run_id(exporter))
        assert len(outcomes_module._runs) == 3
        teams = sorted(name for name, _ in outcomes_module._teams.pairs.values())
        assert teams == ["first", "third"], "the second team's only run was forgotten, and its team with it"
        assert sorted(outcomes_module._teams.holders.values()) == [1, 2]
        with pytest.raises(ValueError, match="no such run"):
            otel_agents.record_outcome(ids[1], "late")
        with pytest.raises(ValueError, match="not returned by a traced run that otel-agents still knows"):
            otel_agents.record_outcome(results[1], "late")
        otel_agents.record_outcome(ids[2], "kept")  # the third run: still known, named now
        for _ in range(3):  # every run before these forgotten, the named one too
            await writers_room(max_messages=2, name="fourth").run(task="go")
        assert [name for name, _ in outcomes_module._teams.pairs.values()] == ["fourth"]
        assert list(outcomes_module._teams.holders.values()) == [3]


def pushed_out_once_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next run `record_outcome` finds is pushed out of the table (with `RECENT_RUNS` at 2) right
    after it is found, by two newer runs, as 4,096 would push it out."""
    find = outcomes_module._find

    def found_then_pushed_out(run: object) -> outcomes_module.RunRef:
        found = find(run)
        with outcomes_module._lock:
            for newer in ("a" * 32, "b" * 32):
                outcomes_module._put(outcomes_module.RunRef(newer, 1, 1, "other", None, None))
        assert found.key not in outcomes_module._runs
        assert id(run) not in outcomes_module._results, "a result it returned is forgotten with it"
        monkeypatch.setattr(outcomes_module, "_find", find)  # once
        return found

    monkeypatch.setattr(outcomes_module, "_find", found_then_pushed_out)


async def test_a_run_pushed_out_of_the_table_while_being_named_is_named_in_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Newer runs may push a run out of the table between `record_outcome` finding it and taking
    the name: the name is then taken in the table all the same (the run back in, the newest), so a
    second outcome of that name is refused, not taken again."""
    monkeypatch.setattr(outcomes_module, "RECENT_RUNS", 2)
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, store=False) as telemetry:
        await writers_room(max_messages=2, name="named").run(task="go")
        assert telemetry.force_flush()
        run_id = last_run_id(exporter)
        pushed_out_once_found(monkeypatch)
        otel_agents.record_outcome(run_id, "good", name="quality")
        assert isinstance(outcomes_module._runs[int(run_id, 16)], outcomes_module.RunRef)
        with pytest.raises(ValueError, match="already has an outcome named 'quality'"):
            otel_agents.record_outcome(run_id, "bad", name="quality")
        assert len(outcomes_module._runs) == 2
        assert sorted(name for name, _ in outcomes_module._teams.pairs.values()) == ["named", "other"]


async def test_a_run_found_by_its_result_and_pushed_out_meanwhile_is_still_found_by_that_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run back in the table is found by the `TaskResult` it returned again, as before it was
    pushed out: a second outcome of another name recorded by that result is counted."""
    monkeypatch.setattr(outcomes_module, "RECENT_RUNS", 2)
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], store=False) as telemetry:
        result = await writers_room(max_messages=2, name="named").run(task="go")
        assert telemetry.force_flush()
        pushed_out_once_found(monkeypatch)
        otel_agents.record_outcome(result, "good", name="quality")
        otel_agents.record_outcome(result, "fine", name="tone")
        with pytest.raises(ValueError, match="already has an outcome named 'quality'"):
            otel_agents.record_outcome(result, "bad", name="quality")
        assert counted(reader) == {("named", "quality", "good"): 1, ("named", "tone", "fine"): 1}


async def test_an_outcome_added_as_the_collector_ends_its_run_is_recorded_after_the_end(tmp_path: Path) -> None:
    """The garbage collector may end a run (its stream dropped in a cycle) inside the very event
    `record_outcome` adds to the open run's span: the outcome is then recorded as after the run's
    end (stored, counted once), not lost with an event the ended span drops."""
    exporter, reader, store = InMemorySpanExporter(), InMemoryMetricReader(), tmp_path / "store"
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader], store=store) as telemetry:
        stream = otel_agents.tap(writers_room(max_messages=3, name="dropped").run_stream(task="go"))
        await stream.__anext__()
        workflow = stream.recorder
        assert workflow is not None and workflow.run_id is not None
        add_event = workflow.span.add_event

        def ended_by_the_collector_first(name: str, attributes: Any = None) -> None:
            workflow.end()  # as a collection set off in here would
            add_event(name, attributes)

        workflow.span.add_event = ended_by_the_collector_first  # type: ignore[method-assign]
        otel_agents.record_outcome(workflow.run_id, "good", name="quality")
        await stream.aclose()
        assert telemetry.force_flush()
    assert [(o.name, o.label) for found in Store(store).outcomes().values() for o in found] == [("quality", "good")]
    assert counted(reader) == {("dropped", "quality", "good"): 1}

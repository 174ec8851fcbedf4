"""Runaway loops: the rules, the detector in the tap, LoopGuard, and the alert end to end."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.messages import TextMessage, ToolCallRequestEvent
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core import FunctionCall
from autogen_core.models import RequestUsage
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.config.loop_limits import LoopLimits
from otel_agents._internal.genai.loops import LoopRules
from tests.conftest import Capture
from tests.support.config import assert_configure_refuses
from tests.support.deploy import DEPLOY
from tests.support.metrics import points
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.prometheus import start_alertmanager, start_prometheus
from tests.support.spans import one_trace
from tests.support.teams import openai_client, writers_room

NEVER_APPROVES = "Not good enough. Rewrite it."


async def drain(stream: Any) -> list[Any]:
    return [item async for item in stream]


def rules(**limits: Any) -> LoopRules:
    return LoopRules(LoopLimits(**limits).resolved({}))


def said(source: str, text: str, tokens: int = 0) -> TextMessage:
    usage = RequestUsage(prompt_tokens=tokens, completion_tokens=0) if tokens else None
    return TextMessage(source=source, content=text, models_usage=usage)


def hits_of(loop: LoopRules, messages: list[Any], **kwargs: Any) -> list[tuple[int, str, str]]:
    found = []
    for index, message in enumerate(messages):
        for hit in loop.observe(message, **kwargs):
            found.append((index, hit.rule, hit.detail))
    return found


def test_repeat_one_source_says_the_same_thing_n_times() -> None:
    messages = [said("user", "task"), said("critic", "no"), said("writer", "v1"), said("critic", "no"),
                said("writer", "v2"), said("critic", "no")]  # fmt: skip
    assert hits_of(rules(), messages) == [(5, "repeat", "critic said the same thing 3 times")]
    assert hits_of(rules(max_repeats=4), messages) == []


def test_repeat_catches_an_a_b_a_b_cycle_with_nothing_new() -> None:
    messages = [said("a", "x"), said("b", "y")] * 3
    assert hits_of(rules(), messages) == [(4, "repeat", "a said the same thing 3 times")]
    moving_on = [said("a", "x"), said("b", "y"), said("a", "x2"), said("b", "y2"), said("a", "x3"), said("b", "y3")]
    assert hits_of(rules(), moving_on) == []


def test_tool_storm_same_tool_same_arguments() -> None:
    def call(arguments: str) -> ToolCallRequestEvent:
        return ToolCallRequestEvent(source="a", content=[FunctionCall(id="1", name="search", arguments=arguments)])

    messages = [call('{"q": "x"}'), call('{"q": "y"}'), call('{"q": "x"}'), call('{"q": "x"}')]
    assert hits_of(rules(), messages) == [(3, "tool_storm", "search called with the same arguments 3 times")]


def test_what_the_rules_remember_of_a_long_run_is_bounded() -> None:
    from otel_agents._internal.genai.loops import _DISTINCT_KEPT

    loop = rules()
    for i in range(3 * _DISTINCT_KEPT):
        loop.observe(said("a", f"draft {i}"))
        loop.observe(ToolCallRequestEvent(source="a", content=[FunctionCall(id="1", name="f", arguments=str(i))]))
    assert 0 < len(loop.said) <= _DISTINCT_KEPT
    assert 0 < len(loop.tool_calls) <= _DISTINCT_KEPT


def test_messages_tokens_cost_and_time_budgets() -> None:
    assert hits_of(rules(max_messages=3), [said("a", str(i)) for i in range(5)]) == [(2, "messages", "3 messages")]
    assert hits_of(rules(token_budget=100), [said("a", str(i), tokens=40) for i in range(4)]) == [
        (2, "tokens", "120 tokens used")
    ]
    assert hits_of(rules(cost_budget_usd=0.5), [said("a", "x")], run_cost=0.75) == [(0, "cost", "$0.7500 spent")]
    assert hits_of(rules(cost_budget_usd=0.5), [said("a", "x")], run_cost=None) == [], "unpriced: no cost rule"
    slow = rules(time_budget_s=0.05)
    time.sleep(0.06)
    assert [rule for _, rule, _ in hits_of(slow, [said("a", "x")])] == ["time"]


def test_each_rule_fires_once_per_run_and_content_is_not_kept() -> None:
    loop = rules()
    hits = hits_of(loop, [said("critic", "secret words")] * 6)
    assert [h[1] for h in hits] == ["repeat"]
    assert "secret words" not in repr(loop.said)


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"max_messages": 0}, {}, "max_messages=0"),
        ({"max_repeats": 1}, {}, "max_repeats=1"),
        ({"token_budget": 1.5}, {}, "token_budget=1.5"),
        ({"cost_budget_usd": -1}, {}, "cost_budget_usd=-1"),
        ({"time_budget_s": "soon"}, {}, "time_budget_s='soon'"),
        ({}, {"OTEL_AGENTS_MAX_MESSAGES": "many"}, "OTEL_AGENTS_MAX_MESSAGES='many'"),
        ({}, {"OTEL_AGENTS_MAX_REPEATS": "1"}, "OTEL_AGENTS_MAX_REPEATS='1'"),
        ({}, {"OTEL_AGENTS_TOKEN_BUDGET": "-5"}, "OTEL_AGENTS_TOKEN_BUDGET='-5'"),
        ({}, {"OTEL_AGENTS_COST_BUDGET_USD": "free"}, "OTEL_AGENTS_COST_BUDGET_USD='free'"),
        ({"time_budget_s": 10}, {"OTEL_AGENTS_TIME_BUDGET_S": "0"}, "OTEL_AGENTS_TIME_BUDGET_S='0'"),
    ],
)
def test_bad_thresholds_are_refused(
    monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str], message: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if not message.startswith("OTEL_AGENTS_"):  # a bad argument: refused
        with pytest.raises(otel_agents.ConfigError) as raised:
            LoopLimits(**kwargs)
        assert message in str(raised.value)
        return
    # Changed 2026-12-04 (CHANGELOG): a bad variable is one warning and the default, at configure()
    # too, used or not; the CLI's strict read still refuses it
    LoopLimits(**kwargs)
    assert_configure_refuses(monkeypatch, env, message, set_global=False, store=False)


def test_thresholds_from_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_AGENTS_MAX_MESSAGES", "40")
    monkeypatch.setenv("OTEL_AGENTS_COST_BUDGET_USD", "2.5")
    resolved = LoopLimits(max_repeats=5).resolved(os.environ)
    assert (resolved.max_messages, resolved.max_repeats, resolved.cost_budget_usd) == (40, 5, 2.5)
    assert resolved.token_budget is None and resolved.time_budget_s is None


def critic_loop(server: OpenAIServer, *, guard: bool, name: str = "loopy") -> RoundRobinGroupChat:
    server.script = [Reply(text=NEVER_APPROVES)]
    writer = AssistantAgent("writer", model_client=openai_client(server))
    critic = AssistantAgent("critic", model_client=openai_client(server))
    termination = TextMentionTermination("APPROVE") | MaxMessageTermination(20)
    if guard:
        termination = termination | otel_agents.LoopGuard()
    return RoundRobinGroupChat([writer, critic], termination_condition=termination, name=name)


async def test_the_guard_stops_the_loop_with_no_extra_model_call(capture: Capture, openai_server: OpenAIServer) -> None:
    team = critic_loop(openai_server, guard=True)
    items = await drain(otel_agents.tap(team.run_stream(task="Write a slogan.")))

    result = items[-1]
    # the writer says the same thing 3 times first: its 3rd message (message 5 of the run) breaks the rule
    assert result.stop_reason == "loop guard: repeat: writer said the same thing 3 times"
    assert len(result.messages) == 6
    assert openai_server.request_count == 5, "one call per agent message, none after the guard stopped"
    root = one_trace(capture.spans()).root
    assert root.attributes["otel_agents.stop_kind"] == "loop_guard"
    assert root.attributes["otel_agents.stop_reason"] == result.stop_reason

    again = await drain(otel_agents.tap(team.run_stream(task="Another slogan.")))
    # the team stays reusable and the guard starts afresh (the round robin resumes with the critic)
    assert again[-1].stop_reason == "loop guard: repeat: critic said the same thing 3 times"
    assert openai_server.request_count == 10


async def test_without_the_guard_the_detector_records_the_loop(openai_server: OpenAIServer) -> None:
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    with otel_agents.configure(span_exporter=exporter, metric_readers=[reader]) as telemetry:
        items = await drain(otel_agents.tap(critic_loop(openai_server, guard=False).run_stream(task="Slogan.")))
        telemetry.force_flush()
        data = reader.get_metrics_data()

    assert items[-1].stop_reason.startswith("Maximum number of messages 20")
    root = one_trace(list(exporter.get_finished_spans())).root
    events = [e for e in root.events if e.name == "otel_agents.loop_detected"]
    assert [e.attributes["otel_agents.loop.rule"] for e in events] == ["repeat"]
    assert events[0].attributes["otel_agents.loop.count"] == 3 and events[0].attributes["otel_agents.loop.limit"] == 3
    assert events[0].attributes["otel_agents.loop.detail"] == "writer said the same thing 3 times"
    assert NEVER_APPROVES not in json.dumps([dict(e.attributes) for e in events])
    counts = [(dict(p.attributes), p.value) for p in points(data, "otel_agents.loop.detections")]
    assert counts == [({"gen_ai.workflow.name": "loopy", "otel_agents.loop.rule": "repeat"}, 1)]


async def test_a_guard_without_limits_follows_configure_made_after_it() -> None:
    guard = otel_agents.LoopGuard()  # made first, as a team built at import is
    team = writers_room(max_messages=20, termination=MaxMessageTermination(20) | guard)
    with otel_agents.configure(span_exporter=InMemorySpanExporter(), loop_limits=LoopLimits(max_messages=4)):
        result = await team.run(task="go")
    assert result.stop_reason == "loop guard: messages: 4 messages"
    assert len(result.messages) == 4

    given = otel_agents.LoopGuard(LoopLimits(max_messages=6))
    team = writers_room(max_messages=20, termination=MaxMessageTermination(20) | given)
    with otel_agents.configure(span_exporter=InMemorySpanExporter(), loop_limits=LoopLimits(max_messages=4)):
        result = await team.run(task="go")
    assert result.stop_reason == "loop guard: messages: 6 messages", "limits given to the guard win"


def test_a_guard_keeps_where_its_thresholds_come_from_through_its_component_config() -> None:
    loaded = otel_agents.LoopGuard.load_component(otel_agents.LoopGuard().dump_component())
    assert repr(loaded) == "LoopGuard(None)", "follows configure()"
    loaded = otel_agents.LoopGuard.load_component(otel_agents.LoopGuard(LoopLimits()).dump_component())
    assert repr(loaded) == f"LoopGuard({LoopLimits()!r})", "its own limits, all unset: the variables"
    written = {"provider": "otel_agents.LoopGuard", "config": {"follows_configure": True, "max_messages": 3}}
    loaded = otel_agents.LoopGuard.load_component(written)
    assert repr(loaded) == f"LoopGuard({LoopLimits(max_messages=3)!r})", "thresholds given win"


def test_the_guard_is_an_autogen_component() -> None:
    guard = otel_agents.LoopGuard(LoopLimits(max_messages=12, max_repeats=4))
    loaded = otel_agents.LoopGuard.load_component(guard.dump_component())
    assert isinstance(loaded, otel_agents.LoopGuard)
    assert loaded._to_config() == guard._to_config()


def test_promtool_unit_tests_every_alert_firing_and_not_firing() -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus package) is not installed"
    tests = DEPLOY / "prometheus" / "rules_test.yml"
    text = tests.read_text()
    for alert in ("RunawayLoopDetected", "RunCostSpike", "TokenBurnRateHigh", "ModelErrorRate"):
        assert f"alertname: {alert}" in text
    assert text.count("exp_alerts: []") >= 4, "each alert also has a case where it does not fire"
    done = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = subprocess.run(
        [promtool, "check", "rules", str(DEPLOY / "prometheus" / "rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


class Webhook:
    """A webhook receiver on 127.0.0.1 that keeps what Alertmanager posts."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                webhook.posts.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.mark.backend
async def test_runaway_loop_alert_reaches_a_webhook(
    tmp_path: Path, openai_server: OpenAIServer, webhook: Webhook
) -> None:
    telemetry = otel_agents.configure(store=False, prometheus=("127.0.0.1", 0))
    assert telemetry.prometheus is not None
    alertmanager = start_alertmanager(
        tmp_path,
        {
            "route": {"receiver": "hook", "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "hook", "webhook_configs": [{"url": webhook.url}]}],
        },
    )
    prometheus = start_prometheus(
        tmp_path,
        [f"127.0.0.1:{telemetry.prometheus.port}"],
        rules=DEPLOY / "prometheus" / "rules.yml",
        alertmanager=alertmanager.url.removeprefix("http://"),
    )
    try:
        await drain(otel_agents.tap(critic_loop(openai_server, guard=False).run_stream(task="Slogan.")))
        deadline = time.monotonic() + 60
        firing: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not firing:
            await asyncio.sleep(0.5)
            firing = [
                alert
                for post in webhook.posts
                for alert in post["alerts"]
                if alert["labels"]["alertname"] == "RunawayLoopDetected" and alert["status"] == "firing"
            ]
        assert firing, f"no RunawayLoopDetected at the webhook; Prometheus says {prometheus.alerts()}"
        assert firing[0]["labels"]["gen_ai_workflow_name"] == "loopy"
        assert firing[0]["labels"]["otel_agents_loop_rule"] == "repeat"
        assert firing[0]["labels"]["severity"] == "page"
    finally:
        prometheus.stop()
        alertmanager.stop()
        telemetry.shutdown()

"""The quick start with no OpenAI key, as the README and Getting started show it.

`otel-agents serve-demo-model`, started as a person starts it (its base URL read from its first
line, no waiting beyond that), serves the offline demo's scripted model on 127.0.0.1; the quick
start block, pasted into a script, runs against it unchanged and its run lands in the store. The
`model_info` snippet makes a client for a model AutoGen does not know; the endpoint streams, with
the usage when asked; Ctrl-C and SIGTERM stop it at once with exit 0; a port in use is one line.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.test_examples import BIN, PAGES, readme_quick_start

pytestmark = [pytest.mark.lowest_versions]

RUN_BY = "<!-- run by: tests/test_keyless_quick_start.py::{} -->"
TASK = "A line about tracing agent teams."
SYSTEM = {"role": "system", "content": "You write."}
STREAM_USAGE = {"stream_options": {"include_usage": True}}


def block(page: Path, test: str, language: str) -> str:
    """The `language` block of `page` that says `test` runs it."""
    text = page.read_text(encoding="utf-8")
    found = re.search(re.escape(RUN_BY.format(test)) + rf"\n```{language}\n(.*?)\n```\n", text, re.DOTALL)
    assert found, f"{page.name} has a {language} block run by {test}"
    return found.group(1)


def user_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """A person's shell, with a home of its own (the store in its user data directory)."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"), **variables}


@contextmanager
def demo_model(
    tmp_path: Path, *options: str, preexec_fn: Callable[[], Any] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`otel-agents serve-demo-model` as a person starts it; its base URL, from its first line."""
    process = subprocess.Popen(
        [str(BIN / "otel-agents"), "serve-demo-model", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=user_env(tmp_path),
        preexec_fn=preexec_fn,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        readable, _, _ = select.select([process.stdout], [], [], 60)
        url = process.stdout.readline().strip() if readable else ""
        if not url:
            process.kill()
            pytest.fail(f"no URL on its first line: {process.communicate(timeout=10)[1][-2000:]}")
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url), url
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def otel_agents(tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [str(BIN / "otel-agents"), *args], env=user_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_quick_start_runs_with_no_key_against_the_demo_model(tmp_path: Path, page: Path) -> None:
    from otel_agents.cli._demo import CRITIC_LINES
    from otel_agents.cli._serve_demo_model import DEFAULT_PORT

    shown_block = block(page, "test_the_quick_start_runs_with_no_key_against_the_demo_model", "sh")
    serve, run_it, *look = [line.split("  #")[0].strip() for line in shown_block.splitlines()]
    assert serve == "otel-agents serve-demo-model &"
    shown = re.fullmatch(r"OPENAI_BASE_URL=(\S+) OPENAI_API_KEY=(\S+) python quickstart\.py", run_it)
    assert shown is not None, run_it
    assert shown[1] == f"http://127.0.0.1:{DEFAULT_PORT}/v1", "the URL it listens on unless told otherwise"
    (tmp_path / "quickstart.py").write_text(readme_quick_start(page))
    with demo_model(tmp_path, "--port", "0") as (url, server):  # a free port: the default may be taken here
        done = subprocess.run(
            [sys.executable, "quickstart.py"],
            cwd=tmp_path,
            env=user_env(tmp_path, OPENAI_BASE_URL=url, OPENAI_API_KEY=shown[2]),
            capture_output=True,
            text=True,
            timeout=180,
        )
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=10) == 0
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr == "", "no key, no warning: the model is one AutoGen knows and otel-agents prices"
    said, stopped = done.stdout.splitlines()
    assert said == CRITIC_LINES[0], "the critic's turn: the demo's second line"
    assert stopped.startswith("stopped: Maximum number of messages 3 reached"), stopped
    (run,) = json.loads(otel_agents(tmp_path, "runs", "--json"))
    assert (run["team"], run["stop_kind"], run["messages"]) == ("writers-room", "max_messages", 3)
    assert run["input_tokens"] > 0 and run["output_tokens"] > 0 and run["unknown_usage_calls"] == 0
    assert run["cost_usd"] > 0, "priced as the demo's gpt-4o-mini-2024-07-18"
    spans = json.loads(otel_agents(tmp_path, "show", run["run_id"], "--json"))["spans"]
    calls = [s for s in spans if s["name"] == "chat gpt-4o-mini"]
    assert len(calls) == 2, [s["name"] for s in spans]
    assert {s["attributes"]["gen_ai.response.model"] for s in calls} == {"gpt-4o-mini-2024-07-18"}
    for command in look:  # what the page runs next, as it shows it
        assert command.startswith("otel-agents "), command
        assert "writers-room" in otel_agents(tmp_path, *command.split()[1:])


async def test_the_model_info_snippet_makes_a_client_for_a_model_autogen_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autogen_core.models import UserMessage
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    from otel_agents.cli._demo import WRITER_LINES

    snippet = block(PAGES[1], "test_the_model_info_snippet_makes_a_client_for_a_model_autogen_does_not_know", "python")
    without = re.sub(r"\n    model_info=\{.*?\n    \},", "", snippet, flags=re.DOTALL)
    assert "model_info" not in without
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with pytest.raises(ValueError, match="model_info is required"):  # as the page says
        exec(without, {"OpenAIChatCompletionClient": OpenAIChatCompletionClient})
    with demo_model(tmp_path, "--port", "0") as (url, _):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        scope: dict[str, Any] = {"OpenAIChatCompletionClient": OpenAIChatCompletionClient}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(snippet, scope)
            model = scope["model"]
            result = await model.create([UserMessage(content=TASK, source="user")])
            await model.close()
    assert result.content == WRITER_LINES[0]
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert said == [], "no field missing, and the reply names the model asked for (no 'Resolved model mismatch')"


async def test_the_demo_model_streams_and_ends_with_the_usage_when_asked(tmp_path: Path) -> None:
    from autogen_core.models import CreateResult, UserMessage
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    from otel_agents.cli._demo import WRITER_LINES

    messages = [UserMessage(content=TASK, source="user")]
    with demo_model(tmp_path, "--port", "0") as (url, _):
        model = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=url, api_key="unused")
        whole = await model.create(messages)
        asked = [item async for item in model.create_stream(messages, extra_create_args=STREAM_USAGE)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # AutoGen's own, about the usage it was not sent
            unasked = [item async for item in model.create_stream(messages)]
        await model.close()
    *pieces, result = asked
    assert isinstance(result, CreateResult) and len(pieces) > 1, "streamed in pieces"
    assert "".join(pieces) == result.content == whole.content == WRITER_LINES[0]
    assert result.usage == whole.usage and whole.usage.prompt_tokens > 0
    assert unasked[-1].content == WRITER_LINES[0]
    assert (unasked[-1].usage.prompt_tokens, unasked[-1].usage.completion_tokens) == (0, 0), "none sent, as OpenAI's"


def test_each_turn_of_a_conversation_says_the_next_line(tmp_path: Path) -> None:
    from otel_agents.cli._demo import CRITIC_LINES, WRITER_LINES

    conversation: list[dict[str, str]] = [SYSTEM, {"role": "user", "content": TASK}]
    said = []
    with demo_model(tmp_path, "--port", "0") as (url, _):
        host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
        for _turn in range(5):
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            body = json.dumps({"model": "my-model", "messages": conversation})
            connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            answer = json.loads(connection.getresponse().read())
            connection.close()
            assert answer["model"] == "my-model", "the model asked for"
            said.append(answer["choices"][0]["message"]["content"])
            conversation.append({"role": "user", "name": "someone", "content": said[-1]})
    lines = [WRITER_LINES[0], CRITIC_LINES[0], WRITER_LINES[1], CRITIC_LINES[1]]
    assert said == [*lines, lines[0]]


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGINT inherited ignored"])
def test_ctrl_c_or_sigterm_stops_the_demo_model_at_once_with_exit_0(tmp_path: Path, how: str) -> None:
    """Also where SIGINT came ignored (a background job of a script), and with a client's
    connection still open."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    number = signal.SIGTERM if how == "SIGTERM" else signal.SIGINT
    with demo_model(tmp_path, "--port", "0", preexec_fn=ignore_sigint if "ignored" in how else None) as (url, server):
        host, port = url.removeprefix("http://").removesuffix("/v1").split(":")
        kept = http.client.HTTPConnection(host, int(port), timeout=30)
        kept.request("GET", "/v1/models")
        assert json.loads(kept.getresponse().read())["data"][0]["id"] == "gpt-4o-mini-2024-07-18"
        server.send_signal(number)  # the connection stays open, kept alive
        assert server.wait(timeout=10) == 0
        out, err = server.communicate(timeout=10)
        kept.close()
    assert out == "", "nothing after its URL"
    assert "Traceback" not in err and "interrupted" not in err, err


def test_a_port_in_use_is_a_one_line_error(tmp_path: Path) -> None:
    with demo_model(tmp_path, "--port", "0") as (url, _):
        port = url.removesuffix("/v1").rsplit(":", 1)[1]
        done = subprocess.run(
            [str(BIN / "otel-agents"), "serve-demo-model", "--port", port],
            env=user_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"otel-agents: error: cannot listen on 127.0.0.1:{port}: ") and "--port 0" in line, line


def test_the_demo_model_and_the_page_run_side_by_side_on_their_default_ports() -> None:
    """A newcomer leaves `serve-demo-model &` running and opens `otel-agents ui`: no port clash."""
    from otel_agents.cli._main import _parser

    parser = _parser()
    demo_model, page = parser.parse_args(["serve-demo-model"]), parser.parse_args(["ui"])
    assert (demo_model.port, page.port) == (8766, 8765), "8766 for the demo model, 8765 for the page"

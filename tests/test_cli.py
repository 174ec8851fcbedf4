"""The `otel-agents` command, run as a user runs it: a separate process, exit codes, one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_python]

ROOT = Path(__file__).resolve().parents[1]


def assert_one_line_error(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("otel-agents: error: ") and text in lines[0]
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    store = tmp_path_factory.mktemp("demo-store")
    return store, cli("--store", str(store), "demo")


def test_demo_runs_offline_and_shows_its_trace(demo_store: tuple[Path, Any]) -> None:
    _, done = demo_store
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", "the demo says nothing on stderr"
    out = done.stdout
    _, ana, ben = re.split(r"=+ run \d of 2, for user (?:ana|ben): .* =+\n", out)
    assert "---------- TextMessage (writer) ----------" in ana
    assert "---------- ToolCallRequestEvent (writer) ----------" in ana
    for run in (ana, ben):
        status_lines = re.findall(r"\[(\d+) messages · ([\d,]+) in / ([\d,]+) out tokens · \$([\d.]+)\]", run)
        assert [int(s[0]) for s in status_lines] == list(range(1, len(status_lines) + 1))
        assert float(status_lines[-1][3]) > 0, "the demo's model is priced"
    assert "invoke_workflow writers-room" in ben and "execute_tool web_search" in ben, "ana's run, shown last"
    assert re.search(r"chat gpt-4o-mini-2024-07-18 .* \$0\.0", out)
    assert "user ana  ·  conversation " in ben
    assert re.search(r"\n  cost per user  \S+ -m otel_agents --store \S+ cost --by user\n", out), out[-600:]


def hints(out: str) -> dict[str, str]:
    """The commands the demo ends with, by what they are for."""
    tail = out.split("; from this shell:\n", 1)[1]
    return {
        what: command
        for what, command in (re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in tail.splitlines()[:3])
    }


@pytest.mark.parametrize("how", ["script", "python -m"])
def test_the_demo_ends_with_commands_that_work_as_printed_in_a_shell_without_the_venv(tmp_path: Path, how: str) -> None:
    bin_dir = Path(sys.executable).parent
    called = [str(bin_dir / "otel-agents")] if how == "script" else [sys.executable, "-m", "otel_agents"]
    shell_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    assert subprocess.run(["bash", "-c", "command -v otel-agents"], env=shell_env, check=False).returncode != 0
    done = subprocess.run(
        [*called, "demo"], cwd=ROOT, env=shell_env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    commands = hints(done.stdout)
    assert set(commands) == {"the runs", "this one", "cost per user"}, done.stdout[-600:]
    if bin_dir.is_relative_to(ROOT):  # run from the clone: the path as a person in it types it
        assert commands["the runs"].startswith(f"{bin_dir.relative_to(ROOT)}/"), commands
    for what, command in commands.items():  # in the same directory, the venv not active
        ran = subprocess.run(["bash", "-c", command], cwd=ROOT, env=shell_env, capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
        assert ran.returncode == 0 and ran.stdout, (what, command, ran.stderr)
    assert (
        "writers-room"
        in subprocess.run(
            ["bash", "-c", commands["the runs"]], cwd=ROOT, env=shell_env, capture_output=True, text=True, check=False
        ).stdout
    )
    assert f"'source {bin_dir.relative_to(ROOT) if bin_dir.is_relative_to(ROOT) else bin_dir}/activate'" in done.stdout


def test_runs_json(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    done = cli("--store", str(store), "runs", "--json")
    assert done.returncode == 0, done.stderr
    ben, run = json.loads(done.stdout)  # newest first: ben's ran second
    assert set(run) == {
        "run_id", "trace_id", "team", "user_id", "session_id", "conversation_id", "started_at", "duration_s",
        "messages", "input_tokens", "output_tokens", "cost_usd", "stop_reason", "stop_kind", "unknown_usage_calls",
        "outcomes", "turns", "findings",
    }  # fmt: skip
    assert run["outcomes"] == [], "no outcome recorded"
    assert (run["turns"], run["findings"], ben["turns"]) == (4, [], 2), "explain's turns and finding kinds"
    assert (run["user_id"], ben["user_id"]) == ("ana", "ben") and run["session_id"] is None
    assert re.fullmatch(r"[0-9a-f]{32}", run["conversation_id"]) and run["conversation_id"] != ben["conversation_id"]
    assert (ben["messages"], ben["input_tokens"], ben["output_tokens"]) == (3, 388 + 430, 17)
    assert re.fullmatch(r"[0-9a-f]{32}", run["trace_id"]) and re.fullmatch(r"[0-9a-f]{32}", run["run_id"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", run["started_at"])
    assert run["team"] == "writers-room"
    assert run["stop_kind"] == "text_mention" and run["stop_reason"] == "Text 'APPROVE' mentioned"
    assert run["messages"] == 7 and run["input_tokens"] == 412 + 702 + 655 + 980 and run["output_tokens"] == 81
    assert run["cost_usd"] == 0.000461, "(2,749 x $0.15 + 81 x $0.60) / 1M, to the micro-dollar, as `cost` counts it"
    assert run["duration_s"] > 0


def test_runs_table_and_limit(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    done = cli("--store", str(store), "runs", "--limit", "1")
    assert done.returncode == 0
    header, row = done.stdout.strip().splitlines()
    assert header.split() == [
        "RUN", "STARTED", "(UTC)", "TEAM", "USER", "CONVERSATION", "DUR", "MSGS", "TOKENS", "COST", "STOP",
    ]  # fmt: skip
    run = json.loads(cli("--store", str(store), "runs", "--json", "--limit", "1").stdout)[0]
    conversation = run["conversation_id"][:11] + "…"
    cells = row.split()
    assert re.fullmatch(r"\d+\.\d\ds", cells.pop(6)), "the duration"
    assert cells == [
        run["run_id"][:12], *run["started_at"][:19].split("T"), "writers-room", "ben", conversation,
        "3", f"{388 + 430 + 17}", f"${run['cost_usd']:.6f}", "text_mention",
    ]  # fmt: skip


def test_show_by_prefix(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    (run,) = json.loads(cli("--store", str(store), "runs", "--json", "--user", "ana").stdout)
    done = cli("--store", str(store), "show", run["run_id"][:6])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"run {run['run_id']}  trace {run['trace_id']}"
    assert lines[1] == (
        f"writers-room: 7 messages, 2,749 in / 81 out, cost ${run['cost_usd']:.6f}, stopped: Text 'APPROVE' mentioned"
    )
    assert lines[2] == f"user ana  ·  conversation {run['conversation_id']}"
    tree = [line for line in lines if re.search(r" \d+\.\d{3}s\b", line)]  # a span: its duration
    assert tree[0].startswith("invoke_workflow writers-room") and "█" * 24 in tree[0], "the run spans it all"
    assert "2,749 in / 81 out" in tree[0]
    assert any(line.startswith("├── invoke_agent writer") for line in tree)
    assert any(re.match(r"│   [├└]── execute_tool web_search", line) for line in tree)
    chats = [line for line in tree if re.match(r"(│   |    )[├└]── chat gpt-4o-mini-2024-07-18", line)]
    assert len(chats) == 4 and all(re.search(r"(writer|critic)  [\d,]+ in / \d+ out  \$0\.0", c) for c in chats)
    assert all(re.search(r"[█▏▎▍▌▋▊▉▐▕]", line) for line in tree), "every span has a bar"
    assert f"no other runs of conversation {run['conversation_id']} in the store" in lines
    shown = json.loads(cli("--store", str(store), "show", run["run_id"], "--json").stdout)
    assert shown["run"] == run and shown["conversation_runs"] == []
    names = [s["name"] for s in shown["spans"]]
    assert names[0] == "invoke_workflow writers-room" and "execute_tool web_search" in names
    assert len(tree) == len(names), "one line per span"


def test_cost_by_user_on_the_demo_store(demo_store: tuple[Path, Any]) -> None:
    store, _ = demo_store
    runs = {r["user_id"]: r for r in json.loads(cli("--store", str(store), "runs", "--json").stdout)}
    rows = json.loads(cli("--store", str(store), "cost", "--by", "user", "--json").stdout)
    assert [(r["key"], r["runs"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
        ("ana", 1, 2749, 81),
        ("ben", 1, 818, 17),
    ]
    for r in rows:  # each run rounded once, as `runs` shows it (its calls' costs are fractions of a micro-dollar)
        assert r["cost_usd"] == round(runs[r["key"]]["cost_usd"] * 1e6) / 1e6 and r["cost_usd"] > 0
    by_agent = json.loads(cli("--store", str(store), "cost", "--by", "agent", "--json").stdout)
    assert [a["key"] for a in by_agent] == ["critic", "writer"]
    assert sum(round(a["cost_usd"] * 1e6) for a in by_agent) == sum(round(r["cost_usd"] * 1e6) for r in rows), (
        "the calls share their run's rounded cost: every report has the same total"
    )
    done = cli("--store", str(store), "cost", "--by", "user")
    assert done.returncode == 0, done.stderr
    table = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.split()}
    assert table["ana"][1:4] == ["1", "2,749", "81"] and table["ben"][1:4] == ["1", "818", "17"]
    total = sum(round(r["cost_usd"] * 1e6) for r in rows)
    assert table["total"][1:5] == ["2", "3,567", "98", f"${total / 1e6:.6f}"]


def test_an_empty_store(tmp_path: Path) -> None:
    assert cli("--store", str(tmp_path), "runs", "--json").stdout.strip() == "[]"
    done = cli("--store", str(tmp_path), "runs")
    assert (done.returncode, done.stdout.strip()) == (0, "no runs yet")
    assert cli("--store", str(tmp_path), "cost", "--by", "team", "--json").stdout.strip() == "[]"
    done = cli("--store", str(tmp_path), "cost", "--by", "team")
    assert (done.returncode, done.stdout.strip()) == (0, "no runs yet")


@pytest.mark.parametrize(
    "command",
    [["runs"], ["runs", "--json"], ["show", "abc"], ["cost", "--by", "user"], ["export", "--all"]],
    ids=" ".join,
)
def test_a_store_directory_that_does_not_exist_is_an_error(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo"
    done = cli("--store", str(missing), *command, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert_one_line_error(done, 2, f"no store at {missing}: the directory does not exist")
    assert done.stdout == "" and not missing.exists(), "nothing made, nothing printed"
    done = cli(*command, env={"OTEL_AGENTS_STORE": str(missing), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert_one_line_error(done, 2, f"no store at {missing}")


def test_a_demo_store_that_cannot_be_written_is_a_one_line_error_naming_the_path(tmp_path: Path) -> None:
    a_file = tmp_path / "store"
    a_file.write_text("not a store")
    done = cli("--store", str(a_file), "demo")
    assert_one_line_error(done, 1, f"{a_file} is a file, not a directory: give a directory for the store")
    assert done.stdout == "", "refused before the demo runs"


def test_unknown_and_ambiguous_runs_exit_2(demo_store: tuple[Path, Any], tmp_path: Path) -> None:
    store, _ = demo_store
    assert_one_line_error(cli("--store", str(store), "show", "ffffffff0000"), 2, "no run 'ffffffff0000'")
    assert_one_line_error(cli("--store", str(store), "show", "not-hex"), 2, "not a run id")
    assert_one_line_error(cli("--store", str(store), "export", "abc", "--endpoint", "http://127.0.0.1:9"), 2, "no run")


@pytest.mark.parametrize(
    "command",
    [["runs"], ["show", "abc"], ["cost", "--by", "team"], ["export", "abc", "--endpoint", "http://127.0.0.1:9"]],
    ids=" ".join,
)
def test_a_store_that_cannot_be_read_is_a_failure_at_run_time_exit_1(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "spans.sqlite3").write_bytes(b"not a database, not at all" * 100)
    assert_one_line_error(cli("--store", str(tmp_path), *command), 1, "cannot read the store")


def test_bad_usage_exits_2_in_one_line(tmp_path: Path) -> None:
    assert_one_line_error(cli("frobnicate"), 2, "invalid choice")
    assert_one_line_error(cli("runs", "--limit", "0"), 2, "--limit 0")
    assert_one_line_error(cli("runs", "--limit", "many"), 2, "invalid int value")
    assert_one_line_error(cli("export"), 2, "one of the arguments")
    assert_one_line_error(
        cli("--store", str(tmp_path), "cost", "--by", "team", "--since", "9" * 20 + "w"), 2, "--since"
    )
    done = cli("--store", str(tmp_path), "export", "--all", env={"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"})
    assert_one_line_error(done, 2, "OTEL_EXPORTER_OTLP_PROTOCOL='carrier-pigeon'")


def test_export_to_an_unreachable_endpoint_exits_1(demo_store: tuple[Path, Any]) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store, _ = demo_store
    done = cli(
        "--store", str(store), "export", "--all", "--endpoint", f"http://127.0.0.1:{port}",
        env={"OTEL_EXPORTER_OTLP_TIMEOUT": "2"},
    )  # fmt: skip
    assert_one_line_error(done, 1, f"could not export to http://127.0.0.1:{port}/v1/traces")


def test_python_dash_m_otel_agents_is_the_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "otel_agents", "--store", str(tmp_path), "runs"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout.strip()) == (0, "no runs yet"), done.stderr


def test_the_cli_imports_rich_only_when_it_draws() -> None:
    code = (
        "import sys, otel_agents, otel_agents.cli; print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr

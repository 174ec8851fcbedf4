"""docs/backends.md's way to run the Collector and Jaeger without Docker, run as the page shows it:
the binaries built from their Go modules, each on its deploy/ config with the page's one-machine
block merged over it. The ports the page names are moved to free ones on 127.0.0.1 (the tests share
the machine), and a third file of the test's own puts the listeners the page leaves where they are
(the Collector's, Jaeger's query API) on free ports too; nothing else is changed."""

from __future__ import annotations

import errno
import json
import re
import shlex
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.backends import Backends, built_backends
from tests.support.cli import cli
from tests.support.collector import internal_metrics_on
from tests.support.processes import free_port, launch, listening, stop_process

pytestmark = [pytest.mark.backend]

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "backends.md"
RUNS_THE_PAGE = "test_the_one_machine_blocks_run_the_built_collector_and_jaeger_side_by_side"
BLOCK = re.compile(r"<!-- run by: (?P<runners>[^\n]*?) -->\n```(?P<language>\w+)\n(?P<body>.*?)\n```", re.S)
ADDRESS = re.compile(r"\b127\.0\.0\.1:(\d+)|\bport: (\d+)")
NO_UI = "This is not the Jaeger UI you are looking for"
"""The placeholder page a Jaeger built without its UI's assets serves (Jaeger's cmd/query/app/ui)."""


@dataclass(frozen=True)
class Page:
    commands: list[list[str]]
    """The page's commands that start the binaries, as a shell splits them."""
    files: dict[str, str]
    """The page's config blocks, by the file name on their first line."""


def the_page() -> Page:
    commands: list[list[str]] = []
    files: dict[str, str] = {}
    for block in BLOCK.finditer(PAGE.read_text(encoding="utf-8")):
        if RUNS_THE_PAGE not in block["runners"]:
            continue
        if block["language"] == "sh":
            lines = block["body"].splitlines()
            commands += [
                shlex.split(line.removesuffix("&")) for line in lines if line.startswith('"$OTEL_AGENTS_TEST_')
            ]
        elif block["language"] == "yaml":
            name = block["body"].splitlines()[0].removeprefix("# ").strip()
            files[name] = block["body"]
    assert [c[0] for c in commands] == ["$OTEL_AGENTS_TEST_COLLECTOR", "$OTEL_AGENTS_TEST_JAEGER"], commands
    assert set(files) == {"collector-one-machine.yaml", "jaeger-one-machine.yaml"}, set(files)
    return Page(commands, files)


def moved(text: str, ports: dict[int, int]) -> str:
    """`text` with each 127.0.0.1 port and `port:` it names moved to a free port (one port, one
    free port, the same in every file)."""

    def free(match: re.Match[str]) -> str:
        number = int(match[1] or match[2])
        ports.setdefault(number, free_port())
        return match[0].replace(str(number), str(ports[number]))

    return ADDRESS.sub(free, text)


@dataclass
class Running:
    collector: subprocess.Popen[bytes]
    jaeger: subprocess.Popen[bytes]
    collectors_own: CollectorsOwn
    query_http: int
    query_grpc: int


@dataclass(frozen=True)
class CollectorsOwn:
    """The Collector's listeners the page leaves in place, each on a free port in the test's file."""

    otlp_grpc: int
    otlp_http: int
    health: int
    scrape: int
    metrics: int

    def config(self) -> dict[str, Any]:
        grpc, http = f"127.0.0.1:{self.otlp_grpc}", f"127.0.0.1:{self.otlp_http}"
        config: dict[str, Any] = {
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": grpc}, "http": {"endpoint": http}}}},
            "extensions": {"health_check": {"endpoint": f"127.0.0.1:{self.health}"}},
            "exporters": {"prometheus": {"endpoint": f"127.0.0.1:{self.scrape}"}},
        }
        internal_metrics_on(config, self.metrics)
        return config


@contextmanager
def as_the_page_runs_them(backends: Backends, workdir: Path, ports: dict[int, int]) -> Iterator[Running]:
    """The Collector, then Jaeger, started by the page's commands with its files (ports moved)."""
    page = the_page()
    for name, text in page.files.items():
        (workdir / name).write_text(moved(text, ports))
    collectors = CollectorsOwn(*(free_port() for _ in range(5)))
    own = workdir / "collector-test-ports.yaml"
    own.write_text(yaml.safe_dump(collectors.config()))
    query_http, query_grpc = free_port(), free_port()
    jaegers_own = workdir / "jaeger-test-ports.yaml"
    jaegers_own.write_text(
        yaml.safe_dump(
            {
                "extensions": {
                    "jaeger_query": {
                        "http": {"endpoint": f"127.0.0.1:{query_http}"},
                        "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"},
                    }
                }
            }
        )
    )
    binaries = {"$OTEL_AGENTS_TEST_COLLECTOR": backends.collector, "$OTEL_AGENTS_TEST_JAEGER": backends.jaeger}

    def arguments(command: list[str], extra: Path) -> list[str]:
        """The command's files where they are (deploy/'s in the clone, the page's blocks in
        `workdir`), then the test's own."""
        assert all(a.startswith("--config=") for a in command[1:]), command
        names = [a.removeprefix("--config=") for a in command[1:]]
        return [
            *(f"--config={ROOT / n if n.startswith('deploy/') else workdir / n}" for n in names),
            f"--config={extra}",
        ]

    collector_command, jaeger_command = page.commands
    health = f"http://127.0.0.1:{ports[13134]}/status"
    # Jaeger traces its own queries to OTEL_EXPORTER_OTLP_ENDPOINT, by default localhost:4317: on
    # the page's machine, the Collector's. A 1 s export timeout: its last spans find it stopping.
    jaegers_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collectors.otlp_grpc}"}
    with ExitStack() as stack:
        collector = launch(
            binaries[collector_command[0]],
            arguments(collector_command, own),
            workdir / "collector.log",
            f"http://127.0.0.1:{collectors.health}/",
        )
        stack.callback(stop_process, collector)
        jaeger = launch(
            binaries[jaeger_command[0]],
            arguments(jaeger_command, jaegers_own),
            workdir / "jaeger.log",
            health,
            env={**jaegers_env, "OTEL_EXPORTER_OTLP_TIMEOUT": "1000"},
        )
        stack.callback(stop_process, jaeger)
        yield Running(collector, jaeger, collectors, query_http, query_grpc)


@pytest.fixture(scope="module")
def backends() -> Backends:
    return built_backends()


def test_the_one_machine_blocks_run_the_built_collector_and_jaeger_side_by_side(
    backends: Backends, tmp_path: Path
) -> None:
    ports: dict[int, int] = {}
    with as_the_page_runs_them(backends, tmp_path, ports) as running:
        assert set(ports) == {14317, 14318, 13134, 18888, 9090}, "the ports the page names"
        assert listening(running.jaeger.pid) == {
            ("127.0.0.1", ports[14317]),  # OTLP gRPC, off the Collector's 4317
            ("127.0.0.1", ports[14318]),  # OTLP HTTP, off 4318
            ("127.0.0.1", ports[13134]),  # the health check, off 13133
            ("127.0.0.1", ports[18888]),  # its own metrics, off 8888: the telemetry block
            ("127.0.0.1", running.query_http),
            ("127.0.0.1", running.query_grpc),
        }, "Jaeger listens where the page moved it, and nowhere else"
        own = running.collectors_own
        assert listening(running.collector.pid) == {
            ("127.0.0.1", port) for port in (own.otlp_grpc, own.otlp_http, own.health, own.scrape, own.metrics)
        }

        store = tmp_path / "store"
        done = cli(
            "--store", str(store), "demo", env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{own.otlp_http}"}
        )
        assert done.returncode == 0, done.stderr
        runs = json.loads(cli("--store", str(store), "runs", "--json").stdout)
        ana = next(run for run in runs if run["user_id"] == "ana")
        jaeger_url = f"http://127.0.0.1:{running.query_http}"
        explained = _explained_from_jaeger(ana["trace_id"], jaeger_url)
        assert explained["run"]["run_id"] == ana["run_id"], "through the Collector into Jaeger's moved port"
        assert explained["run"]["cost_usd"] == ana["cost_usd"]

        with urllib.request.urlopen(f"{jaeger_url}/", timeout=10) as response:
            assert NO_UI in response.read().decode(), "the page says: no UI in a Jaeger built from its module"
    version = subprocess.run([backends.jaeger, "version"], capture_output=True, text=True, timeout=60, check=True)
    assert '"gitVersion":""' in version.stdout + version.stderr, "the page says: it carries no version"


def _explained_from_jaeger(trace_id: str, url: str, within_s: float = 30) -> dict[str, Any]:
    """`otel-agents explain TRACE --jaeger URL --json` once the trace has arrived whole."""
    deadline = time.monotonic() + within_s
    while True:
        done = cli("explain", trace_id, "--jaeger", url, "--json")
        if done.returncode == 0:
            found: dict[str, Any] = json.loads(done.stdout)
            if found["run"]["run_id"] is not None and found["run"].get("cost_usd"):
                return found
        assert time.monotonic() < deadline, done.stderr or done.stdout[-2000:]
        time.sleep(0.5)


@contextmanager
def holding_8888() -> Iterator[None]:
    """127.0.0.1:8888 taken, as the Collector's own metrics take it on the page's machine (already
    taken by another process: as good)."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", 8888))
            sock.listen()
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
        yield


def test_without_the_telemetry_block_jaeger_exits_on_the_8888_the_collector_holds(
    backends: Backends, tmp_path: Path
) -> None:
    page = the_page()
    block = yaml.safe_load(moved(page.files["jaeger-one-machine.yaml"], {}))
    del block["service"]  # the port-moving block the page says is needed
    config = tmp_path / "jaeger-without-telemetry.yaml"
    config.write_text(yaml.safe_dump(block))
    query = {"extensions": {"jaeger_query": {"http": {"endpoint": f"127.0.0.1:{free_port()}"},
                                             "grpc": {"endpoint": f"127.0.0.1:{free_port()}"}}}}  # fmt: skip
    own = tmp_path / "jaeger-test-ports.yaml"
    own.write_text(yaml.safe_dump(query))
    with holding_8888():
        done = subprocess.run(
            [backends.jaeger, f"--config={ROOT / 'deploy' / 'jaeger' / 'config.yaml'}", f"--config={config}",
             f"--config={own}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert (
        "binding address localhost:8888 for Prometheus exporter: listen tcp 127.0.0.1:8888: bind: "
        "address already in use" in said
    ), said[-2000:]

"""Runs sampled in the process under `opentelemetry-instrument` (DESIGN section 3, "Keeping the runs
that matter"): where the distro's own span processor exports, nothing can be put in front of it and
one warning says so; where the app exports through `configure()`, runs are sampled."""

from __future__ import annotations

from pathlib import Path

from tests.support.openai_server import OpenAIServer
from tests.test_opentelemetry_instrument import APP, console_spans, run_instrumented


def run_roots(stdout: str) -> list[str]:
    return [s["name"] for s in console_spans(stdout) if s["parent_id"] is None and s["name"].startswith("invoke_")]


def test_under_the_distro_alone_runs_are_not_sampled_and_one_warning_says_so(tmp_path: Path) -> None:
    with OpenAIServer() as server:
        done = run_instrumented(
            APP, server, tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_AGENTS_SAMPLE_RUNS="0", OTEL_AGENTS_KEEP_RUNS=""
        )
    assert run_roots(done.stdout) == ["invoke_workflow writers-room"] * 2, "the distro's processor sends every run"
    said = [line for line in done.stderr.splitlines() if "OTEL_AGENTS_SAMPLE_RUNS" in line]
    assert len(said) == 1 and "OTEL_AGENTS_SAMPLE_RUNS=0 is not applied" in said[0], done.stderr[-2000:]


def test_under_the_distro_an_app_exporting_through_configure_samples_its_runs(tmp_path: Path) -> None:
    app = APP.with_name("zero_code_sampled_app.py")
    for keep, expected in (("", 0), ("tokens>0", 2)):
        with OpenAIServer() as server:
            done = run_instrumented(
                app,
                server,
                tmp_path,
                OTEL_TRACES_EXPORTER="none",
                OTEL_AGENTS_SAMPLE_RUNS="0",
                OTEL_AGENTS_KEEP_RUNS=keep,
            )
        assert run_roots(done.stdout) == ["invoke_workflow writers-room"] * expected, done.stderr[-2000:]
        assert "is not applied" not in done.stderr

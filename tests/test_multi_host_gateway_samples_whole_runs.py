"""deploy/multi-host's gateway tier for real on 127.0.0.1: a gateway with deploy/'s config (its
addresses, its component names in the spelling of Jaeger's Collector libraries and its
`decision_wait` changed; its pipelines, processors and policies as written) run by the Jaeger
binary built from deploy/jaeger/go.mod, writing to deploy/multi-host's Jaeger on memory storage.
Two app processes send it 200 runs over OTLP: looped, failed, costly and ordinary ones. Each run
that arrives in Jaeger arrives whole, every run a rule keeps arrives, and of the others the
sampling rate's share, within binomial bounds.

The agent tier in front (load balancing by trace id) is not run: the load-balancing exporter is not
served to these machines at any release (deploy/collector/manifest.yaml), so one gateway receives
every span here, as the agents would route all of a run's spans to one gateway.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from otel_agents._internal.export.store.reader import Store
from tests.support.backends import built_backends
from tests.support.deploy import load
from tests.support.jaeger import Jaeger, poll
from tests.support.multi_host import (
    LAYOUT,
    Gateway,
    OwnMetrics,
    app_environment,
    running_gateway,
    running_multi_host_jaeger,
)

ROOT = Path(__file__).resolve().parents[1]
# Each app's runs by kind (tests/support/gateway_app.py): 100 an app, 200 in all.
PLAN = {"plain": 58, "pricey": 14, "costly": 8, "guarded_loop": 6, "detected_loop": 6, "failed": 8}
APPS = ("gateway-app-1", "gateway-app-2")
KEPT_BY_A_RULE = {"costly", "guarded_loop", "detected_loop", "failed"}
# A timing parameter, not a policy: deploy/'s 120 s is for runs of minutes. These runs last well
# under a second; the apps' batch exporter sends a run's spans within its 5 s schedule delay.
DECISION_WAIT = "10s"
MISS_CHANCE = 1e-6  # a kept share outside the bounds this improbable fails the test

pytestmark = pytest.mark.backend


@dataclass(frozen=True)
class Recorded:
    """A run as its app recorded it (its local store): kind, span (id, parent) pairs, cost."""

    app: str
    kind: str
    spans: frozenset[tuple[str, str | None]]
    stop_kind: str | None
    cost_usd: float | None
    loop_detected: bool
    error: bool


@dataclass(frozen=True)
class Sent:
    runs: dict[str, Recorded]
    arrived: dict[str, frozenset[tuple[str, str | None]]]
    gateway: OwnMetrics


def policies() -> dict[str, Any]:
    gateway = load(LAYOUT / "otel-collector-gateway.yaml")
    return {p["name"]: p for p in gateway["processors"]["tail_sampling"]["policies"]}


def recorded_runs(app: str, store: Path) -> dict[str, Recorded]:
    runs = {}
    for run in Store(store).runs():
        spans = Store(store).spans(run.trace_id)
        runs[run.trace_id] = Recorded(
            app=app,
            kind=str(run.user_id),
            spans=frozenset((s.span_id, s.parent_span_id) for s in spans),
            stop_kind=run.stop_kind,
            cost_usd=run.cost_usd,
            loop_detected=any(
                e.get("name") == "otel_agents.loop_detected" for s in spans for e in s.data.get("events", [])
            ),
            error=any(s.data.get("status", {}).get("code") == "ERROR" for s in spans if s.parent_span_id is None),
        )
    return runs


def in_jaeger(jaeger: Jaeger) -> dict[str, frozenset[tuple[str, str | None]]]:
    """Every trace of the apps' services in Jaeger: its span (id, parent) pairs."""
    found = {}
    for service in APPS:
        params = {"service": service, "limit": "1000", "lookback": "1h"}
        for trace in jaeger.get("/api/traces", params)["data"] or []:
            found[trace["traceID"]] = frozenset(
                (
                    s["spanID"],
                    next((r["spanID"] for r in s["references"] if r["refType"] == "CHILD_OF"), None),
                )
                for s in trace["spans"]
            )
    return found


def run_apps(gateway: Gateway, workdir: Path) -> dict[str, Recorded]:
    arguments = [f"{kind}={count}" for kind, count in PLAN.items()]
    apps = []
    for app in APPS:
        env = {**os.environ, **app_environment(gateway, app, workdir / app)}
        command = [sys.executable, "-m", "tests.support.gateway_app", *arguments]
        with (workdir / f"{app}.log").open("wb") as log:  # AutoGen logs the failed runs' tracebacks
            apps.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log))
    for app, process in zip(APPS, apps, strict=True):
        out, _ = process.communicate(timeout=300)
        assert (process.returncode, out) == (0, b"ran\n"), (workdir / f"{app}.log").read_text()[-3000:]
    runs: dict[str, Recorded] = {}
    for app in APPS:
        runs |= recorded_runs(app, workdir / app)
    return runs


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sent]:
    backends = built_backends()
    workdir = tmp_path_factory.mktemp("multi-host")
    with (
        running_multi_host_jaeger(backends.jaeger, workdir) as jaeger,
        running_gateway(
            backends.jaeger,
            workdir,
            jaeger_otlp_grpc=f"127.0.0.1:{jaeger.ports.otlp_grpc}",
            decision_wait=DECISION_WAIT,
        ) as gateway,
    ):
        runs = run_apps(gateway, workdir)
        decisions = "otelcol_processor_tail_sampling_global_count_traces_sampled_total"
        decided = poll(gateway.own_metrics, lambda m: m.total(decisions) == len(runs), within_s=120)
        assert decided.total(decisions) == len(runs), "the gateway decided on every run"
        kept = decided.total(decisions, sampled="true")

        def delivered(found: dict[str, frozenset[tuple[str, str | None]]]) -> bool:
            """Jaeger holds as many runs as the gateway kept, and every span it sent."""
            sent_spans = gateway.own_metrics().total("otelcol_exporter_sent_spans_total")
            return len(found) == kept and sum(map(len, found.values())) == sent_spans

        arrived = poll(lambda: in_jaeger(jaeger), delivered, within_s=60)
        yield Sent(runs, arrived, gateway.own_metrics())


def test_the_apps_sent_the_runs_the_rules_are_about(sent: Sent) -> None:
    """Each kind is what it claims, so what follows tests the rules and not the runs."""
    threshold = 0.5
    assert policies()["keep-costly-runs"]["ottl_condition"]["span"] == [
        f'attributes["otel_agents.cost.usd"] > {threshold}'
    ]
    assert Counter(r.kind for r in sent.runs.values()) == {k: n * len(APPS) for k, n in PLAN.items()}
    assert Counter(r.app for r in sent.runs.values()) == {app: sum(PLAN.values()) for app in APPS}
    for run in sent.runs.values():
        expected = {
            "plain": (run.cost_usd or 1) < 0.001 and run.stop_kind == "max_messages" and not run.loop_detected,
            "pricey": 0.3 < (run.cost_usd or 0) < threshold and run.stop_kind == "max_messages",
            "costly": (run.cost_usd or 0) > threshold and run.stop_kind == "max_messages" and not run.error,
            "guarded_loop": run.stop_kind == "loop_guard",
            "detected_loop": run.loop_detected and run.stop_kind == "max_messages" and not run.error,
            "failed": run.error and run.stop_kind == "error",
        }
        assert expected[run.kind], run


def test_no_run_arrives_partial(sent: Sent) -> None:
    assert sent.arrived, "some runs arrived"
    assert set(sent.arrived) <= set(sent.runs), "only the apps' runs"
    partial = {t: sent.runs[t].kind for t, spans in sent.arrived.items() if spans != sent.runs[t].spans}
    assert partial == {}, "each arriving run has every span its app recorded, under the same parents"
    assert sent.gateway.total("otelcol_processor_tail_sampling_sampling_trace_dropped_too_early_total") == 0
    assert sent.gateway.total("otelcol_processor_tail_sampling_sampling_policy_evaluation_error_total") == 0


def test_every_run_a_rule_keeps_arrives(sent: Sent) -> None:
    must_keep = {t: r.kind for t, r in sent.runs.items() if r.kind in KEPT_BY_A_RULE}
    missing = Counter(kind for t, kind in must_keep.items() if t not in sent.arrived)
    assert missing == Counter(), f"of {len(must_keep)} looped, failed and costly runs, these did not arrive"


def binomial_tail(n: int, p: float, k: int) -> tuple[float, float]:
    """P(X <= k) and P(X >= k) for X ~ Binomial(n, p)."""
    pmf = [math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(n + 1)]
    return sum(pmf[: k + 1]), sum(pmf[k:])


def test_of_the_other_runs_the_sampling_rate_is_kept(sent: Sent) -> None:
    rate = policies()["sample-the-rest"]["probabilistic"]["sampling_percentage"] / 100
    rest = [t for t, r in sent.runs.items() if r.kind not in KEPT_BY_A_RULE]
    kept = sum(t in sent.arrived for t in rest)
    below, above = binomial_tail(len(rest), rate, kept)
    assert min(below, above) > MISS_CHANCE, (
        f"{kept} of {len(rest)} kept at a {rate:.0%} rate: P(X <= {kept}) = {below:.2g}, P(X >= {kept}) = {above:.2g}"
    )
    ruled = [t for t, r in sent.runs.items() if r.kind in KEPT_BY_A_RULE]
    print(  # the numbers README.md gives (pytest -s)
        f"\nsent {len(sent.runs)}; kept by a rule {sum(t in sent.arrived for t in ruled)} of {len(ruled)}; "
        f"of the other {len(rest)}: {kept} kept, {len(rest) * rate:.1f} expected at {rate:.0%}"
    )

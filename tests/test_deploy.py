"""deploy/: the compose stack validates, and every Collector pipeline uses only what it defines."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat

import otel_agents
from tests.support.backends import built_backends
from tests.support.collector import running_collector
from tests.support.deploy import DEPLOY, collector_configs, load, pipeline_problems
from tests.support.grafana import dashboard, options, variables
from tests.support.jaeger import poll
from tests.support.openai_server import OpenAIServer
from tests.support.processes import free_port
from tests.support.scrape import start_prometheus_with_job
from tests.support.teams import openai_client

COMPOSE_FILES = sorted(DEPLOY.glob("**/docker-compose*.yml"))


@pytest.fixture(scope="module")
def docker_compose() -> str:
    found = shutil.which("docker-compose")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose is not installed: scripts/test.sh installs Debian's package")
        pytest.skip("docker-compose (Debian's package) is not installed")
    return found


def test_there_is_a_compose_stack() -> None:
    assert DEPLOY / "docker-compose.yml" in COMPOSE_FILES


@pytest.mark.parametrize("compose_file", COMPOSE_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_compose_file_validates(docker_compose: str, compose_file: Path) -> None:
    done = subprocess.run(
        [docker_compose, "-f", str(compose_file), "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("compose_file", COMPOSE_FILES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_compose_mounts_files_that_exist(compose_file: Path) -> None:
    for name, service in load(compose_file)["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (compose_file.parent / source).exists(), f"{name} mounts missing {source}"


def test_the_stack_has_a_collector_in_front_of_jaeger_v2() -> None:
    services = load(DEPLOY / "docker-compose.yml")["services"]
    assert services["otel-collector"]["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert services["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")
    assert "16686:16686" in services["jaeger"]["ports"]
    assert {"4317:4317", "4318:4318"} <= set(services["otel-collector"]["ports"])
    collector = load(DEPLOY / "otel-collector" / "config.yaml")
    assert collector["exporters"]["otlp_grpc/jaeger"]["endpoint"] == "jaeger:4317"


@pytest.mark.parametrize("config", collector_configs(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_pipeline_names_only_defined_components(config: Path) -> None:
    assert pipeline_problems(load(config)) == []


def test_the_pipeline_check_finds_undefined_components() -> None:
    broken = {
        "receivers": {"otlp": {}},
        "exporters": {"debug": {}},
        "connectors": {"spanmetrics": {}},
        "service": {
            "extensions": ["health_check"],
            "pipelines": {
                "traces": {
                    "receivers": ["otlp", "jaeger"],
                    "processors": ["batch", "spanmetrics"],
                    "exporters": ["debug", "spanmetrics"],
                }
            },
        },
    }
    assert pipeline_problems(broken) == [
        "service.extensions: health_check is not defined",
        "pipeline traces: receiver jaeger is not defined",
        "pipeline traces: processor batch is not defined",
        "pipeline traces: processor spanmetrics is not defined",
        "connector spanmetrics: exported to only",
    ]


def test_metrics_flow_collector_to_prometheus_to_grafana_and_alertmanager() -> None:
    services = load(DEPLOY / "docker-compose.yml")["services"]
    collector = load(DEPLOY / "otel-collector" / "config.yaml")
    assert collector["service"]["pipelines"]["metrics"]["exporters"] == ["prometheus"]
    exporter_port = collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]

    prometheus = load(DEPLOY / "prometheus" / "prometheus.yml")
    targets = [t for job in prometheus["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == [f"otel-collector:{exporter_port}"]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in services["prometheus"]["volumes"]}
    assert prometheus["rule_files"] == ["/etc/prometheus/rules.yml"]
    assert mounted["/etc/prometheus/rules.yml"] == "./prometheus/rules.yml"
    (alertmanager,) = prometheus["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert alertmanager.split(":")[0] in services and alertmanager.endswith(":9093")

    datasource = load(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml")["datasources"][0]
    assert (datasource["type"], datasource["uid"], datasource["url"]) == (
        "prometheus",
        "prometheus",
        "http://prometheus:9090",
    )
    grafana_mounts = {v.split(":")[1]: v.split(":")[0] for v in services["grafana"]["volumes"]}
    provider = load(DEPLOY / "grafana" / "provisioning" / "dashboards" / "otel-agents.yml")["providers"][0]
    assert grafana_mounts[provider["options"]["path"]] == "./grafana/dashboards"
    assert grafana_mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"


def test_jaegers_monitor_tab_reads_the_span_metrics_prometheus_scrapes() -> None:
    collector = load(DEPLOY / "otel-collector" / "config.yaml")
    pipelines = collector["service"]["pipelines"]
    assert "span_metrics" in pipelines["traces"]["exporters"]
    assert [p["exporters"] for p in pipelines.values() if "span_metrics" in p["receivers"]] == [["prometheus"]]

    jaeger = load(DEPLOY / "jaeger" / "config.yaml")["extensions"]
    backend = jaeger["jaeger_storage"]["metric_backends"][jaeger["jaeger_query"]["storage"]["metrics"]]["prometheus"]
    endpoint = urllib.parse.urlsplit(backend["endpoint"])
    services = load(DEPLOY / "docker-compose.yml")["services"]
    assert endpoint.hostname in services and f"{endpoint.port}:9090" in services["prometheus"]["ports"]
    assert (backend["metric_namespace"], backend["latency_unit"]) == ("traces_span_metrics", "ms")
    assert collector["connectors"]["span_metrics"]["histogram"]["unit"] == "ms"


def test_prometheus_and_alertmanager_configs_are_valid(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    amtool = shutil.which("amtool")
    if promtool is None or amtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool/amtool missing: scripts/test.sh installs Debian's prometheus packages")
        pytest.skip("promtool/amtool not installed")
    config = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    local = tmp_path / "prometheus.yml"
    local.write_text(config.replace("/etc/prometheus/rules.yml", str(DEPLOY / "prometheus" / "rules.yml")))
    done = subprocess.run([promtool, "check", "config", str(local)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [amtool, "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_multi_host_layout_routes_by_trace_and_samples_whole_runs() -> None:
    layout = DEPLOY / "multi-host"
    assert layout / "docker-compose.yml" in COMPOSE_FILES
    agent = load(layout / "otel-collector-agent.yaml")
    assert agent["service"]["pipelines"]["traces"]["exporters"] == ["loadbalancing"]
    balancer = agent["exporters"]["loadbalancing"]
    assert balancer["routing_key"] == "traceID"
    assert balancer["resolver"]["dns"]["hostname"] == "otel-gateway"

    gateway = load(layout / "otel-collector-gateway.yaml")
    assert "tail_sampling" in gateway["service"]["pipelines"]["traces"]["processors"]
    policies = {p["name"]: p for p in gateway["processors"]["tail_sampling"]["policies"]}
    assert policies["keep-errors"]["status_code"]["status_codes"] == ["ERROR"]
    assert policies["keep-loop-detections"]["ottl_condition"]["spanevent"] == ['name == "otel_agents.loop_detected"']
    assert policies["keep-costly-runs"]["ottl_condition"]["span"] == ['attributes["otel_agents.cost.usd"] > 0.5']
    assert gateway["processors"]["tail_sampling"]["decision_wait"] == "120s"
    counted = [p for p in gateway["service"]["pipelines"].values() if "span_metrics" in p["exporters"]]
    assert [p["receivers"] for p in counted] == [["otlp"]], "span metrics from what the gateway receives"
    assert "tail_sampling" not in counted[0].get("processors", []), "every run counted, not the sampled ones"

    services = load(layout / "docker-compose.yml")["services"]
    gateways = [
        name
        for name, s in services.items()
        if "otel-gateway" in (s.get("networks", {}).get("default") or {}).get("aliases", [])
    ]
    assert len(gateways) >= 2, "a gateway tier, not one gateway"
    jaeger = load(layout / "jaeger.yaml")
    backends = jaeger["extensions"]["jaeger_storage"]["backends"]
    assert all("memory" not in backend for backend in backends.values()), "Jaeger on a real storage"
    metrics = jaeger["extensions"]["jaeger_storage"]["metric_backends"]["prometheus"]["prometheus"]
    assert metrics["endpoint"] == "http://prometheus:9090" and "prometheus" in services
    assert "elasticsearch" in services


def priced_team(server: OpenAIServer) -> RoundRobinGroupChat:
    """Two agents on the test server (it answers as gpt-4o-mini, which has a price): a run with a cost."""
    agents = [AssistantAgent(name, model_client=openai_client(server)) for name in ("writer", "critic")]
    return RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(3), name="team")


@pytest.mark.parametrize(
    "config", [DEPLOY / "prometheus" / "prometheus.yml", DEPLOY / "multi-host" / "prometheus.yml"], ids=str
)
@pytest.mark.backend
async def test_the_service_the_collector_writes_is_the_job_prometheus_keeps(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    """The real Collector (built from deploy/collector/manifest.yaml, deploy/'s config on 127.0.0.1)
    writes the service (service.namespace/service.name) as `job`, the process's `service.instance.id`
    as `instance`, and a run attribute that OTEL_AGENTS_METRIC_ATTRIBUTES made a label; deploy/'s
    scrape job, scraping it, keeps the service as `job`."""
    if shutil.which("prometheus") is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus missing: scripts/test.sh installs Debian's prometheus packages")
        pytest.skip("prometheus not installed")
    backends = built_backends()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.namespace=shop")
    monkeypatch.setenv("OTEL_AGENTS_METRIC_ATTRIBUTES", "tenant")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    (job,) = load(config)["scrape_configs"]
    nowhere = f"127.0.0.1:{free_port()}"  # its traces pipeline's Jaeger: this test sends no traces
    with running_collector(backends.collector, tmp_path, jaeger_otlp_grpc=nowhere) as collector:
        telemetry = otel_agents.configure(service_name="checkout", endpoint=collector.http_endpoint, store=False)
        try:
            with otel_agents.run_attributes(attributes={"tenant": "acme"}):
                await priced_team(openai_server).run(task="go")
            instance = telemetry.sdk_tracer_provider.resource.attributes["service.instance.id"]  # type: ignore[attr-defined]
        finally:
            telemetry.shutdown()  # the metrics go to the Collector now
        prometheus = start_prometheus_with_job(tmp_path, job, collector.scrape_target)
        try:
            series = poll(lambda: prometheus.query("otel_agents_runs_total"), bool, within_s=30)
            services = options(prometheus, variables(dashboard())["job"], {})
            labels = options(prometheus, variables(dashboard())["label"], {})
        finally:
            prometheus.stop()
    (scraped,) = series
    assert scraped["metric"]["job"] == "shop/checkout"
    assert scraped["metric"]["instance"] == collector.scrape_target, "a service's series stay apart per Collector"
    assert "exported_job" not in scraped["metric"]
    assert services == ["shop/checkout"], "the dashboard's Service variable lists the service"
    assert scraped["metric"]["exported_instance"] == instance
    assert scraped["metric"]["tenant"] == "acme" and scraped["metric"]["gen_ai_workflow_name"] == "team"
    assert labels == ["tenant"], "the Cost label variable offers run attributes only, not the process id"

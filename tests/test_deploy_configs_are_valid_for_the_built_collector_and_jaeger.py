"""deploy/'s Collector and Jaeger configs, checked by the binaries themselves: each one's `validate`
subcommand, on the Collector built from deploy/collector/manifest.yaml and Jaeger built from
deploy/jaeger/go.mod (which also checks the configs whose components the Collector cannot be built
with here, when it has them all); and the compose files run the images of those same versions."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.backends import Backends, built_backends
from tests.support.deploy import DEPLOY, collector_configs, load
from tests.support.multi_host import in_jaegers_spelling

# Jaeger v2 is released from the same tag as its v1 module: v1.75.0 is Jaeger 2.12.0.
JAEGER_IMAGE_OF_MODULE = {"v1.75.0": "2.12.0"}
# What deploy/collector/manifest.yaml leaves out, and why, is written there: these modules (or what
# they import) are not served at the pinned release to the machines this project builds on.
NOT_BUILDABLE_HERE = {"loadbalancing", "resourcedetection", "tail_sampling"}


@pytest.fixture(scope="module")
def backends() -> Backends:
    return built_backends()


def is_jaeger(config: dict[str, object]) -> bool:
    return "jaeger_storage" in (config.get("extensions") or {})  # type: ignore[operator]


def component_types(config: dict[str, object]) -> set[str]:
    types = set()
    for kind in ("receivers", "processors", "exporters", "extensions", "connectors"):
        for name in config.get(kind) or {}:  # type: ignore[attr-defined]
            types.add(name.split("/")[0])
    return types


def built_components(binary: str) -> set[str]:
    done = subprocess.run([binary, "components"], capture_output=True, text=True, timeout=60, check=True)
    listed = yaml.safe_load(done.stdout)
    return {
        str(entry["name"])
        for kind in ("receivers", "processors", "exporters", "extensions", "connectors")
        for entry in listed.get(kind) or []
    }


def validate(binary: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, "validate", f"--config={config}"], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("config", collector_configs(), ids=lambda p: str(p.relative_to(DEPLOY)))
@pytest.mark.backend
def test_each_deploy_config_passes_its_binarys_validate(backends: Backends, config: Path, tmp_path: Path) -> None:
    data = load(config)
    binary = backends.jaeger if is_jaeger(data) else backends.collector
    missing = component_types(data) - built_components(binary)
    if missing and missing <= NOT_BUILDABLE_HERE:
        # Jaeger's binary is a Collector with tail sampling: it checks such a config (the
        # multi-host gateway) as it runs it, in its own Collector libraries' component names.
        spelled = in_jaegers_spelling(data)
        if not component_types(spelled) <= built_components(backends.jaeger):
            unbuilt = ", ".join(sorted(missing))
            pytest.skip(f"uses {unbuilt}, which cannot be built here (deploy/collector/manifest.yaml)")
        binary, config = backends.jaeger, tmp_path / config.name
        config.write_text(yaml.safe_dump(spelled))
    done = validate(binary, config)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.backend
def test_the_single_host_stack_needs_nothing_the_build_lacks(backends: Backends) -> None:
    collector = load(DEPLOY / "otel-collector" / "config.yaml")
    assert component_types(collector) <= built_components(backends.collector)
    jaeger = load(DEPLOY / "jaeger" / "config.yaml")
    assert component_types(jaeger) <= built_components(backends.jaeger)


@pytest.mark.backend
def test_validate_refuses_a_config_the_binary_cannot_run(backends: Backends, tmp_path: Path) -> None:
    config = load(DEPLOY / "otel-collector" / "config.yaml")
    config["exporters"]["otlp/jaeger"] = config["exporters"].pop("otlp_grpc/jaeger")  # the name before v0.165
    config["service"]["pipelines"]["traces"]["exporters"] = ["otlp/jaeger"]
    config["processors"]["batch"] = {"send_batch_size": "many"}
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(config))
    done = validate(backends.collector, broken)
    assert done.returncode != 0
    assert "send_batch_size" in done.stdout + done.stderr


def test_the_compose_files_run_the_versions_the_tests_build() -> None:
    module = re.search(r"github\.com/jaegertracing/jaeger (v\S+)", (DEPLOY / "jaeger" / "go.mod").read_text())
    assert module is not None
    manifest = load(DEPLOY / "collector" / "manifest.yaml")
    collector_version = manifest["dist"]["version"]
    kinds = ("receivers", "processors", "exporters", "extensions", "connectors")
    releases = {module["gomod"].split()[-1] for kind in kinds for module in manifest.get(kind) or []}
    assert releases == {f"v{collector_version}"}, "every component at the one release"
    for compose in sorted(DEPLOY.glob("**/docker-compose*.yml")):
        for name, service in load(compose)["services"].items():
            image = service.get("image", "")
            if image.startswith("otel/opentelemetry-collector-contrib:"):
                assert image.endswith(f":{collector_version}"), (compose.name, name)
            if image.startswith("jaegertracing/jaeger:"):
                assert image.endswith(f":{JAEGER_IMAGE_OF_MODULE[module.group(1)]}"), (compose.name, name)

"""Where traces go, by the standard variables: argument, then variable, then default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.config.settings import ConfigError, Settings, resolve_settings
from otel_agents._internal.export.exporters import span_exporters
from otel_agents._internal.export.store.writer import StoreSpanExporter


def settings(env: dict[str, str] | None = None, **kwargs: Any) -> Settings:
    return resolve_settings(environ={"XDG_DATA_HOME": "/tmp/xdg", **(env or {})}, **kwargs)


def test_no_endpoint_means_the_embedded_store_in_the_user_data_directory() -> None:
    resolved = settings()
    assert resolved.traces_exporters == ("store",)
    assert resolved.store_dir == Path("/tmp/xdg/otel-agents/store")
    assert resolved.store_max_bytes == 200 * 1024 * 1024
    assert resolved.metrics_exporters == ()


def test_a_generic_endpoint_is_a_base_url_for_http() -> None:
    resolved = settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert resolved.traces_exporters == ("otlp",)
    assert resolved.traces.endpoint == "http://collector:4318/v1/traces"
    assert resolved.metrics.endpoint == "http://collector:4318/v1/metrics"
    assert resolved.metrics_exporters == ("otlp",)
    assert resolved.store_dir is None, "with an endpoint, no store unless asked for"


def test_signal_endpoints_are_used_as_given_and_win_over_the_generic_one() -> None:
    resolved = settings(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example:443/custom/path",
        }
    )
    assert resolved.traces.endpoint == "https://traces.example:443/custom/path"
    assert resolved.metrics.endpoint == "http://collector:4318/v1/metrics"


def test_grpc_endpoints_are_used_as_given() -> None:
    resolved = settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert (resolved.traces.protocol, resolved.traces.endpoint) == ("grpc", "http://collector:4317")


def test_arguments_win_over_variables() -> None:
    resolved = settings(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://from-env:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        endpoint="http://from-argument:4318",
        protocol="http/protobuf",
        headers={"Authorization": "Bearer x"},
    )
    assert resolved.traces.endpoint == "http://from-argument:4318/v1/traces"
    assert resolved.traces.protocol == "http/protobuf"
    assert resolved.traces.headers == {"authorization": "Bearer x"}


def test_signal_protocol_wins_over_the_generic_one() -> None:
    resolved = settings(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        }
    )
    assert resolved.traces.protocol == "http/protobuf" and resolved.metrics.protocol == "grpc"


@pytest.mark.parametrize(
    ("env", "kwargs", "exporters", "store"),
    [
        ({}, {"store": False}, (), False),
        ({"OTEL_TRACES_EXPORTER": "none"}, {}, (), False),
        ({"OTEL_TRACES_EXPORTER": "console"}, {}, ("console",), False),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, {}, ("otlp", "console"), False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, {"store": "/tmp/s"}, ("otlp", "store"), True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_AGENTS_STORE": "/tmp/s"}, {}, ("otlp", "store"), True),
        ({"OTEL_AGENTS_STORE": "/tmp/s", "OTEL_TRACES_EXPORTER": "none"}, {}, (), False),
        ({"OTEL_TRACES_EXPORTER": "none"}, {"store": "/tmp/s"}, ("store",), True),
        ({"OTEL_TRACES_EXPORTER": "none"}, {"store": True}, ("store",), True),
        ({}, {"span_exporter_given": True}, (), False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, {"span_exporter_given": True}, (), False),
    ],
)
def test_which_exporters(env: dict[str, str], kwargs: dict[str, Any], exporters: tuple[str, ...], store: bool) -> None:
    resolved = settings(env, **kwargs)
    assert resolved.traces_exporters == exporters
    assert (resolved.store_dir is not None) == store


def test_exporters_are_built_for_the_protocol(tmp_path: Path) -> None:
    http = span_exporters(settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, store=tmp_path))
    assert [type(e) for e in http] == [HttpSpanExporter, StoreSpanExporter]
    grpc = span_exporters(settings(endpoint="http://127.0.0.1:4317", protocol="grpc"))
    assert [type(e) for e in grpc] == [GrpcSpanExporter]
    for exporter in http + grpc:
        exporter.shutdown()


@pytest.mark.parametrize(
    ("env", "store"),
    [
        ({"XDG_DATA_HOME": "/data", "HOME": "/home/me"}, "/data/otel-agents/store"),
        ({"HOME": "/home/me"}, "/home/me/.local/share/otel-agents/store"),
        ({"XDG_DATA_HOME": " ", "HOME": "/home/me"}, "/home/me/.local/share/otel-agents/store"),
    ],
)
def test_the_default_store_is_in_the_user_data_directory_the_environment_names(env: dict[str, str], store: str) -> None:
    assert resolve_settings(environ=env).store_dir == Path(store)


def test_a_given_exporter_replaces_the_default_destination(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    with otel_agents.configure(span_exporter=InMemorySpanExporter(), set_global=False) as telemetry:
        assert telemetry.settings.traces_exporters == ()
    assert not (tmp_path / "otel-agents").exists()


@pytest.mark.parametrize(
    ("env", "kwargs", "message"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, {}, "OTEL_EXPORTER_OTLP_PROTOCOL='http/json'"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, {}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='udp'"),
        ({}, {"protocol": "thrift"}, "protocol='thrift'"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector"}, {}, "OTEL_EXPORTER_OTLP_ENDPOINT='collector'"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c:21"}, {}, "OTEL_EXPORTER_OTLP_ENDPOINT='ftp://c:21'"),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:99999"}, {}, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="),
        ({}, {"endpoint": "not a url"}, "endpoint='not a url'"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"}, {}, "OTEL_EXPORTER_OTLP_TIMEOUT='soon'"),
        ({"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "-1"}, {}, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT='-1'"),
        ({"OTEL_EXPORTER_OTLP_INSECURE": "yes"}, {}, "OTEL_EXPORTER_OTLP_INSECURE='yes'"),
        ({"OTEL_EXPORTER_OTLP_CERTIFICATE": "/no/such/ca.pem"}, {}, "OTEL_EXPORTER_OTLP_CERTIFICATE='/no/such/ca.pem'"),
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, {}, "OTEL_TRACES_EXPORTER='jaeger'"),
        ({"OTEL_TRACES_EXPORTER": "none,otlp"}, {}, "OTEL_TRACES_EXPORTER='none,otlp'"),
        ({"OTEL_METRICS_EXPORTER": "statsd"}, {}, "OTEL_METRICS_EXPORTER='statsd'"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, {}, "OTEL_TRACES_SAMPLER='sometimes'"),
        ({"OTEL_TRACES_SAMPLER_ARG": "1.5"}, {}, "OTEL_TRACES_SAMPLER_ARG='1.5'"),
        ({"OTEL_TRACES_SAMPLER_ARG": "half"}, {}, "OTEL_TRACES_SAMPLER_ARG='half'"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "lots"}, {}, "OTEL_BSP_MAX_QUEUE_SIZE='lots'"),
        ({"OTEL_BSP_SCHEDULE_DELAY": "0"}, {}, "OTEL_BSP_SCHEDULE_DELAY='0'"),
        ({"OTEL_AGENTS_STORE_MAX_MB": "0"}, {}, "OTEL_AGENTS_STORE_MAX_MB='0'"),
        ({"OTEL_AGENTS_STORE_MAX_MB": "big"}, {}, "OTEL_AGENTS_STORE_MAX_MB='big'"),
        ({"OTEL_AGENTS_STORE_MAX_MB": "inf"}, {}, "OTEL_AGENTS_STORE_MAX_MB='inf'"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "1e400"}, {}, "OTEL_EXPORTER_OTLP_TIMEOUT='1e400'"),
        ({"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10000"}, {}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=10000 is more than"),
        (
            {"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "101"},
            {},
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=101 is more than OTEL_BSP_MAX_QUEUE_SIZE=100",
        ),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "100"}, {}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=512 (the SDK's default) is more"),
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "9" * 400}, {}, "OTEL_BSP_MAX_QUEUE_SIZE="),
        ({}, {"store": 42}, "store=42"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "team=a,broken"}, {}, "OTEL_RESOURCE_ATTRIBUTES"),
    ],
)
def test_bad_values_are_refused_naming_the_setting_and_value(
    env: dict[str, str], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        settings(env, **kwargs)
    assert message in str(raised.value)


def test_bad_headers_are_refused_without_showing_them() -> None:
    secret = "Bearer sk-very-secret"
    for env, kwargs in (
        ({"OTEL_EXPORTER_OTLP_HEADERS": f"authorization {secret}"}, {}),
        ({"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"ok=1,{secret}"}, {}),
        ({}, {"headers": f"x-key {secret}"}),
        ({}, {"headers": {"authorization": 42}}),
    ):
        with pytest.raises(ConfigError) as raised:
            settings(env, **kwargs)
        assert "sk-very-secret" not in str(raised.value)
        assert "HEADERS" in str(raised.value) or "headers" in str(raised.value)


def test_variables_are_validated_even_when_an_argument_wins() -> None:
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL='smoke'"):
        settings({"OTEL_EXPORTER_OTLP_PROTOCOL": "smoke"}, protocol="grpc")
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "nope"}, endpoint="http://127.0.0.1:4318")

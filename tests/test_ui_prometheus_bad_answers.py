"""The cost page's Prometheus answering badly after its headers, on real sockets on 127.0.0.1: a
body held after the headers (success or error status) is "slow", said with the URL, and the page's
threads end at its deadline although the server still holds; a successful answer any part of which
is not as Prometheus's HTTP API answers (bad numbers, non-objects, missing keys, times out of range)
is "not Prometheus's API", said with the URL: never a ValueError, KeyError or TypeError, which the
page would take for a bad request or its own fault."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from otel_agents.ui.prometheus import BadRequest, PrometheusCost, PrometheusUnavailable
from tests.support.local_http import holding_the_body
from tests.support.prometheus_answers import EMPTY, answering, as_json


def threads_of_the_page(before: set[threading.Thread]) -> list[threading.Thread]:
    """The threads started since `before` that ask Prometheus (the pool's and the readers')."""
    return [
        thread
        for thread in threading.enumerate()
        if thread not in before and thread.name.startswith(("prometheus", "otel-agents-ui-get"))
    ]


@pytest.mark.parametrize("status", [200, 503])
def test_a_body_held_after_the_headers_is_slow_naming_the_url_and_the_threads_end(status: int) -> None:
    released = threading.Event()
    before = set(threading.enumerate())
    with holding_the_body(status, length=1000, sent=b'{"status": ', released=released) as url:
        with pytest.raises(PrometheusUnavailable) as slow:
            PrometheusCost(url, timeout_s=0.5).cost_json("team", None)
        asking = threads_of_the_page(before)
        for thread in asking:  # each ends by the deadline and one socket wait, the body still held
            thread.join(timeout=10)
        still_reading = [thread.name for thread in asking if thread.is_alive()]
        assert not released.is_set(), "the server held every body until the page was done"

    assert str(slow.value).startswith(f"Prometheus at {url} is slow: no whole answer to /api/v1/query within 0.5 s")
    assert asking, "the page's queries ran in threads of their own"
    assert still_reading == []


VECTOR: dict[str, Any] = {"resultType": "vector", "result": [{"metric": {}, "value": [1_700_000_000, "1.5"]}]}
BAD_QUERY_ANSWERS: dict[str, Any] = {
    "empty-series": {"resultType": "vector", "result": [{}]},
    "series-not-an-object": {"resultType": "vector", "result": [1]},
    "value-not-a-number": {"resultType": "vector", "result": [{"metric": {}, "value": [1_700_000_000, "x"]}]},
    "value-a-list": {"resultType": "vector", "result": [{"metric": {}, "value": [1_700_000_000, [1]]}]},
    "time-out-of-range": {"resultType": "vector", "result": [{"metric": {}, "value": [1e20, "1"]}]},
    "time-negative": {"resultType": "vector", "result": [{"metric": {}, "value": [-1, "1"]}]},
    "value-not-a-pair": {"resultType": "vector", "result": [{"metric": {}, "value": "1"}]},
    "metric-not-an-object": {"resultType": "vector", "result": [{"metric": [], "value": [1_700_000_000, "1"]}]},
    "label-not-a-string": {
        "resultType": "vector",
        "result": [{"metric": {"gen_ai_workflow_name": 1}, "value": [1_700_000_000, "1"]}],
    },
    "data-a-list": [],
    "a-matrix": {"resultType": "matrix", "result": []},
}
BAD_RANGE_ANSWERS: dict[str, Any] = {
    "no-values": {"resultType": "matrix", "result": [{"metric": {}}]},
    "values-not-a-list": {"resultType": "matrix", "result": [{"metric": {}, "values": 3}]},
    "sample-not-a-number": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1_700_000_000, "NaN?"]]}]},
    "sample-time-out-of-range": {"resultType": "matrix", "result": [{"metric": {}, "values": [["1", "1"]]}]},
}


def badly(path_answered_badly: str, data: Any) -> Any:
    def reply(path: str) -> tuple[int, str, bytes]:
        if path == path_answered_badly:
            return as_json(200, {"status": "success", "data": data})
        return as_json(200, EMPTY[path])

    return reply


def asked_of_the_page(url: str, how: str, by: str) -> Any:
    source = PrometheusCost(url)
    if how == "cost_json":
        return source.cost_json(by, "7d")
    if how == "days_json":
        return source.days_json(by, "7d")
    pytest.importorskip("markupsafe")
    return source.cost_context(by, "7d")


@pytest.mark.parametrize("how", ["cost_json", "cost_context", "days_json"])
@pytest.mark.parametrize(
    ("path", "data"),
    [("/api/v1/query", a) for a in BAD_QUERY_ANSWERS.values()]
    + [("/api/v1/query_range", a) for a in BAD_RANGE_ANSWERS.values()],
    ids=[*BAD_QUERY_ANSWERS, *BAD_RANGE_ANSWERS],
)
def test_a_successful_answer_with_a_bad_part_is_not_prometheuss_api_with_the_url(
    path: str, data: Any, how: str
) -> None:
    by = "day" if how == "days_json" or path == "/api/v1/query_range" else "team"
    with answering(badly(path, data)) as url:
        with pytest.raises(PrometheusUnavailable) as wrong:
            asked_of_the_page(url, how, by)

    message = str(wrong.value)
    assert message.startswith(f"{url}{path} did not answer as Prometheus's HTTP API does ("), message
    assert message.endswith(f"is {url} the base URL of a Prometheus?")


def test_a_good_answer_of_the_same_shape_is_read() -> None:
    """The bad answers above differ from this one by their bad part only."""
    with answering(badly("/api/v1/query", VECTOR)) as url:
        figures = PrometheusCost(url).cost_json("team", "7d")

    assert figures["cost_usd"] == 1.5 and figures["rows"] == [
        {"key": "(none)", "cost_usd": 1.5, **{"cost_per_outcome_usd": 1.5, "success_share": 1.5}}
    ]


def test_json_nested_deeper_than_python_reads_is_not_prometheuss_api() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000

    def reply(path: str) -> tuple[int, str, bytes]:
        return (200, "application/json", deep) if path == "/api/v1/query" else as_json(200, EMPTY[path])

    with answering(reply) as url:
        with pytest.raises(PrometheusUnavailable, match=f"^{url}/api/v1/query did not answer as Prometheus's"):
            PrometheusCost(url).cost_json("team", "1h")


@pytest.mark.parametrize(
    "exemplars",
    [[{}], [1], [{"seriesLabels": {}, "exemplars": [{"labels": {}, "value": "x", "timestamp": 1_700_000_000}]}]],
    ids=["empty-series", "not-an-object", "value-not-a-number"],
)
def test_exemplars_with_a_bad_part_leave_the_figures_and_say_they_are_not_prometheuss_api(exemplars: Any) -> None:
    pytest.importorskip("markupsafe")
    with answering(badly("/api/v1/query_exemplars", exemplars)) as url:
        context = PrometheusCost(url).cost_context("team", "1h")

    assert context["exemplars"] == []
    assert context["no_exemplars"].startswith(
        f"Prometheus at {url} gave no exemplars: {url}/api/v1/query_exemplars did not answer as Prometheus's"
    )


@pytest.mark.parametrize("since", ["91d", "13w", "100w", "x", "0h"])
def test_a_range_prometheus_should_not_be_asked_is_a_bad_request_saying_the_most(since: str) -> None:
    """Refused before Prometheus is asked: no server listens here."""
    for ask in (PrometheusCost("http://127.0.0.1:9").cost_json, PrometheusCost("http://127.0.0.1:9").days_json):
        with pytest.raises(BadRequest, match=f"since '{since}'") as refused:
            ask("day", since)
        if since[0].isdigit() and since[0] != "0":
            assert "at most 90d" in str(refused.value)

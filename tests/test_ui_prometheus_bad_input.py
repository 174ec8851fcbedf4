"""The cost page's Prometheus answering badly, on real sockets on 127.0.0.1: unreachable, slow (a
reply held until after the page gave up), an error status with Prometheus's error text, an answer
that is not Prometheus's API. Each is a `PrometheusUnavailable` saying which, with the URL; a
reachable server that answers as Prometheus does is asked every query of a page at once."""

from __future__ import annotations

import threading
import time

import pytest

from otel_agents.ui.prometheus import PROMETHEUS_TIMEOUT_S, BadRequest, PrometheusCost, PrometheusUnavailable
from tests.support.bad_backends import refusing_endpoint
from tests.support.prometheus_answers import EMPTY, answering, as_json


def test_the_bound_is_five_seconds_a_request() -> None:
    assert PROMETHEUS_TIMEOUT_S == 5.0
    assert PrometheusCost("http://127.0.0.1:9090").timeout_s == 5.0


@pytest.mark.parametrize("url", ["", "127.0.0.1:9090", "ftp://host", "http://", "http://host:9090/?q=1"])
def test_a_url_that_is_not_a_base_url_is_refused_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match="--prometheus") as refused:
        PrometheusCost(url)
    assert repr(url) in str(refused.value)


def test_a_url_with_credentials_is_refused_without_showing_them() -> None:
    with pytest.raises(ValueError, match="--prometheus: a URL with credentials in it is refused") as refused:
        PrometheusCost("http://user:secret@127.0.0.1:9090")
    assert "secret" not in str(refused.value)


@pytest.mark.parametrize("by", ["user", "conversation"])
def test_a_dimension_prometheus_has_no_label_for_is_refused_naming_those_it_has(by: str) -> None:
    with answering(lambda path: as_json(200, EMPTY[path])) as url:
        with pytest.raises(BadRequest, match=f"by '{by}'.*team, model, agent, day"):
            PrometheusCost(url).cost_json(by, None)


def test_an_unreachable_prometheus_is_said_so_with_its_url() -> None:
    with refusing_endpoint() as url:
        with pytest.raises(PrometheusUnavailable, match=f"cannot reach Prometheus at {url}"):
            PrometheusCost(url).cost_json("team", None)


def test_a_slow_prometheus_is_said_so_and_the_page_does_not_wait_for_it() -> None:
    release = threading.Event()

    def held(path: str) -> tuple[int, str, bytes]:
        release.wait(30)
        return as_json(200, EMPTY[path])

    with answering(held) as url:
        try:
            with pytest.raises(PrometheusUnavailable) as slow:
                PrometheusCost(url, timeout_s=0.2).cost_json("team", None)
            assert not release.is_set(), "the page gave up while every reply was still held"
        finally:
            release.set()
    assert str(slow.value).startswith(f"Prometheus at {url} is slow: no whole answer to /api/v1/query within 0.2 s")


def test_an_error_status_is_said_with_prometheuss_own_error_text() -> None:
    error = {"status": "error", "errorType": "execution", "error": "query processing would load too many samples"}
    with answering(lambda path: as_json(422, error)) as url:
        with pytest.raises(PrometheusUnavailable) as refused:
            PrometheusCost(url).cost_json("model", "7d")
    assert str(refused.value) == (
        f"Prometheus at {url} answered 422 to /api/v1/query: execution: query processing would load too many samples"
    )


@pytest.mark.parametrize(
    "reply",
    [
        (200, "text/html", b"<html><body>Grafana</body></html>"),
        (404, "text/plain", b"404 page not found"),
        (200, "application/json", b'{"data": {"result": []}}'),
        (200, "application/json", b'{"status": "success", "data": {"resultType": "vector"}}'),
    ],
    ids=["html", "not-found", "json-without-status", "no-result"],
)
def test_an_answer_that_is_not_prometheuss_api_is_said_so_with_the_url(reply: tuple[int, str, bytes]) -> None:
    with answering(lambda path: reply) as url:
        with pytest.raises(PrometheusUnavailable) as wrong:
            PrometheusCost(url).cost_json("team", None)
    message = str(wrong.value)
    assert message.startswith(f"{url}/api/v1/query did not answer as Prometheus's HTTP API does")
    assert f"is {url} the base URL of a Prometheus?" in message
    assert message.endswith(" (status 404)") == (reply[0] == 404), "an error status is said with the answer"


def test_every_query_of_a_page_is_in_flight_at_once() -> None:
    """Each reply is held until every query of the page has arrived: asked in turn, the first would
    wait past the bound."""
    arrived: list[str] = []
    lock = threading.Lock()
    everyone = threading.Event()
    expected = 0

    def held(path: str) -> tuple[int, str, bytes]:
        with lock:
            arrived.append(path)
            if len(arrived) >= expected:
                everyone.set()
        everyone.wait(30)
        return as_json(200, EMPTY[path])

    with answering(lambda path: as_json(200, EMPTY[path])) as url:
        asked = PrometheusCost(url).cost_json("team", "24h")["queries"]
    expected = len(asked) + 1  # and the flags, which say whether exemplars are kept
    with answering(held) as url:
        figures = PrometheusCost(url, timeout_s=20).cost_json("team", "24h")
    assert everyone.is_set()
    assert len(arrived) == expected
    assert figures["cost_usd"] is None and figures["rows"] == [], "no series: no figure, never a made-up 0"


def test_exemplars_the_prometheus_cannot_give_leave_the_figures_and_say_why() -> None:
    def no_exemplars(path: str) -> tuple[int, str, bytes]:
        if path == "/api/v1/query_exemplars":
            return 404, "text/plain", b"404 page not found"
        return as_json(200, EMPTY[path])

    pytest.importorskip("markupsafe")
    with answering(no_exemplars) as url:
        context = PrometheusCost(url).cost_context("team", None)
    assert context["exemplars"] == [] and context["since"] == "24h"
    assert context["no_exemplars"].startswith(f"Prometheus at {url} gave no exemplars: {url}/api/v1/query_exemplars")


def test_the_points_drawn_are_bounded_to_the_costliest() -> None:
    """Prometheus keeps up to 100,000 exemplars: the chart draws the MOST_POINTS costliest and says so."""
    pytest.importorskip("markupsafe")
    from otel_agents.ui.prometheus import MOST_POINTS

    now = time.time()
    many = MOST_POINTS * 3
    exemplars = [
        {"labels": {"trace_id": f"{n:032x}"}, "value": str(n / 1000), "timestamp": now - many + n} for n in range(many)
    ]
    answer = {"status": "success", "data": [{"seriesLabels": {"__name__": "x"}, "exemplars": exemplars}]}

    def reply(path: str) -> tuple[int, str, bytes]:
        return as_json(200, answer if path == "/api/v1/query_exemplars" else EMPTY[path])

    with answering(reply) as url:
        context = PrometheusCost(url).cost_context("team", "1h")
    drawn = [point["trace_id"] for point in context["exemplars"]]
    assert drawn == [f"{n:032x}" for n in range(many - MOST_POINTS, many)], "the costliest, oldest first"
    assert context["exemplars_in_range"] == many
    assert str(context["run_cost_chart"]).count('class="exemplar"') == MOST_POINTS
    assert [row["trace_id"] for row in context["costliest"]] == drawn[::-1][:10]

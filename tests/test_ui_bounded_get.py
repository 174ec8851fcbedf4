"""A GET to Jaeger or Prometheus is bounded as a whole: a server that sends its headers and then
holds or dribbles its body, error answer or not, is given up on at the deadline, and an answer past
the size bound is refused; error answers come back with their status and the start of their body.

Each server here is held by an event the test sets when it is done, so no server thread outlives
its test."""

from __future__ import annotations

import pytest

from otel_agents._internal.explain.readers import server_url
from otel_agents.ui.bounded_get import Unanswered, get
from tests.support.local_http import holding_the_body


@pytest.mark.parametrize("status", [200, 500])
@pytest.mark.parametrize("then", ["hold", "dribble"])
def test_a_body_that_does_not_end_is_given_up_on_at_the_deadline(status: int, then: str) -> None:
    with holding_the_body(status, length=10_000_000, sent=b'{"data": ', dribble=then == "dribble") as url:
        with pytest.raises(Unanswered) as raised:
            get(f"{url}/api", timeout_s=0.5, max_bytes=32 * 2**20)

    assert raised.value.kind == "slow"


def test_an_answer_past_the_size_bound_is_refused() -> None:
    body = b"[" + b"1," * 5000 + b"1]"
    with holding_the_body(200, length=len(body), sent=body) as url:
        with pytest.raises(Unanswered) as raised:
            get(f"{url}/api", timeout_s=5, max_bytes=1000)

    assert raised.value.kind == "too_large"


def test_an_error_answer_comes_back_with_its_status_and_body() -> None:
    body = b'{"status": "error", "error": "bad query"}'
    with holding_the_body(422, length=len(body), sent=body) as url:
        answered = get(f"{url}/api", timeout_s=5, max_bytes=1000)

    assert (answered.status, answered.body) == (422, body)


def test_a_whole_answer_comes_back() -> None:
    body = b'{"status": "success"}'
    with holding_the_body(200, length=len(body), sent=body) as url:
        answered = get(f"{url}/api", timeout_s=5, max_bytes=1000)

    assert (answered.status, answered.body) == (200, body)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://127.0.0.1:9090", "expected the base URL"),
        ("http://127.0.0.1:9090/?q=1", "expected the base URL"),
        ("http://127.0.0.1:9090/#top", "expected the base URL"),
        ("http://user:secret@127.0.0.1:9090", "credentials"),
        ("http://127.0.0.1:port", "port"),
    ],
)
def test_a_server_url_that_is_not_a_base_url_is_refused_naming_the_option(url: str, said: str) -> None:
    with pytest.raises(ValueError, match="--prometheus") as raised:
        server_url(url, "--prometheus", "Prometheus")

    assert said in str(raised.value)
    assert "secret" not in str(raised.value)


def test_a_base_url_is_kept_without_its_trailing_slash() -> None:
    assert server_url(" http://127.0.0.1:16686/ ", "--jaeger", "Jaeger") == "http://127.0.0.1:16686"

"""The page's safety decisions on their own: which addresses count as this machine's loopback (the
one warning is printed for any other), and which Host headers name the server.

The tests bind 127.0.0.1 only, so a page listening beyond loopback is never started here: the
decision that prints its warning is pinned instead. (The Host check over HTTP: tests/test_ui.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

for _needed in ("starlette", "uvicorn", "jinja2"):  # the web extra (otel-agents[ui])
    pytest.importorskip(_needed, reason="the web extra (otel-agents[ui]) is not installed")

from otel_agents.ui.security import allowed_hosts, host_name  # noqa: E402
from otel_agents.ui.serve import exposure_warning, url_of  # noqa: E402

STORE = Path("/home/ana/.local/share/otel-agents/store")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_a_page_on_loopback_warns_of_nothing(host: str) -> None:
    assert exposure_warning(host, url_of(host.strip("[]"), 8765), STORE) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.5", "ana-laptop.example"])
def test_a_page_beyond_loopback_warns_that_anyone_who_reaches_it_reads_every_run(host: str) -> None:
    url = url_of(host, 8765)

    warning = exposure_warning(host, url, STORE)

    assert warning == (
        f"otel-agents ui: warning: listening on {host}, not on this machine's loopback: anyone who reaches "
        f"{url} reads every run stored in {STORE}"
    )


def test_on_loopback_the_bound_address_and_localhost_are_the_names_requests_may_give() -> None:
    assert allowed_hosts("127.0.0.1") == {"127.0.0.1", "localhost"}
    assert allowed_hosts("::1") == {"::1", "localhost"}


def test_beyond_loopback_only_the_bound_address_and_the_allowed_names() -> None:
    assert allowed_hosts("0.0.0.0", ["Ana-Laptop.example", " ", "[fd00::1]"]) == {
        "0.0.0.0",
        "ana-laptop.example",
        "fd00::1",
    }


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("127.0.0.1", "127.0.0.1"),
        ("LocalHost:80", "localhost"),
        ("[::1]:8765", "::1"),
        ("[::1]", "::1"),
        ("attacker.example:8765", "attacker.example"),
        ("127.0.0.1:", "127.0.0.1:"),
    ],
)
def test_a_host_header_names_its_host_with_or_without_the_port(header: str, name: str) -> None:
    assert host_name(header) == name

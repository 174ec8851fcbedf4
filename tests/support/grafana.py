"""The dashboard's variables and queries as Grafana's Prometheus datasource resolves them, against a
real Prometheus: `label_values(selector, label)` through /api/v1/label/<label>/values with the
selector as `match[]`, `label_names(metric)` through /api/v1/labels with
`{__name__=~".*metric.*"}`, each filtered by the variable's regex; a multi-value choice written as
`(a|b)` with regex characters escaped, `All` as the variable's `allValue`."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.deploy import DEPLOY
from tests.support.prometheus import Prometheus

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "autogen-team-runs.json"
BUILT_IN = {"$__rate_interval": "1m", "$__range": "5m", "$__interval": "15s"}
"""Grafana's own variables, as the existing panel checks substitute them."""
ALL = object()
"""A choice of every option: the variable's `allValue`."""


def dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def variables(board: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The dashboard's template variables by name, in the order Grafana resolves them."""
    return {v["name"]: v for v in board["templating"]["list"]}


def api(prometheus: Prometheus, path: str, params: Mapping[str, str]) -> list[str]:
    url = f"{prometheus.url}{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return [str(item) for item in body["data"]]


def regex_escape(value: str) -> str:
    """Grafana's `prometheusSpecialRegexEscape`: regex characters escaped inside a PromQL string."""
    doubled = value.replace("\\", "\\" * 4)
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), doubled)


def value_of(variable: Mapping[str, Any], choice: object) -> str:
    """What Grafana writes for `$name` in a query: `allValue` for All, `(a|b)` for a multi choice."""
    if choice is ALL:
        return str(variable["allValue"])
    if isinstance(choice, str):
        return choice if not variable.get("multi") else f"({regex_escape(choice)})"
    assert isinstance(choice, Sequence)
    return "(" + "|".join(regex_escape(str(v)) for v in choice) + ")"


def interpolate(text: str, values: Mapping[str, str]) -> str:
    """`$name` and Grafana's own `$__...` variables replaced; every `$` must be known."""
    for name, value in BUILT_IN.items():
        text = text.replace(name, value)
    return re.sub(r"\$(\w+)", lambda m: values[m.group(1)], text)


def options(prometheus: Prometheus, variable: Mapping[str, Any], values: Mapping[str, str]) -> list[str]:
    """The options a query variable lists, given the values of the variables before it."""
    query = interpolate(variable["query"]["query"], values)
    if found := re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)\s*", query):
        selector, label = found.groups()
        listed = api(prometheus, f"/api/v1/label/{label}/values", {"match[]": selector})
    elif found := re.fullmatch(r"label_names\((.+)\)\s*", query):
        listed = api(prometheus, "/api/v1/labels", {"match[]": f'{{__name__=~".*{found.group(1)}.*"}}'})
    else:
        raise AssertionError(f"variable {variable['name']}: a query Grafana's datasource does not take: {query}")
    pattern = variable.get("regex") or ""
    if pattern:
        body = re.fullmatch(r"/(.*)/([a-z]*)", pattern)
        assert body is not None, pattern
        compiled = re.compile(body.group(1), re.IGNORECASE if "i" in body.group(2) else 0)
        listed = [option for option in listed if compiled.search(option)]
    return sorted(set(listed))


def resolve(
    prometheus: Prometheus, board: Mapping[str, Any], choose: Mapping[str, object] | None = None
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(options of each variable, what each is written as in queries). A variable's choice is
    `choose[name]` (ALL, a value or a list of values), else every option it lists (for a single-value
    variable: its first, or empty when it lists none)."""
    listed: dict[str, list[str]] = {}
    values: dict[str, str] = {}
    for name, variable in variables(board).items():
        listed[name] = options(prometheus, variable, values)
        choice = (choose or {}).get(name)
        if choice is None:
            choice = listed[name] if variable.get("multi") else (listed[name][0] if listed[name] else "")
        values[name] = value_of(variable, choice)
    return listed, values


def panel_queries(board: Mapping[str, Any], values: Mapping[str, str]) -> list[tuple[str, str]]:
    """(panel title, query) of every panel target, variables substituted."""
    return [
        (panel["title"], interpolate(target["expr"], values))
        for panel in board["panels"]
        for target in panel["targets"]
    ]

"""The settings table (`params.PARAMS`) is the settings table of docs/configuration.md, and the one reader of the
environment."""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal.config import params
from otel_agents._internal.config.params import PARAMS, VARIABLES, Param
from tests.support.teams import writers_room

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(otel_agents.__file__).resolve().parent
FREE_TEXT = frozenset({"OTEL_SERVICE_NAME", "OTEL_AGENTS_STORE", "XDG_DATA_HOME", "HOME"})
"""Variables whose every non-blank text is a valid value (a name, a directory)."""


@dataclass(frozen=True)
class Row:
    setting: str
    arguments: frozenset[str]
    variables: frozenset[str]
    """Names, or prefixes ending in `*` (`OTEL_BSP_*`)."""
    defaults: frozenset[str]
    """The values the default cell states: `code`, numbers, true and false."""


PAGE = ROOT / "docs" / "configuration.md"


def page_rows(page: str) -> list[Row]:
    """The rows of the table under "## Settings"."""
    section = page.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or line.startswith(("| setting |", "|---")):
            continue
        setting, argument, variable, default = (cell.strip() for cell in line.strip().strip("|").split("|"))
        arguments = frozenset(c for c in _code(argument) if re.fullmatch(r"[a-z_]+", c))
        variables = frozenset(
            c.split("=")[0] for c in _code(variable) if re.fullmatch(r"[A-Z][A-Z0-9_]*\*?", c.split("=")[0])
        )
        plain = re.sub(r"`[^`]*`", " ", default)
        numbers = re.findall(r"(?<![\w.])\d+(?:\.\d+)*(?![\w.])", plain)
        words = re.findall(r"\b(?:true|false)\b", plain)
        rows.append(Row(setting, arguments, variables, frozenset([*_code(default), *numbers, *words])))
    return rows


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


def shown(default: object) -> str | None:
    """A default as the page writes it; None: not a value the page states."""
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    if isinstance(default, (str, int, float)):
        return str(default)
    return None


def _named(token: str, variable: str) -> bool:
    return variable.startswith(token[:-1]) if token.endswith("*") else variable == token


def differences(page: str, table: Sequence[Param[Any]]) -> list[str]:
    """Where the page's settings table and `table` disagree (empty: they agree)."""
    rows = {row.setting: row for row in page_rows(page)}
    found: list[str] = []
    settings = {param.setting for param in table}
    found += [f"docs row {s!r} has no setting in the table" for s in sorted(rows.keys() - settings)]
    found += [f"table setting {s!r} has no docs row" for s in sorted(settings - rows.keys())]
    every_variable = {name for param in table for name in param.variables}
    for setting in sorted(settings & rows.keys()):
        row, params_of_row = rows[setting], [p for p in table if p.setting == setting]
        arguments = {p.argument.split(".")[0] for p in params_of_row if p.argument}
        if arguments != row.arguments:
            found.append(f"{setting}: docs arguments {sorted(row.arguments)}, table {sorted(arguments)}")
        for name in sorted({n for p in params_of_row for n in p.variables}):
            if not any(_named(token, name) for token in row.variables):
                found.append(f"{setting}: {name} is in the table, not in the docs")
        for token in sorted(row.variables):
            if not any(_named(token, name) for name in every_variable):
                found.append(f"{setting}: {token} is in the docs, not in the table")
        defaults = {text for p in params_of_row if (text := shown(p.default)) is not None}
        for text in sorted(defaults - row.defaults):
            found.append(f"{setting}: default {text} is in the table, not in the docs")
        for text in sorted(row.defaults - defaults):
            found.append(f"{setting}: default {text} is in the docs, not in the table")
    return found


def test_the_docs_settings_table_is_the_settings_table() -> None:
    assert differences(PAGE.read_text(encoding="utf-8"), PARAMS) == []


def test_a_setting_on_one_side_only_is_found() -> None:
    page = PAGE.read_text(encoding="utf-8")
    extra_row = "| warp drive | `warp` | `OTEL_AGENTS_WARP` | off |\n"
    with_row = page.replace("| loop thresholds |", extra_row + "| loop thresholds |", 1)
    assert "docs row 'warp drive' has no setting in the table" in differences(with_row, PARAMS)

    extra_variable = replace(params.STORE_MAX_MB, variables=("OTEL_AGENTS_STORE_MAX_FILES",))
    assert "embedded store: OTEL_AGENTS_STORE_MAX_FILES is in the table, not in the docs" in differences(
        page, (*PARAMS, extra_variable)
    )
    extra_argument = replace(params.REDACT, argument="scrub")
    assert any("docs arguments" in d for d in differences(page, (*PARAMS, extra_argument)))
    new_default = replace(params.CONTENT_MAX_CHARS, default=8192)
    assert "content size: default 8192 is in the table, not in the docs" in differences(
        page, [new_default if p is params.CONTENT_MAX_CHARS else p for p in PARAMS]
    )
    renamed = page.replace("`OTEL_AGENTS_PRICES`", "`OTEL_AGENTS_PRICE_FILE`", 1)
    assert "prices: OTEL_AGENTS_PRICE_FILE is in the docs, not in the table" in differences(renamed, PARAMS)


def test_every_entry_says_what_it_takes() -> None:
    for param in PARAMS:
        assert param.kind, param
        assert param.argument or param.variables, param
        assert (param.parse is not None) == bool(param.variables), param
    assert FREE_TEXT <= VARIABLES


@pytest.mark.parametrize("variable", sorted(VARIABLES - FREE_TEXT))
async def test_every_variable_is_validated_at_configure(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    """Changed 2026-12-04 (CHANGELOG): a bad variable of ours (`OTEL_AGENTS_*`) is no longer refused
    by `configure()`. As the OpenTelemetry specification asks of environment variables, it is one
    warning naming the variable, the value and the default used, and the run is traced; the CLI's
    strict read refuses it as `configure()` did. A standard one, which the SDK reads too, is refused
    as before."""
    monkeypatch.setenv(variable, "not valid!")
    if not variable.startswith("OTEL_AGENTS_"):
        with pytest.raises(otel_agents.ConfigError) as raised:
            otel_agents.configure(set_global=False, store=False).shutdown()
        assert variable in str(raised.value)
        return
    with pytest.raises(otel_agents.ConfigError) as raised:
        strict = params.environment(strict=True)
        for param in PARAMS:
            param.from_environ(strict)
    assert variable in str(raised.value)
    exporter = InMemorySpanExporter()
    caplog.set_level(logging.WARNING)
    telemetry = otel_agents.configure(set_global=False, store=False, span_exporter=exporter)
    ours = [r.getMessage() for r in caplog.records if variable in r.getMessage()]
    assert len(ours) == 1, ours
    assert (" is ignored: the default is used" in ours[0]) or (" is ignored: it is treated as unset" in ours[0])
    assert "'not valid!'" in ours[0]
    await writers_room(max_messages=2).run(task="go")
    assert telemetry.force_flush()
    assert [s.name for s in exporter.get_finished_spans() if s.parent is None] == ["invoke_workflow writers-room"]
    telemetry.shutdown()


def test_the_snapshot_holds_the_table_variables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_AGENTS_RUNTIME_SPANS", "nested")
    monkeypatch.setenv("OTEL_AGENTS_NOT_A_SETTING", "1")
    snapshot = params.environment()
    assert snapshot["OTEL_AGENTS_RUNTIME_SPANS"] == "nested"
    assert set(snapshot) <= VARIABLES


def _environment_readers(path: Path) -> set[str]:
    """The functions of a module that touch `os.environ`, `os.getenv` and the like (`<module>` at top level)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
    os_names = {"os"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "os" and alias.asname
    }
    readers: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        touches = (
            isinstance(node, ast.Attribute)
            and node.attr in names
            and isinstance(node.value, ast.Name)
            and node.value.id in os_names
        ) or (isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in names for a in node.names))
        if touches:
            readers.add(function)
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return readers


def test_one_function_reads_the_environment() -> None:
    readers = {
        f"{path.relative_to(PACKAGE.parent).as_posix()}:{function}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for function in _environment_readers(path)
    }
    # and one writes it: AutoGen's own switch for its runtime tracing, where otel-agents cannot start
    assert readers == {
        "otel_agents/_internal/config/params.py:environment",
        "otel_agents/_internal/config/params.py:set_variable",
    }

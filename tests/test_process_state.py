"""Process state: every module-level name of otel-agents that can change is declared in
`process_state`, and `process_state.reset()` forgets what runs left behind."""

from __future__ import annotations

import ast
import contextvars
import dataclasses
import enum
import importlib
import importlib.util
import inspect
import logging
import pkgutil
import re
import signal
import sys
import threading
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from autogen_agentchat.teams import BaseGroupChat
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_agents
from otel_agents._internal import process_state
from otel_agents._internal.sigterm import SigtermHandler
from tests.support.teams import writers_room

pytestmark = [pytest.mark.lowest_versions, pytest.mark.every_python]

_LOCKS = (type(threading.Lock()), type(threading.RLock()))
UNCHANGING: tuple[type, ...] = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    tuple,
    frozenset,
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    types.MappingProxyType,
    re.Pattern,
    logging.Logger,
    typing.TypeVar,
    *_LOCKS,
)
"""Values that do not change (or guard, not hold, state: locks)."""
PER_CONTEXT: tuple[type, ...] = (contextvars.ContextVar, threading.local)
"""Values that hold state per context or per thread, released with it: not process state."""


_FILTER_FIELDS = frozenset(vars(logging.Filter()))


def unchanging(value: object) -> bool:
    """Whether `value` cannot change, holds state per context or thread only, or guards state."""
    if isinstance(value, UNCHANGING + PER_CONTEXT) or type(value) is object:  # `object()`: a sentinel
        return True
    if isinstance(value, logging.Filter):  # a rule in code only, with no field of its own
        return vars(value).keys() <= _FILTER_FIELDS
    if typing.get_origin(value) is not None or isinstance(value, types.UnionType):  # a type alias
        return True
    return dataclasses.is_dataclass(value) and not isinstance(value, type) and value.__dataclass_params__.frozen  # type: ignore[attr-defined]


def _top_level(body: list[ast.stmt]) -> typing.Iterator[ast.stmt]:
    """The statements run at import: those of the module and of its `if`, `try`, `with` and `for`
    blocks, not those of its functions and classes."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _top_level(getattr(node, field, []))


def module_level_names(source: str) -> tuple[set[str], set[str]]:
    """(the names a module assigns at its top level, the names its functions rebind with `global`)."""
    tree = ast.parse(source)
    assigned: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            assigned.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    rebound = {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
    return assigned, rebound


def undeclared_state(module: types.ModuleType, declared: set[str]) -> list[str]:
    """The module-level names of `module` that can change and are not in `declared`."""
    assigned, rebound = module_level_names(inspect.getsource(module))
    found = []
    for name in sorted(assigned | rebound):
        if name in declared or (name.startswith("__") and name.endswith("__")):
            continue
        value = getattr(module, name, None)
        if name in rebound or not unchanging(value):
            found.append(f"{module.__name__}.{name} ({type(value).__name__})")
    return found


def every_module() -> list[types.ModuleType]:
    """Every module of the package; the web page's (`otel_agents.ui`) only where its extra is
    installed (not in the lowest versions' environment: the main one checks them)."""
    web_extra = importlib.util.find_spec("jinja2") is not None and importlib.util.find_spec("starlette") is not None
    modules = [otel_agents]
    for info in pkgutil.walk_packages(otel_agents.__path__, "otel_agents."):
        if info.name.endswith("__main__"):
            continue  # running it is the CLI
        if info.name.startswith("otel_agents.ui.") and not web_extra:
            continue
        modules.append(importlib.import_module(info.name))
    return modules


def declared_by(module: str) -> set[str]:
    return {name for held in process_state.held() if held.module == module for name in held.names}


def test_every_module_level_name_that_can_change_is_declared() -> None:
    modules = every_module()
    undeclared = [
        found
        for module in modules
        if module.__name__ != process_state.__name__  # the list itself
        for found in undeclared_state(module, declared_by(module.__name__))
    ]
    assert undeclared == [], "declare each with process_state.hold() (CONTRIBUTING: Process state)"


def test_a_module_keeping_a_dict_without_declaring_it_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "keeps_a_cache.py").write_text(
        "import threading\n"
        "from typing import Final\n"
        "LIMIT: Final = 8\n"
        "_lock = threading.Lock()\n"
        "import logging\n"
        "_cache: dict[str, str] = {}\n"
        "_count = 0\n"
        "try:\n"
        "    _seen = set()\n"
        "except ImportError:\n"
        "    pass\n"
        "class _Once(logging.Filter):\n"
        "    def __init__(self) -> None:\n"
        "        super().__init__()\n"
        "        self.seen = False\n"
        "_once = _Once()\n"
        "_quiet = logging.Filter()\n"
        "def count() -> None:\n"
        "    global _count\n"
        "    _count += 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("keeps_a_cache")
    try:
        assert undeclared_state(module, set()) == [
            "keeps_a_cache._cache (dict)",
            "keeps_a_cache._count (int)",
            "keeps_a_cache._once (_Once)",
            "keeps_a_cache._seen (set)",
        ], "a filter with a field of its own keeps state; one without does not"
        assert undeclared_state(module, {"_cache", "_count", "_once", "_seen"}) == []
    finally:
        sys.modules.pop("keeps_a_cache", None)


def test_every_declared_name_is_there() -> None:
    every_module()
    missing = [
        f"{held.module}.{name}"
        for held in process_state.held()
        for name in held.names
        if not hasattr(sys.modules[held.module], name)
    ]
    assert missing == []


_PYDANTIC_CONFIG = "model_config"


def test_no_class_of_ours_keeps_a_mutable_table_at_class_level() -> None:
    """Class-level dicts, lists and sets are state shared by every instance, out of the modules'
    sight: keep such state in a module and declare it."""
    found = [
        f"{module.__name__}.{cls.__name__}.{name}"
        for module in every_module()
        for cls in vars(module).values()
        if isinstance(cls, type) and cls.__module__ == module.__name__
        if not issubclass(cls, enum.Enum)  # its member tables are Python's, fixed when it is made
        for name, value in vars(cls).items()
        if isinstance(value, (dict, list, set, bytearray)) and name != _PYDANTIC_CONFIG
        if not (name.startswith("__") and name.endswith("__"))
    ]
    assert found == []


def test_each_holding_module_is_in_the_contributors_table() -> None:
    every_module()
    contributing = (Path(__file__).parents[1] / "CONTRIBUTING.md").read_text()
    table = contributing.split("## Process state", 1)[1].split("\n## ", 1)[0]
    modules = {
        held.module.removeprefix("otel_agents._internal.").replace(".", "/") + ".py" for held in process_state.held()
    }
    assert sorted(m for m in modules if f"`{m}`" not in table) == []


async def test_reset_forgets_what_a_run_left_behind() -> None:
    original_run_stream = BaseGroupChat.__dict__["run_stream"]
    from otel_agents._internal.autogen import wrapping

    exporter = InMemorySpanExporter()
    otel_agents.configure(span_exporter=exporter, store=False, runtime_spans="nested")
    team = writers_room(max_messages=3)
    await team.run(task="write")

    holding = {held.module.rsplit(".", 1)[-1] for held in process_state.held() if held.size()}
    assert {
        "telemetry",
        "globals",
        "registry",
        "workflow",
        "wrapping",
        "patches",
        "instrumentor",
        "attribution",
    } <= holding
    if threading.current_thread() is threading.main_thread():
        assert "sigterm" in holding
    replaced = [(owner, name, owner.__dict__[name]) for owner, name in wrapping.replaced()]
    assert len(replaced) > 10

    process_state.reset()

    left = {f"{held.module}{held.names}": held.size() for held in process_state.held() if held.forget and held.size()}
    assert left == {}
    assert BaseGroupChat.__dict__["run_stream"] is original_run_stream, "AutoGen is as found"
    assert [f"{owner.__name__}.{name}" for owner, name, ours in replaced if owner.__dict__.get(name) is ours] == [], (
        "every wrapper of ours is gone"
    )
    assert not isinstance(signal.getsignal(signal.SIGTERM), SigtermHandler)
    assert not otel_agents.AutoGenInstrumentor().is_instrumented_by_opentelemetry
    assert any(span.name.startswith("invoke_workflow ") for span in exporter.get_finished_spans()), (
        "the pipeline was shut down, delivering what it held"
    )


def test_reset_forgets_every_piece_when_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    forgotten: list[str] = []

    def fails() -> None:
        forgotten.append("fails")
        raise RuntimeError("cannot forget")

    pieces: list[Any] = [
        process_state.Held("first", ("a",), "", lambda: 0, lambda: forgotten.append("first")),
        process_state.Held("second", ("b",), "", lambda: 0, fails),
        process_state.Held("third", ("c",), "", lambda: 0, lambda: forgotten.append("third")),
    ]
    with monkeypatch.context() as patched:
        patched.setattr(process_state, "_held", pieces)
        with pytest.raises(RuntimeError, match="cannot forget"):
            process_state.reset()
    assert forgotten == ["third", "fails", "first"], "the latest declared first, and every one tried"

"""What otel-agents wraps in AutoGen, installed by `configure()` and again by each tap (cheap).

Model clients' `create`/`create_stream` (`model_clients`), tools (`tools`), the parsed-link memory
(`private`), and here a span for a team nested in a traced run. AutoGen 0.7.5 makes no turn
span when a team is a participant of another team (its `ChatAgentContainer` calls the inner team's
`run_stream`). `BaseGroupChat.run_stream` (public) is wrapped so that a call made inside a traced
run gets an `invoke_workflow {inner team}` span under that run's workflow, with the inner team's
turns under it. Outside a traced run it returns AutoGen's own stream untouched.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from otel_agents._internal.autogen.wrapping import MARK, mark
from otel_agents._internal.run.follow import follow
from otel_agents._internal.run.workflow import WorkflowSpan
from otel_agents._internal.tracing.registry import REGISTRY

_lock = threading.Lock()


def install() -> None:
    """Wrap `BaseGroupChat.run_stream` once per process, and every model client and tool class so far."""
    from autogen_agentchat.teams import BaseGroupChat

    # imported here, not with the package: `import otel_agents` stays cheap (util-genai, AutoGen)
    from otel_agents._internal.autogen import model_clients, private, tools

    model_clients.install()
    tools.install()
    private.install_link_cache()
    with _lock:
        original = BaseGroupChat.run_stream
        if getattr(original, MARK, False):
            return
        BaseGroupChat.run_stream = mark(_wrap(original))  # type: ignore[method-assign]


def _wrap(original: Callable[..., AsyncGenerator[Any, None]]) -> Callable[..., AsyncGenerator[Any, None]]:
    @functools.wraps(original)
    def run_stream(self: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        stream = original(self, *args, **kwargs)
        try:
            cause = REGISTRY.lookup(trace.get_current_span().get_span_context())
            if cause is None or cause.run.ended:
                return stream
            parent = trace.set_span_in_context(trace.NonRecordingSpan(cause.workflow), otel_context.get_current())
            name = str(self.name)
        except Exception:  # never break the run
            return stream
        return follow(stream, lambda: WorkflowSpan(cause.run, name, parent, within=cause.trail))

    return run_stream

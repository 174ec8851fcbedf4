"""`LoopLimits`: the loop rules' thresholds as the app gives them, resolved against their variables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_agents._internal.config.params import LOOP_THRESHOLDS, environment
from otel_agents._internal.genai.loops import ResolvedLimits


@dataclass(frozen=True)
class LoopLimits:
    """Thresholds of the loop rules: each argument, else its `OTEL_AGENTS_*` variable, else off.

    `max_repeats` defaults to 3. A bad value raises `ConfigError` naming the argument or variable.
    The variables, checks and defaults are `params.LOOP_THRESHOLDS`.
    """

    max_messages: int | None = None
    max_repeats: int | None = None
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    time_budget_s: float | None = None

    def __post_init__(self) -> None:
        self.resolved()  # validate arguments and variables now

    def resolved(self, environ: Mapping[str, str] | None = None) -> ResolvedLimits:
        """Each threshold: the argument, else its variable, else its default; variables validated even
        when the argument wins. `environ`: default, a snapshot of the process's (`params.environment()`)."""
        env = environment() if environ is None else environ
        values: dict[str, Any] = {
            name: param.resolve(getattr(self, name), env) for name, param in LOOP_THRESHOLDS.items()
        }
        return ResolvedLimits(**values)

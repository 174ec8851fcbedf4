"""`LoopGuard`: an AutoGen termination condition that stops a looping team gracefully."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from autogen_agentchat.base import TerminatedException, TerminationCondition
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage, StopMessage
from autogen_core import Component
from opentelemetry import trace
from pydantic import BaseModel

from otel_agents._internal.config.loop_limits import LoopLimits
from otel_agents._internal.genai.loops import LoopRules, ResolvedLimits
from otel_agents._internal.tracing.globals import configured_loop_limits
from otel_agents._internal.tracing.registry import REGISTRY


class LoopGuardConfig(BaseModel):
    max_messages: int | None = None
    max_repeats: int | None = None
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    time_budget_s: float | None = None
    follows_configure: bool = False
    """Made without limits: thresholds from `configure()` (a config without this field: from its own)."""


class LoopGuard(TerminationCondition, Component[LoopGuardConfig]):
    """Stops the team after the message that broke a loop rule: `team_condition | LoopGuard()`.

    The stop reason names the rule and the figures ("loop guard: repeat: critic said the same
    thing 3 times"), the run's stop kind is `loop_guard`, and the team stays reusable. Token and
    cost budgets count every model call of the run when the run is tapped (speaker selection
    included), else the messages' usage.

    Thresholds: `limits` when given (each argument, else its variable); without it, those of the
    latest `configure(loop_limits=...)` as they are when a run's first message comes, so a guard
    made before `configure()` follows it; with no `configure()`, the variables (read once).
    """

    component_config_schema = LoopGuardConfig
    component_provider_override = "otel_agents.LoopGuard"

    def __init__(self, limits: LoopLimits | None = None) -> None:
        self._limits = limits
        # the variables read once, now: a bad one raises here, and reset() never raises
        self._resolved = (limits if limits is not None else LoopLimits()).resolved()
        self._rules: LoopRules | None = None  # made at a run's first message
        self._stopped = False

    def _thresholds(self) -> ResolvedLimits:
        if self._limits is None:
            configured = configured_loop_limits()
            if configured is not None:
                return configured
        return self._resolved

    @property
    def terminated(self) -> bool:
        return self._stopped

    async def __call__(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> StopMessage | None:
        if self._stopped:
            raise TerminatedException("The loop guard has already stopped this run")
        if self._rules is None:
            self._rules = LoopRules(self._thresholds())
        node = REGISTRY.lookup(trace.get_current_span().get_span_context())
        tokens, cost = node.run.totals.for_budgets() if node is not None else (None, None)
        unknown = node.run.totals.unknown_calls if node is not None else 0
        for message in messages:
            hits = self._rules.observe(message, run_tokens=tokens, run_cost=cost, unknown_calls=unknown)
            if hits:
                self._stopped = True
                return StopMessage(content=hits[0].reason, source="LoopGuard")
        return None

    async def reset(self) -> None:
        self._rules = None
        self._stopped = False

    def _to_config(self) -> LoopGuardConfig:
        limits = self._limits if self._limits is not None else LoopLimits()
        return LoopGuardConfig(
            max_messages=limits.max_messages,
            max_repeats=limits.max_repeats,
            token_budget=limits.token_budget,
            cost_budget_usd=limits.cost_budget_usd,
            time_budget_s=limits.time_budget_s,
            follows_configure=self._limits is None,
        )

    @classmethod
    def _from_config(cls, config: LoopGuardConfig) -> Self:
        given = config.model_dump(exclude={"follows_configure"})
        if config.follows_configure and all(value is None for value in given.values()):
            return cls(None)
        return cls(LoopLimits(**given))  # thresholds given win, as in the constructor

    def __repr__(self) -> str:
        return f"LoopGuard({self._limits!r})"

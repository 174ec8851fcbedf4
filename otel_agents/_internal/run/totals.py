"""Token and cost totals of a run, counted once: from its model calls."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunTotals:
    """What a run's model calls used. `cost_usd` is None once any call's model had no price."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    agent_models: dict[str, str] = field(default_factory=dict)
    """The model each agent called last: it prices that agent's message usage."""

    def add_call(
        self,
        *,
        agent: str | None,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None,
    ) -> None:
        self.calls += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost_usd = None if cost_usd is None or self.cost_usd is None else self.cost_usd + cost_usd
        if agent is not None and model is not None:
            self.agent_models[agent] = model

    def for_budgets(self) -> tuple[int | None, float | None]:
        """(tokens, cost) for the loop rules' budgets; (None, None) before any traced model call."""
        if not self.calls:
            return None, None
        return self.input_tokens + self.output_tokens, self.cost_usd

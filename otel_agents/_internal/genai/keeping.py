"""Which runs are always kept whole when runs are sampled (`OTEL_AGENTS_KEEP_RUNS`): the rules, and
the `RunSummary` they (and a rule of your own) read.

A rule is one of `error` (stop kind `error`), `loop` (stop kind `loop_guard`, or a loop the loop
rules detected in the run), `cancelled`, `unknown_usage` (a model call reported no usage),
`cost>USD`, `duration>SECONDS`, `tokens>N`. The first rule that matches, in the order the list
gives them, names why a run was kept (`otel_agents.sample.kept_because`); a callable of yours
(`configure(keep_runs=...)`) comes after them, as `rule`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    """What a run did, as the keep rules read it when the run ends (before its span ends)."""

    team: str
    """The team's (or agent's) name: `gen_ai.workflow.name`."""
    stop_kind: str
    stop_reason: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    """None: a call's model had no price, or a call reported no usage."""
    unknown_calls: int
    """Model calls that reported no usage."""
    duration_s: float
    turns: int
    repeats: int
    loop_detected: bool
    """A loop rule broke in the run (`otel_agents.loop_detected` events), or LoopGuard stopped it."""
    user_id: str | None = None
    session_id: str | None = None
    conversation_id: str | None = None
    attributes: Mapping[str, str | bool | int | float] = field(default_factory=dict)
    """What `run_attributes(attributes=...)` gave the run."""
    outcomes: Mapping[str, str] = field(default_factory=dict)
    """Outcome labels recorded before the keep decision, by outcome name."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


RULE_NAMES: Final = ("error", "loop", "cancelled", "unknown_usage")
"""The rules without a threshold."""
THRESHOLD_RULES: Final[Mapping[str, str]] = MappingProxyType({"cost": "USD", "duration": "seconds", "tokens": "tokens"})
"""The rules with a threshold (`cost>0.5`), and what the threshold counts."""
DEFAULT_KEEP_RUNS: Final = "error,loop,cost>1,duration>300"
CALLABLE_RULE: Final = "rule"
"""What `kept_because` says of a run your callable kept."""


@dataclass(frozen=True)
class KeepRule:
    name: str
    threshold: float | None = None

    def matches(self, run: RunSummary) -> bool:
        if self.name == "error":
            return run.stop_kind == "error"
        if self.name == "loop":
            return run.stop_kind == "loop_guard" or run.loop_detected
        if self.name == "cancelled":
            return run.stop_kind == "cancelled"
        if self.name == "unknown_usage":
            return run.unknown_calls > 0
        limit = self.threshold if self.threshold is not None else math.inf
        if self.name == "cost":
            return run.cost_usd is not None and run.cost_usd > limit
        if self.name == "duration":
            return run.duration_s > limit
        return run.tokens > limit  # tokens

    def __str__(self) -> str:
        return self.name if self.threshold is None else f"{self.name}>{self.threshold:g}"


def parse_rule(source: str, text: str) -> KeepRule:
    """One rule of a keep list, or a ValueError saying what is wrong with it (the caller names the
    setting)."""
    rule = text.strip().lower()
    if rule in RULE_NAMES:
        return KeepRule(rule)
    name, _, threshold = rule.partition(">")
    name = name.strip()
    if name in THRESHOLD_RULES:
        if not threshold.strip():
            raise ValueError(f"{text.strip()!r} needs a number after '>' ({THRESHOLD_RULES[name]})")
        try:
            value = float(threshold)
        except ValueError:
            raise ValueError(f"{text.strip()!r}: {threshold.strip()!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{text.strip()!r}: expected a finite number of at least 0")
        return KeepRule(name, value)
    known = ", ".join([*RULE_NAMES, *(f"{n}>N" for n in THRESHOLD_RULES)])
    raise ValueError(f"{text.strip()!r} is not a rule (expected {known})")


RunRule = Callable[[RunSummary], object]


@dataclass(frozen=True)
class KeepRules:
    """The rules a run is kept by, in order, and the callables after them."""

    rules: tuple[KeepRule, ...] = ()
    callables: tuple[RunRule, ...] = ()

    def kept_because(self, run: RunSummary, *, warn: Callable[[str], None]) -> str | None:
        """The first rule the run matches (its name), `rule` for a callable that kept it, else None.
        A callable that raises keeps the run (`warn` is told, once a callable)."""
        for rule in self.rules:
            if rule.matches(run):
                return rule.name
        for keep in self.callables:
            try:
                if keep(run):
                    return CALLABLE_RULE
            except Exception as error:  # never into the run: the run is kept, and you are told
                warn(f"otel-agents: the keep_runs rule {_name(keep)} raised {type(error).__name__}; the run is kept")
                return CALLABLE_RULE
        return None

    def __str__(self) -> str:
        return ",".join([*(str(rule) for rule in self.rules), *(_name(keep) for keep in self.callables)])


def _name(keep: RunRule) -> str:
    return getattr(keep, "__qualname__", None) or type(keep).__name__

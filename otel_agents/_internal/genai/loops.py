"""Runaway loops: the rules, shared by the tap's detector and the `LoopGuard` termination condition.

Rules (a threshold left unset turns its rule off; repeats default to 3):

- `messages`: the run has streamed `max_messages` messages;
- `repeat`: one source said the same thing `max_repeats` times (so an A-B-A-B cycle with nothing
  new is caught when A, then B, have repeated themselves that often);
- `tool_storm`: the same tool was called with the same arguments `max_repeats` times;
- `tokens`: the run used `token_budget` tokens;
- `cost`: the run cost `cost_budget_usd`;
- `time`: the run has lasted `time_budget_s` seconds.

Content is hashed in memory to compare it, and never exported: figures name sources and counts only.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from otel_agents._internal.autogen import conventions as ag

_DISTINCT_KEPT: Final = 2048
"""Distinct (source, text) pairs, and (tool, arguments) pairs, the rules remember per run: bounded
memory on long runs."""


def _counted(counter: Counter[tuple[str, bytes]], key: tuple[str, bytes]) -> int:
    """Count `key` once more; a counter full of distinct keys starts afresh (a very long run of
    all-different messages or calls). How many times `key` has now been counted."""
    if key not in counter and len(counter) >= _DISTINCT_KEPT:
        counter.clear()
    counter[key] += 1
    return counter[key]


@dataclass(frozen=True)
class ResolvedLimits:
    max_messages: int | None
    max_repeats: int
    token_budget: int | None
    cost_budget_usd: float | None
    time_budget_s: float | None


@dataclass(frozen=True)
class LoopHit:
    rule: str
    detail: str
    figures: Mapping[str, int | float]

    @property
    def reason(self) -> str:
        return f"loop guard: {self.rule}: {self.detail}"


logger = logging.getLogger(__name__)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).digest()


def _text_of(message: Any) -> str | None:
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    to_text = getattr(message, "to_text", None)
    return str(to_text()) if callable(to_text) else None


@dataclass
class LoopRules:
    """The rules' state for one run. Feed every streamed message to `observe`."""

    limits: ResolvedLimits
    started: float = field(default_factory=time.monotonic)
    messages: int = 0
    tokens: int = 0
    said: Counter[tuple[str, bytes]] = field(default_factory=Counter)
    tool_calls: Counter[tuple[str, bytes]] = field(default_factory=Counter)
    broken: set[str] = field(default_factory=set)
    told_blind: bool = False
    """Whether the budgets have said they cannot see the calls that reported no usage."""

    def observe(
        self, message: Any, *, run_tokens: int | None = None, run_cost: float | None = None, unknown_calls: int = 0
    ) -> list[LoopHit]:
        """The rules this message broke (each rule at most once per run). `unknown_calls`: the
        run's model calls that reported no usage, which the token and cost budgets cannot count
        (said once per run)."""
        if unknown_calls and not self.told_blind:
            self._tell_blind()
        kind = type(message).__name__
        if kind in (ag.STREAM_CHUNK_CLASS, ag.TASK_RESULT_CLASS):
            return []
        self.messages += 1
        usage = getattr(message, "models_usage", None)
        if usage is not None:
            self.tokens += usage.prompt_tokens + usage.completion_tokens
        limits = self.limits
        hits: list[LoopHit] = []
        if limits.max_messages is not None and self.messages >= limits.max_messages:
            hits.append(_hit("messages", f"{self.messages} messages", self.messages, limits.max_messages))
        if kind == ag.TOOL_CALL_REQUEST_CLASS:
            hits.extend(self._tool_storm(getattr(message, "content", None) or []))
        else:
            text = _text_of(message)
            source = str(getattr(message, "source", "unknown"))
            if text is not None and source != ag.TASK_MESSAGE_SOURCE:
                hits.extend(self._repeat(source, _digest(text)))
        hits.extend(self._budgets(run_tokens if run_tokens is not None else self.tokens, run_cost))
        if not hits:  # the usual answer
            return hits
        new = [hit for hit in _first_per_rule(hits) if hit.rule not in self.broken]
        self.broken.update(hit.rule for hit in new)
        return new

    def _tell_blind(self) -> None:
        limits = self.limits
        if limits.token_budget is None and limits.cost_budget_usd is None:
            return
        self.told_blind = True
        logger.warning(
            "otel-agents: a model call of this run reported no usage (a stream without usage; "
            "OTEL_AGENTS_STREAM_USAGE=request asks AutoGen's OpenAI clients for it): the token and cost "
            "budgets cannot count it"
        )

    def _tool_storm(self, calls: Sequence[Any]) -> list[LoopHit]:
        hits = []
        for call in calls:
            name = str(getattr(call, "name", ""))
            count = _counted(self.tool_calls, (name, _digest(str(getattr(call, "arguments", "")))))
            if count >= self.limits.max_repeats:
                detail = f"{name} called with the same arguments {count} times"
                hits.append(_hit("tool_storm", detail, count, self.limits.max_repeats))
        return hits

    def _repeat(self, source: str, digest: bytes) -> list[LoopHit]:
        """Counts every earlier occurrence, not only the last: an A-B-A-B cycle with nothing new
        makes each of A and B repeat themselves, so it is caught here too."""
        count, limit = _counted(self.said, (source, digest)), self.limits.max_repeats
        return [_hit("repeat", f"{source} said the same thing {count} times", count, limit)] if count >= limit else []

    def _budgets(self, tokens: int, cost: float | None) -> list[LoopHit]:
        limits, hits = self.limits, []
        if limits.token_budget is not None and tokens >= limits.token_budget:
            hits.append(_hit("tokens", f"{tokens} tokens used", tokens, limits.token_budget))
        if limits.cost_budget_usd is not None and cost is not None and cost >= limits.cost_budget_usd:
            hits.append(_hit("cost", f"${cost:.4f} spent", cost, limits.cost_budget_usd))
        elapsed = time.monotonic() - self.started
        if limits.time_budget_s is not None and elapsed >= limits.time_budget_s:
            hits.append(_hit("time", f"{elapsed:.1f} s elapsed", round(elapsed, 3), limits.time_budget_s))
        return hits


def _hit(rule: str, detail: str, count: float, limit: float) -> LoopHit:
    return LoopHit(rule, detail, {"count": count, "limit": limit})


def _first_per_rule(hits: Sequence[LoopHit]) -> list[LoopHit]:
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.rule not in seen:
            seen.add(hit.rule)
            out.append(hit)
    return out

"""The state of one run: what it is, how its spans are recorded, and its totals, in one place.

A `Run` is made when a run starts (`tap`, `run_stream`) and ended when its run span ends. Model
calls find it once, at their start, through the span registry (`tracing.registry`), and report to
it with `add_call`: tokens and cost are counted there and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from opentelemetry import trace

from otel_agents._internal.genai.content import ContentPolicy

if TYPE_CHECKING:
    from otel_agents._internal.config.settings import RuntimeSpans
    from otel_agents._internal.genai.loops import LoopRules
    from otel_agents._internal.genai.metrics import Instruments
    from otel_agents._internal.genai.prices import PriceTable
    from otel_agents._internal.recording import Recording


_NO_CONTENT: Final = ContentPolicy()
PRODUCED_KEPT: Final = 256
"""Items a run remembers the turn of, between a turn yielding them and the stream delivering them
(the oldest forgotten first: an item delivered that late goes under the run)."""


@dataclass
class RunTotals:
    """What a run's model calls used. `cost_usd` is None once any call's model had no price."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    unknown_calls: int = 0
    """Calls whose client reported no usage: the token totals are a lower bound, and there is no cost."""

    def for_budgets(self) -> tuple[int | None, float | None]:
        """(tokens, cost) for the loop rules' budgets; (None, None) before any traced model call."""
        if not self.calls:
            return None, None
        return self.input_tokens + self.output_tokens, self.cost_usd


@dataclass(eq=False)
class Run:
    """One run (or a trace followed from another process): where its spans go and what it used."""

    provider: trace.TracerProvider
    """The SDK provider that records the run's spans."""
    runtime_spans: RuntimeSpans
    workflow: str = "unknown"
    loops: LoopRules | None = None
    totals: RunTotals = field(default_factory=RunTotals)
    ended: bool = False
    recording: Recording | None = None
    """What the run records with, from the pipeline it was started with (None: a trace followed
    from elsewhere)."""
    conversation_id: str | None = None
    """`gen_ai.conversation.id`: on the run span, its turns and its model calls."""
    attributes: Mapping[str, str | bool | int | float] = field(default_factory=dict)
    """What `run_attributes(attributes=...)` gave the run (candidates for metric labels)."""
    produced: dict[int, tuple[object, trace.SpanContext, int]] = field(default_factory=dict)
    """id(item) -> (the item, the turn that yielded it, when): read once as its message span is made."""
    turns: int = 0
    """Agent turns placed in the run (a nested team's included)."""
    first_inputs: dict[int, int | None] = field(default_factory=dict)
    """Turn span id -> the input tokens of its first model call that reported usage (None until
    one does), in the order the turns started (the context each turn started from), as explain
    reads them."""
    said: set[tuple[str, str]] = field(default_factory=set)
    """(agent, fingerprint) of each chat message, ("", fingerprint) of each tool call, said or made
    in the run: one entry per distinct one, released with the run (repeats are counted exactly)."""
    repeats: int = 0
    """Chat messages and tool calls of the run that repeat an earlier one (each beyond the first)."""

    def mark_produced(self, item: object, turn: trace.SpanContext, at_ns: int) -> None:
        """`turn` yielded `item` at `at_ns` (its message span goes under that turn)."""
        produced = self.produced
        if len(produced) >= PRODUCED_KEPT:
            del produced[next(iter(produced))]
        produced[id(item)] = (item, turn, at_ns)

    def producer_of(self, item: object) -> tuple[trace.SpanContext, int] | None:
        """The turn that yielded `item` and when, once (None: no turn did, or it was forgotten)."""
        entry = self.produced.pop(id(item), None) if self.produced else None
        if entry is None or entry[0] is not item:
            return None
        return entry[1], entry[2]

    @property
    def prices(self) -> PriceTable | None:
        return self.recording.prices if self.recording is not None else None

    @property
    def content(self) -> ContentPolicy:
        return self.recording.settings.content if self.recording is not None else _NO_CONTENT

    @property
    def instruments(self) -> Instruments | None:
        return self.recording.instruments if self.recording is not None else None

    def add_turn(self, turn: int) -> None:
        """An agent turn of the run started (`turn`: its span id, its place in the turns' order)."""
        if not self.ended:
            self.turns += 1
            self.first_inputs.setdefault(turn, None)

    def add_said(self, who: str, fingerprint: str) -> None:
        """A chat message `who` said, or a tool call (`who` empty), by its fingerprint: a repeat
        when the run has seen it before."""
        if self.ended:
            return
        key = (who, fingerprint)
        if key in self.said:
            self.repeats += 1
        else:
            self.said.add(key)

    def forget_figures(self) -> None:
        """Let go of what the run's turns, repeats and context growth were counted from."""
        self.said = set()
        self.first_inputs = {}

    def add_call(
        self,
        *,
        agent: str | None,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float | None,
        usage_known: bool = True,
        turn: int | None = None,
    ) -> None:
        """One model call of the run, counted once (calls ending after the run are not).
        `usage_known=False`: the client reported none; the run then has no cost. `turn`: the span
        id of the agent turn it was made in (None: made by no agent, such as speaker selection)."""
        if self.ended:
            return
        totals = self.totals
        totals.calls += 1
        if not usage_known:
            totals.unknown_calls += 1
            totals.cost_usd = None
            return
        if turn is not None and self.first_inputs.get(turn) is None:
            self.first_inputs[turn] = input_tokens
        totals.input_tokens += input_tokens
        totals.output_tokens += output_tokens
        totals.cost_usd = None if cost_usd is None or totals.cost_usd is None else totals.cost_usd + cost_usd

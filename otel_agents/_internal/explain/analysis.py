"""The analysis: a run's spans in, its `Explanation` out. Pure: no reading, no printing.

Which spans: the run asked for (a run id, a unique prefix of one, or a trace id), else the only run
of the spans; a trace without a run span (an autogen-core app, model calls outside any run) is
explained from its model calls, a handler's `autogen process` span standing for a turn; a run that
has not ended (its run span is written at its end: read by trace id, its turns and messages are
there, their parent missing) is an open run, explained from its turns and calls so far. A run's
spans are its run span and what descends from it (a trace may hold several runs under one app span).

Each model call (`chat` span) and tool call (`execute_tool` span) belongs to its nearest turn
(`invoke_agent` span) below the run; calls in no turn (speaker selection) belong to `(team)`, or,
in an `on_messages` run (an `invoke_agent` root, no turns), to its agent. So the turns and `(team)`
add up to the run. Costs are shared as `otel-agents cost` shares them: the exact sum of the run's
priced calls rounded to the micro-dollar once, each call getting its cost rounded down and the
micro-dollars left over going to the largest remainders; a turn's or an agent's cost is the sum of
its calls' shares, None when one of them has no price or reported no usage.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from otel_agents._internal import keys as sc
from otel_agents._internal.autogen import conventions as ag
from otel_agents._internal.explain.errors import NotARun, RunNotFound, SeveralRuns
from otel_agents._internal.explain.findings import Thresholds, find
from otel_agents._internal.explain.model import (
    NO_AGENT,
    REPEAT_TURNS_LISTED,
    UNNAMED_MODEL,
    AgentShare,
    Context,
    CostliestTurn,
    Explanation,
    Repeat,
    RunFacts,
    Shape,
    Span,
    Turn,
)
from otel_agents._internal.genai.growth import growth_per_turn
from otel_agents._internal.genai.prices import micro_shares
from otel_agents._internal.genai.prices import micro_usd as micro_usd_of

_RUN_OPERATIONS: Final = frozenset({sc.OPERATION_INVOKE_WORKFLOW, sc.OPERATION_INVOKE_AGENT})
_HEX: Final = re.compile(r"[0-9a-f]+")


def run_id_of(span: Span) -> str | None:
    """The run id of a run span (a team's or an agent's run, an agent's `on_messages`), else None."""
    run_id = span.attributes.get(sc.RUN_ID)
    if isinstance(run_id, str) and run_id and span.attributes.get(sc.GEN_AI_OPERATION_NAME) in _RUN_OPERATIONS:
        return run_id
    return None


def _operation(span: Span) -> Any:
    return span.attributes.get(sc.GEN_AI_OPERATION_NAME)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _order(span: Span) -> tuple[int, str]:
    return span.start_ns, span.span_id


def _failed(span: Span) -> bool:
    return span.status == "ERROR" or sc.ERROR_TYPE in span.attributes


def is_chat_message(type_name: str) -> bool:
    """Whether a message span's `otel_agents.message.type` names a chat message (what an agent says),
    not an event; a `ToolCallSummaryMessage` is one, though its repeats count as its tool call's."""
    name = type_name.split("[", 1)[0]
    if name in ag.CHAT_MESSAGE_CLASSES:
        return True
    if name in ag.AGENT_EVENT_CLASSES:
        return False
    return not name.endswith(ag.AGENT_EVENT_SUFFIX)


# --- which spans ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Selection:
    root: Span | None
    """The run span; None: a trace without one."""
    spans: list[Span]
    """The run's spans (the root and its descendants), or the whole trace."""
    trace_id: str
    open_run: bool = False
    """A trace without a run span holding a run that has not ended (see `_open_run_traces`)."""


def select(spans: Sequence[Span], run: str | None = None, *, where: str = "the spans") -> _Selection:
    """The spans to explain: the run named by `run` (a run id, a unique prefix, or a trace id), else
    the only run (or the only trace with model calls) of `spans`. `where` names them in errors."""
    runs = sorted((s for s in spans if run_id_of(s) is not None), key=_order)
    if run is not None:
        wanted = run.strip().lower()
        if not wanted or not _HEX.fullmatch(wanted):
            raise RunNotFound(f"{run!r} is not a run id or a trace id (hexadecimal)")
        matching = [r for r in runs if str(r.attributes[sc.RUN_ID]).startswith(wanted)]
        exact = [r for r in matching if r.attributes[sc.RUN_ID] == wanted]
        if len(exact) == 1 or len(matching) == 1:
            chosen = (exact or matching)[0]
            return _Selection(chosen, _subtree(chosen, spans), chosen.trace_id)
        if len(matching) > 1:
            raise RunNotFound(f"run id prefix {run!r} is ambiguous in {where}; give more characters")
        of_trace = [s for s in spans if s.trace_id == wanted]
        if of_trace:
            return select(of_trace, None, where=f"trace {wanted}")
        known = f"; its runs: {', '.join(str(r.attributes[sc.RUN_ID]) for r in runs[:20])}" if runs else ""
        raise RunNotFound(f"no run or trace {run!r} in {where}{known}")
    if len(runs) == 1:
        return _Selection(runs[0], _subtree(runs[0], spans), runs[0].trace_id)
    if len(runs) > 1:
        raise SeveralRuns(f"{len(runs)} runs in {where}", [str(r.attributes[sc.RUN_ID]) for r in runs])
    open_runs = _open_run_traces(spans)
    with_calls = sorted({s.trace_id for s in spans if _operation(s) == sc.OPERATION_CHAT} | open_runs)
    if len(with_calls) == 1:
        trace_id = with_calls[0]
        return _Selection(None, [s for s in spans if s.trace_id == trace_id], trace_id, trace_id in open_runs)
    if len(with_calls) > 1:
        raise SeveralRuns(f"no run span in {where}, but model calls of {len(with_calls)} traces", with_calls)
    raise NotARun(f"not a run: no run span and no model call (chat span) in {where}")


def _open_run_traces(spans: Sequence[Span]) -> set[str]:
    """The traces holding a run that has not ended: its run span is not among the spans (it is
    written when the run ends), but what ran under it is, a turn, a nested team or a message span
    whose parent is missing."""
    ids = {(s.trace_id, s.span_id) for s in spans}
    return {
        s.trace_id
        for s in spans
        if s.parent_id is not None
        and (s.trace_id, s.parent_id) not in ids
        and run_id_of(s) is None
        and (_operation(s) in _RUN_OPERATIONS or sc.MESSAGE_TYPE in s.attributes)
    }


def _children(spans: Iterable[Span]) -> dict[tuple[str, str], list[Span]]:
    children: dict[tuple[str, str], list[Span]] = {}
    for span in spans:
        if span.parent_id is not None:
            children.setdefault((span.trace_id, span.parent_id), []).append(span)
    return children


def _subtree(root: Span, spans: Sequence[Span]) -> list[Span]:
    children = _children(s for s in spans if s.trace_id == root.trace_id)
    kept = [root]
    pending = [root]
    seen = {root.span_id}
    while pending:
        for child in children.get((root.trace_id, pending.pop().span_id), []):
            if child.span_id not in seen:
                seen.add(child.span_id)
                kept.append(child)
                pending.append(child)
    return kept


# --- what the spans say --------------------------------------------------------------------------


@dataclass(eq=False)
class _TurnSpans:
    span: Span
    agent: str
    team: str | None
    calls: list[_Call] = field(default_factory=list)
    tools: list[Span] = field(default_factory=list)
    index: int = -1


@dataclass(frozen=True)
class _Call:
    span: Span
    turn: _TurnSpans | None
    input_tokens: int
    output_tokens: int
    reported: bool
    """Its usage reported (input tokens present)."""
    usage_known: bool
    """Reported, or failed before any usage (no tokens: it cost nothing)."""
    exact_usd: float | None
    """Its own cost; 0 when it failed before any usage; None: no price, or usage unknown."""
    model: str | None

    @property
    def unpriced(self) -> bool:
        return self.usage_known and self.exact_usd is None


def _call(span: Span, turn: _TurnSpans | None) -> _Call:
    attributes = span.attributes
    input_tokens = _int(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS))
    output_tokens = _int(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)) or 0
    reported = input_tokens is not None
    usage_known = reported or sc.ERROR_TYPE in attributes
    cost = _float(attributes.get(sc.COST_USD))
    if cost is None and usage_known and not input_tokens and not output_tokens:
        cost = 0.0  # failed before any usage: it cost nothing
    model = _text(attributes.get(sc.GEN_AI_RESPONSE_MODEL)) or _text(attributes.get(sc.GEN_AI_REQUEST_MODEL))
    return _Call(span, turn, input_tokens or 0, output_tokens, reported, usage_known, cost, model)


def _after(prefix: str, name: str) -> str:
    return name[len(prefix) :].strip() if name.startswith(prefix) else name


def _turn_agent(span: Span) -> str:
    return _text(span.attributes.get(sc.GEN_AI_AGENT_NAME)) or _after(sc.OPERATION_INVOKE_AGENT, span.name) or "?"


def _handler(span: Span) -> str | None:
    """The agent of an autogen-core handler's span (`autogen process {agent}`), else None."""
    match = ag.RUNTIME_SPAN_NAME.match(span.name)
    if match is None or match.group(1) != "process" or not match.group(2):
        return None
    return ag.RUNTIME_SPAN_DESTINATION_KEY.sub("", match.group(2)) or None


@dataclass
class _Walk:
    turns: list[_TurnSpans] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    tools: list[tuple[Span, _TurnSpans | None]] = field(default_factory=list)
    messages: list[tuple[Span, _TurnSpans | None]] = field(default_factory=list)


def _walk(selection: _Selection) -> _Walk:
    """Every span of the selection with the turn it belongs to (its nearest turn) and the team
    that turn ran in."""
    walk = _Walk()
    root = selection.root
    ids = {s.span_id for s in selection.spans}
    children = _children(selection.spans)
    if root is not None:
        team = _text(root.attributes.get(sc.GEN_AI_WORKFLOW_NAME))
        stack: list[tuple[Span, _TurnSpans | None, str | None]] = [
            (child, None, team) for child in children.get((root.trace_id, root.span_id), [])
        ]
    else:
        stack = [(s, None, None) for s in selection.spans if s.parent_id is None or s.parent_id not in ids]
    while stack:
        span, turn, team = stack.pop()
        operation = _operation(span)
        if operation == sc.OPERATION_INVOKE_AGENT:
            turn = _TurnSpans(span, _turn_agent(span), team)
            walk.turns.append(turn)
        elif operation == sc.OPERATION_INVOKE_WORKFLOW:
            team = _text(span.attributes.get(sc.GEN_AI_WORKFLOW_NAME)) or team
        elif operation == sc.OPERATION_CHAT:
            call = _call(span, turn)
            walk.calls.append(call)
            if turn is not None:
                turn.calls.append(call)
        elif operation == sc.OPERATION_EXECUTE_TOOL:
            walk.tools.append((span, turn))
            if turn is not None:
                turn.tools.append(span)
        elif sc.MESSAGE_TYPE in span.attributes:
            walk.messages.append((span, turn))
        elif root is None:
            agent = _handler(span)
            if agent is not None:  # a core app's handler stands for a turn (kept if it calls a model)
                turn = _TurnSpans(span, agent, None)
                walk.turns.append(turn)
        stack.extend((child, turn, team) for child in children.get((span.trace_id, span.span_id), []))
    if root is None:  # a core app's handler is a turn if it called a model; an open run's turns all count
        walk.turns = [t for t in walk.turns if t.calls or _operation(t.span) == sc.OPERATION_INVOKE_AGENT]
    walk.turns.sort(key=lambda t: _order(t.span))
    for index, turn in enumerate(walk.turns):
        turn.index = index
    walk.calls.sort(key=lambda c: _order(c.span))
    for turn in walk.turns:
        turn.calls.sort(key=lambda c: _order(c.span))
    walk.tools.sort(key=lambda t: _order(t[0]))
    walk.messages.sort(key=lambda m: _order(m[0]))
    return walk


def _sum_micro(micro: Iterable[int | None]) -> int | None:
    """The sum; None when one is None."""
    total = 0
    for value in micro:
        if value is None:
            return None
        total += value
    return total


# --- the explanation -----------------------------------------------------------------------------


def explain_spans(
    spans: Sequence[Span], run: str | None = None, thresholds: Thresholds | None = None, *, where: str = "the spans"
) -> Explanation:
    """The explanation of the run named by `run` in `spans` (see `select`), with the findings
    `thresholds` (default: the documented defaults) make."""
    selection = select(spans, run, where=where)
    walk = _walk(selection)
    micro = dict(zip((id(c) for c in walk.calls), micro_shares([c.exact_usd for c in walk.calls]), strict=True))
    root = selection.root
    shape: Shape = "open" if selection.open_run else _shape(root)
    turns = tuple(_turn(t, micro, _start_of(selection)) for t in walk.turns)
    facts = _facts(selection, walk, micro, len(turns))
    solo = _turn_agent(root) if root is not None and shape == "on_messages" else NO_AGENT
    explanation = Explanation(
        run=facts,
        agents=_agents(walk, micro, solo),
        turns=turns,
        context=_context(turns),
        costliest_turn=_costliest(turns, facts),
        repeats=_repeats(walk),
        findings=(),
        shape=shape,
        unpriced_models=tuple(sorted({c.model or UNNAMED_MODEL for c in walk.calls if c.unpriced})),
        failed_tools=_failed_tools(walk),
    )
    return replace(explanation, findings=find(explanation, thresholds or Thresholds()))


def _shape(root: Span | None) -> Shape:
    if root is None:
        return "core"
    if _operation(root) == sc.OPERATION_INVOKE_AGENT:
        return "on_messages"
    if root.attributes.get(sc.OPENINFERENCE_SPAN_KIND) == sc.KIND_AGENT:
        return "agent"
    return "team"


def _start_of(selection: _Selection) -> int:
    if selection.root is not None:
        return selection.root.start_ns
    return min(s.start_ns for s in selection.spans)


def _turn(turn: _TurnSpans, micro: Mapping[int, int | None], run_start: int) -> Turn:
    first = next((c.input_tokens for c in turn.calls if c.reported), None)
    return Turn(
        index=turn.index,
        agent=turn.agent,
        team=turn.team,
        start_ns=turn.span.start_ns - run_start,
        duration_ns=turn.span.end_ns - turn.span.start_ns,
        calls=len(turn.calls),
        input_tokens=sum(c.input_tokens for c in turn.calls),
        output_tokens=sum(c.output_tokens for c in turn.calls),
        micro_usd=_sum_micro(micro[id(c)] for c in turn.calls),
        tool_calls=len(turn.tools),
        tool_errors=sum(1 for t in turn.tools if _failed(t)),
        first_input_tokens=first,
        unknown_usage_calls=sum(1 for c in turn.calls if not c.usage_known),
    )


def _facts(selection: _Selection, walk: _Walk, micro: Mapping[int, int | None], turns: int) -> RunFacts:
    calls = walk.calls
    summed_in = sum(c.input_tokens for c in calls)
    summed_out = sum(c.output_tokens for c in calls)
    all_priced = _sum_micro(micro[id(c)] for c in calls)
    root = selection.root
    if root is None:  # no run span: what its model calls say
        start = min(s.start_ns for s in selection.spans)
        end = max(s.end_ns for s in selection.spans)
        return RunFacts(
            run_id=None,
            trace_id=selection.trace_id,
            team=None,
            user_id=None,
            session_id=None,
            conversation_id=None,
            started_ns=start,
            duration_ns=end - start,
            messages=None,
            turns=turns,
            calls=len(calls),
            input_tokens=summed_in,
            output_tokens=summed_out,
            micro_usd=all_priced,
            stop_reason=None,
            stop_kind=None,
            unknown_usage_calls=sum(1 for c in calls if not c.usage_known),
        )
    attributes = root.attributes
    ended = sc.GEN_AI_USAGE_INPUT_TOKENS in attributes  # the run span's totals, as `runs` shows them
    run_cost = _float(attributes.get(sc.COST_USD))
    if run_cost is None:
        micro_usd = None
    elif calls and all_priced is not None:
        micro_usd = all_priced  # its calls' shares: the turns and agents add up to it exactly
    else:
        micro_usd = micro_usd_of(run_cost)
    unknown = _int(attributes.get(sc.USAGE_UNKNOWN_CALLS))
    return RunFacts(
        run_id=run_id_of(root),
        trace_id=root.trace_id,
        team=_text(attributes.get(sc.GEN_AI_WORKFLOW_NAME)),
        user_id=_text(attributes.get(sc.USER_ID)),
        session_id=_text(attributes.get(sc.SESSION_ID)),
        conversation_id=_text(attributes.get(sc.GEN_AI_CONVERSATION_ID)),
        started_ns=root.start_ns,
        duration_ns=root.end_ns - root.start_ns,
        messages=_int(attributes.get(sc.MESSAGE_COUNT)),
        turns=turns,
        calls=len(calls),
        input_tokens=(_int(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)) or 0) if ended else summed_in,
        output_tokens=(_int(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)) or 0) if ended else summed_out,
        micro_usd=micro_usd,
        stop_reason=_text(attributes.get(sc.STOP_REASON)),
        stop_kind=_text(attributes.get(sc.STOP_KIND)),
        unknown_usage_calls=unknown if unknown is not None else sum(1 for c in calls if not c.usage_known),
        outcomes=outcomes_of(root),
    )


def outcomes_of(root: Span) -> tuple[tuple[str, str, float | None], ...]:
    """The outcomes on a run's span (`gen_ai.evaluation.result` events), by name."""
    found: dict[str, tuple[str, str, float | None]] = {}
    for event in root.events:
        name = event.attributes.get(sc.GEN_AI_EVALUATION_NAME)
        label = event.attributes.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
        if event.name == sc.GEN_AI_EVALUATION_RESULT_EVENT and isinstance(name, str) and isinstance(label, str):
            score = event.attributes.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            found.setdefault(name, (name, label, float(score) if isinstance(score, int | float) else None))
    return tuple(found[name] for name in sorted(found))


def _agents(walk: _Walk, micro: Mapping[int, int | None], solo: str) -> tuple[AgentShare, ...]:
    """Per agent: its turns, and its calls (calls in no turn: `solo`'s, `(team)` unless the run is
    one agent's `on_messages`)."""
    turns: dict[str, int] = {}
    calls: dict[str, list[_Call]] = {}
    for turn in walk.turns:
        turns[turn.agent] = turns.get(turn.agent, 0) + 1
        calls.setdefault(turn.agent, [])
    for call in walk.calls:
        calls.setdefault(call.turn.agent if call.turn is not None else solo, []).append(call)
    total = sum(c.input_tokens + c.output_tokens for c in walk.calls)
    rows = []
    for agent, of_agent in calls.items():
        tokens = sum(c.input_tokens + c.output_tokens for c in of_agent)
        rows.append(
            AgentShare(
                agent=agent,
                turns=turns.get(agent, 0),
                calls=len(of_agent),
                input_tokens=sum(c.input_tokens for c in of_agent),
                output_tokens=sum(c.output_tokens for c in of_agent),
                micro_usd=_sum_micro(micro[id(c)] for c in of_agent),
                token_share=round(tokens / total, 4) if total else 0.0,
                unknown_usage_calls=sum(1 for c in of_agent if not c.usage_known),
            )
        )
    return tuple(sorted(rows, key=lambda a: (-a.tokens, -(a.micro_usd or 0), a.agent)))


def _context(turns: Sequence[Turn]) -> Context:
    inputs = [t.first_input_tokens for t in turns if t.first_input_tokens is not None]
    return Context(
        growth_tokens_per_turn=growth_per_turn(inputs),
        first_input_tokens=inputs[0] if inputs else None,
        last_input_tokens=inputs[-1] if inputs else None,
        turns_measured=len(inputs),
    )


def _costliest(turns: Sequence[Turn], facts: RunFacts) -> CostliestTurn | None:
    if not turns:
        return None
    priced = facts.micro_usd is not None and all(t.micro_usd is not None for t in turns)
    if priced:
        top = max(turns, key=lambda t: (t.micro_usd or 0, t.tokens, -t.index))
    else:
        top = max(turns, key=lambda t: (t.tokens, -t.index))
    return CostliestTurn(
        top.index, top.agent, top.micro_usd, top.input_tokens, top.output_tokens, "cost" if priced else "tokens"
    )


@dataclass
class _Seen:
    kind: str
    agent: str | None
    fingerprint: str
    first: tuple[int, str]
    count: int = 0
    turns: list[int] = field(default_factory=list)
    agents: set[str | None] = field(default_factory=set)
    tool: str | None = None


def _repeats(walk: _Walk) -> tuple[Repeat, ...]:
    """Chat messages one agent said again (by `otel_agents.message.fingerprint`; a tool call's
    summary message counts as its tool call), tool calls made again with the same arguments (by
    `otel_agents.tool.fingerprint`): 2 occurrences or more, each counted exactly."""
    seen: dict[tuple[str, str | None, str], _Seen] = {}

    def occurred(key: tuple[str, str | None, str], span: Span, turn: _TurnSpans | None, tool: str | None) -> None:
        entry = seen.get(key)
        if entry is None:
            entry = seen[key] = _Seen(key[0], key[1], key[2], _order(span), tool=tool)
        entry.count += 1
        entry.agents.add(turn.agent if turn is not None else None)
        if turn is not None and turn.index not in entry.turns:
            entry.turns.append(turn.index)

    for span, turn in walk.messages:
        fingerprint = _text(span.attributes.get(sc.MESSAGE_FINGERPRINT))
        kind = _text(span.attributes.get(sc.MESSAGE_TYPE)) or ""
        if fingerprint is None or not is_chat_message(kind) or kind == ag.TOOL_CALL_SUMMARY_CLASS:
            continue
        agent = _text(span.attributes.get(sc.GEN_AI_AGENT_NAME)) or _after("message", span.name)
        occurred(("message", agent, fingerprint), span, turn, None)
    for span, turn in walk.tools:
        fingerprint = _text(span.attributes.get(sc.TOOL_FINGERPRINT))
        if fingerprint is not None:
            occurred(("tool_call", None, fingerprint), span, turn, _after(ag.EXECUTE_TOOL_SPAN_PREFIX, span.name))
    repeats = []
    for entry in seen.values():
        if entry.count < 2:
            continue
        who = entry.agent
        if entry.kind == "tool_call":
            who = next(iter(entry.agents)) if len(entry.agents) == 1 else None
        repeats.append(
            (
                (-entry.count, entry.kind, entry.first),
                Repeat(
                    kind="message" if entry.kind == "message" else "tool_call",
                    agent=who,
                    fingerprint=entry.fingerprint,
                    count=entry.count,
                    turns=tuple(sorted(entry.turns)[:REPEAT_TURNS_LISTED]),
                    tool=entry.tool,
                ),
            )
        )
    return tuple(repeat for _, repeat in sorted(repeats, key=lambda r: r[0]))


def _failed_tools(walk: _Walk) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    failed: dict[str, tuple[int, set[str]]] = {}
    for span, _ in walk.tools:
        if not _failed(span):
            continue
        name = _after(ag.EXECUTE_TOOL_SPAN_PREFIX, span.name) or "?"
        count, types = failed.get(name, (0, set()))
        error = _text(span.attributes.get(sc.ERROR_TYPE))
        failed[name] = (count + 1, types | ({error} if error else set()))
    ordered = sorted(failed.items(), key=lambda item: (-item[1][0], item[0]))
    return tuple((name, count, tuple(sorted(types))) for name, (count, types) in ordered)

"""What user content may leave the process, and in what size.

Off by default. With capture on, texts are passed through `redact` first, then bounded: a plain
text is cut (ending in "…"); a JSON value stays valid JSON, by cutting the texts inside it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from opentelemetry.trace import Span

from otel_agents._internal.autogen import conventions as ag

if TYPE_CHECKING:
    from autogen_core.models import CreateResult

logger = logging.getLogger(__name__)

ContentMode = Literal["NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"]
CONTENT_MODES: Final[tuple[ContentMode, ...]] = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
_ELLIPSIS: Final = "…"
_REDACTION_FAILED: Final = "[redaction failed]"


@dataclass(frozen=True)
class ContentPolicy:
    mode: ContentMode = "NO_CONTENT"
    max_chars: int = 4096
    redact: Callable[[str], str] | None = None

    @property
    def enabled(self) -> bool:
        return self.mode != "NO_CONTENT"

    @property
    def on_span(self) -> bool:
        """Content goes on spans as attributes (`SPAN_ONLY`, `SPAN_AND_EVENT`)."""
        return self.mode in ("SPAN_ONLY", "SPAN_AND_EVENT")

    def clean(self, text: str) -> str:
        """`text` through `redact` (a failing redact records a marker, never the text)."""
        if self.redact is None:
            return text
        try:
            redacted = self.redact(text)
        except Exception:
            logger.warning("otel-agents: the redact function failed; the text is not recorded", exc_info=True)
            return _REDACTION_FAILED
        return redacted if isinstance(redacted, str) else _REDACTION_FAILED

    def text(self, text: str, *, keep_end: bool = False) -> str:
        """A redacted text, cut to the size limit: its start kept, or with `keep_end` its end (a
        stack trace's innermost frames and exception line)."""
        cleaned = self.clean(text)
        if len(cleaned) <= self.max_chars:
            return cleaned
        kept = max(0, self.max_chars - 1)
        return _ELLIPSIS + cleaned[len(cleaned) - kept :] if keep_end else cleaned[:kept] + _ELLIPSIS

    def json(self, value: Any) -> str:
        """A JSON value with every string redacted, serialised within the size limit, still valid."""
        cleaned = _map_strings(value, self.clean)
        return bounded_json(cleaned, self.max_chars)

    def record(self, span: Span, attributes: Mapping[str, str], event_name: str) -> None:
        """Put content on the span as attributes, as an event, or both, as the mode says."""
        if not attributes or not self.enabled:
            return
        if self.on_span:
            span.set_attributes(dict(attributes))
        if self.mode in ("EVENT_ONLY", "SPAN_AND_EVENT"):
            span.add_event(event_name, dict(attributes))


def _map_strings(value: Any, function: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return function(value)
    if isinstance(value, Mapping):
        return {k: _map_strings(v, function) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [_map_strings(v, function) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def bounded_json(value: Any, max_chars: int) -> str:
    """Serialise `value` within `max_chars`, cutting its longest strings first; always valid JSON."""
    text = _dumps(value)
    if len(text) <= max_chars:
        return text
    value = json.loads(text)  # a private copy to cut
    for _ in range(64):
        strings = _strings(value)
        if not strings:
            break
        excess = len(_dumps(value)) - max_chars
        if excess <= 0:
            return _dumps(value)
        holder, key, longest = max(strings, key=lambda s: len(s[2]))
        if len(longest) <= 1:
            break
        keep = max(0, len(longest) - excess - len(_ELLIPSIS))
        if keep >= len(longest) - 1:  # escaping made the cut too small: halve instead
            keep = len(longest) // 2
        holder[key] = longest[:keep] + _ELLIPSIS
    text = _dumps(value)
    if len(text) <= max_chars:
        return text
    return _dumps([]) if isinstance(value, list) else _dumps({})  # the structure alone is too big


def _strings(value: Any) -> list[tuple[Any, Any, str]]:
    found: list[tuple[Any, Any, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                found.append((value, key, item))
            else:
                found.extend(_strings(item))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                found.append((value, index, item))
            else:
                found.extend(_strings(item))
    return found


# --- AutoGen messages in the GenAI semantic conventions' message format ---------------------------


def _part_for(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else [content]:
        if isinstance(item, str):
            parts.append({"type": "text", "content": item})
        elif type(item).__name__ == ag.FUNCTION_CALL_CLASS:
            parts.append({"type": "tool_call", "id": item.id, "name": item.name, "arguments": item.arguments})
        elif type(item).__name__ == ag.FUNCTION_EXECUTION_RESULT_CLASS:
            parts.append({"type": "tool_call_response", "id": item.call_id, "response": item.content})
        else:
            parts.append({"type": type(item).__name__.lower()})  # an image or other non-text part: no bytes
    return parts


def input_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """`LLMMessage`s as `gen_ai.input.messages` entries: role and parts."""
    return [
        {"role": ag.LLM_MESSAGE_ROLES.get(type(m).__name__, "user"), "parts": _part_for(getattr(m, "content", ""))}
        for m in messages
    ]


def output_messages(result: CreateResult) -> list[dict[str, Any]]:
    """A `CreateResult` as `gen_ai.output.messages`: one assistant message with its finish reason."""
    return [{"role": "assistant", "parts": _part_for(result.content), "finish_reason": str(result.finish_reason)}]

"""A run's outcome (DESIGN section 3, "Outcomes"): what it is, how it is checked, and the event it
becomes (`gen_ai.evaluation.result`, of the GenAI semantic conventions)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from otel_agents._internal import keys as sc
from otel_agents._internal.genai.content import ContentPolicy

DEFAULT_NAME: Final = "outcome"
LABELS_A_NAME: Final = 20
"""Distinct labels the metric keeps a name (the rest are `other`): bounded metric series."""
NAMES: Final = 20
"""Distinct names the metric keeps (the rest are `other`)."""
OTHER: Final = "other"


@dataclass(frozen=True)
class Outcome:
    name: str
    label: str
    score: float | None = None
    explanation: str | None = None

    def attributes(self, content: ContentPolicy) -> dict[str, Any]:
        """The event's attributes; the explanation only where the content policy lets content out."""
        attributes: dict[str, Any] = {
            sc.GEN_AI_EVALUATION_NAME: self.name,
            sc.GEN_AI_EVALUATION_SCORE_LABEL: self.label,
        }
        if self.score is not None:
            attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] = self.score
        if self.explanation is not None and content.enabled:
            attributes[sc.GEN_AI_EVALUATION_EXPLANATION] = content.text(self.explanation)
        return attributes


def checked(name: object, label: object, score: object = None, explanation: object = None) -> Outcome:
    """The outcome, or a ValueError that says what is wrong with it."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name={name!r}: expected a non-empty text")
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"label={label!r}: expected a non-empty text, e.g. 'success'")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score)
    ):
        raise ValueError(f"score={score!r}: expected a finite number, or None")
    if explanation is not None and not isinstance(explanation, str):
        raise ValueError(f"explanation={explanation!r}: expected a text, or None")
    return Outcome(name.strip(), label.strip(), float(score) if score is not None else None, explanation)


def from_callable(value: object, name: str = DEFAULT_NAME) -> Outcome | None:
    """What an outcome callable returned: a label, (label, score), or None (no outcome)."""
    if value is None:
        return None
    if isinstance(value, tuple) and len(value) == 2:
        return checked(name, value[0], value[1])
    return checked(name, value)

"""Why a trace cannot be explained, each in one line: the CLI exits 2 for these (bad input or an
unknown id), 1 for `Unreachable` (a failure at run time)."""

from __future__ import annotations

from collections.abc import Sequence


class ExplainError(ValueError):
    """The spans asked for cannot be explained as asked (the message says why, in one line)."""


class NotARun(ExplainError):
    """The spans hold no run span and no model call (`chat` span): nothing to explain."""


class RunNotFound(ExplainError):
    """No run (or trace) answers to the id asked for, or a prefix answers for several."""


class SeveralRuns(ExplainError):
    """The spans hold several runs (or several traces without a run) and none was named."""

    def __init__(self, what: str, ids: Sequence[str]) -> None:
        self.ids = tuple(ids)
        shown = ", ".join(self.ids[:20]) + (f" and {len(self.ids) - 20} more" if len(self.ids) > 20 else "")
        super().__init__(f"{what}: name one of {shown}")


class NotOtlpJson(ExplainError):
    """A file (or an answer) that is not OTLP JSON: neither an `ExportTraceServiceRequest` per line
    nor Jaeger's `/api/v3/traces` answer."""


class Unreachable(Exception):
    """A backend that could not be asked (refused, timed out, answered with a server error)."""

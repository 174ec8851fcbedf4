"""The outcome function the zero-code outcome app names in `OTEL_AGENTS_OUTCOME`
(`tests.support.outcome_judge:verdict`): success when the critic approved."""

from typing import Any


def verdict(result: Any) -> str:
    return "success" if "APPROVE" in (result.stop_reason or "") else "failure"

"""Every span accounted for (DESIGN section 3): for each exporter of a pipeline that has shut down,
the spans ended = delivered + dropped (by reason) + sampled out, with nothing under way."""

from __future__ import annotations

import otel_agents


def assert_every_span_accounted(telemetry: otel_agents.Telemetry) -> None:
    """After `telemetry.shutdown()`: each exporter's spans all delivered, dropped or sampled out."""
    for account in telemetry.span_accounts():
        lost = account.export_failed + account.not_exported + account.sampled_out
        assert account.ended == account.delivered + lost, (
            f"{account.destination}: {account.ended} spans ended, {account.delivered} delivered, "
            f"{account.export_failed} failed, {account.not_exported} not exported, "
            f"{account.sampled_out} sampled out: {account.under_way} unaccounted for"
        )

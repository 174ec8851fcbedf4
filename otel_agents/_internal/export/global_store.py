"""The embedded store added to a global SDK provider that is not ours (the distro's)."""

from __future__ import annotations

from opentelemetry import trace

from otel_agents._internal import process_state
from otel_agents._internal.config.settings import resolve_settings
from otel_agents._internal.per_provider import PerProvider

_stores_added: PerProvider[bool] = PerProvider()
"""Global providers the store was added to."""
process_state.hold(
    __name__,
    "_stores_added",
    bound="weak per provider; kept while the provider lives, else a store would be added to it twice",
    size=_stores_added.__len__,
    forget=None,
)


def store_into_global_provider() -> None:
    """With `OTEL_AGENTS_STORE` set and an SDK provider global (the distro's), runs also go to the
    embedded store, so the CLI can show them; once per provider."""
    from otel_agents._internal.config import params

    env = params.environment()
    provider = trace.get_tracer_provider()
    add = getattr(provider, "add_span_processor", None)
    if not env.get(params.STORE.variables[0]) or add is None or _stores_added.get(provider):
        return
    from otel_agents._internal.export import pipeline
    from otel_agents._internal.export.health import Health
    from otel_agents._internal.export.store.writer import StoreSpanExporter

    settings = resolve_settings(environ=env)
    if settings.store_dir is None or "store" in (params.TRACES_EXPORTER.from_environ(env) or ()):
        return  # (the distro writes the store itself: OTEL_TRACES_EXPORTER=otel_agents_store)
    exporter = StoreSpanExporter(settings.store_dir, max_bytes=settings.store_max_bytes)
    add(pipeline.make_processor(exporter, settings, Health()))
    _stores_added.setdefault(provider, lambda: True)

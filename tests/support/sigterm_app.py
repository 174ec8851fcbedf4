"""An ASGI app that knows nothing of otel-agents: run by the tests under uvicorn (and
`opentelemetry-instrument`), then stopped by SIGTERM. `/healthz` answers at once; `/run` runs the
writers' room team on replay clients (no network) and answers with its stop reason."""

from __future__ import annotations

from typing import Any

from tests.support.teams import writers_room

Scope = dict[str, Any]


async def app(scope: Scope, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"] == "/run":
        result = await writers_room(max_messages=3).run(task="Write a line about tracing.")
        body = (result.stop_reason or "").encode()
    else:
        body = b"ok"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})

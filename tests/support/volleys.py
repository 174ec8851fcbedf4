"""A conversation of autogen-core agents only (no AgentChat, no tap): two players publishing a
ball to each other's topic, for the registry tests and the memory benchmark."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from autogen_core import MessageContext, RoutedAgent, TopicId, TypeSubscription, message_handler
from opentelemetry import trace

import otel_agents


@dataclass
class Volley:
    count: int


class Player(RoutedAgent):
    """Publishes the ball to the other player's topic until `limit` volleys have been played."""

    def __init__(self, other: str, limit: int, done: asyncio.Event) -> None:
        super().__init__("plays volleys")
        self._other, self._limit, self._done = other, limit, done

    @message_handler
    async def on_volley(self, message: Volley, ctx: MessageContext) -> None:
        if message.count >= self._limit:
            self._done.set()
            return
        await self.publish_message(Volley(message.count + 1), TopicId(self._other, "match"))


async def play(volleys: int, *, timeout_s: float = 600) -> None:
    """`volleys` messages on a traced runtime, in one trace under a span named `match`."""
    runtime = otel_agents.create_runtime()
    done = asyncio.Event()
    await Player.register(runtime, "ping", lambda: Player("to-pong", volleys, done))
    await Player.register(runtime, "pong", lambda: Player("to-ping", volleys, done))
    await runtime.add_subscription(TypeSubscription("to-ping", "ping"))
    await runtime.add_subscription(TypeSubscription("to-pong", "pong"))
    runtime.start()
    try:
        with trace.get_tracer("volleys").start_as_current_span("match"):
            await runtime.publish_message(Volley(1), TopicId("to-ping", "match"))
        await asyncio.wait_for(done.wait(), timeout=timeout_s)
    finally:
        await runtime.stop_when_idle()

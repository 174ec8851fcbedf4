"""autogen-core agents on AutoGen's gRPC worker runtime, for the cross-process tracing tests.

Run as a worker process: `python -m tests.support.grpc_agents HOST_ADDRESS ROLE`, with the OTLP
endpoint and the store in the environment. It prints "ready" once its agents are registered and
stops (flushing its spans) when its standard input closes.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass

from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    TypeSubscription,
    message_handler,
    try_get_known_serializers_for_type,
)

import otel_agents


@dataclass
class Ping:
    text: str


@dataclass
class Pong:
    text: str


@dataclass
class News:
    text: str


@dataclass
class Hop:
    hops: int


@dataclass
class Done:
    hops: int


MESSAGES = (Ping, Pong, News, Hop, Done)


class Ponger(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("answers pings")

    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Pong:
        return Pong(text=f"pong to {message.text}")


class Listener(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("hears the news")

    @message_handler
    async def on_news(self, message: News, ctx: MessageContext) -> None:
        return None


class Relay(RoutedAgent):
    """Passes a hop on to the sink in another process and returns its answer."""

    def __init__(self) -> None:
        super().__init__("relays hops")

    @message_handler
    async def on_hop(self, message: Hop, ctx: MessageContext) -> Done:
        result: Done = await self.send_message(Hop(hops=message.hops + 1), AgentId("sink", "default"))
        return result


class Sink(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("ends hops")

    @message_handler
    async def on_hop(self, message: Hop, ctx: MessageContext) -> Done:
        return Done(hops=message.hops + 1)


def add_serializers(runtime: object) -> None:
    for message_type in MESSAGES:
        runtime.add_message_serializer(try_get_known_serializers_for_type(message_type))  # type: ignore[attr-defined]


async def serve(host_address: str, role: str) -> None:
    telemetry = otel_agents.configure(runtime_spans="nested")
    runtime = otel_agents.create_runtime(host_address=host_address)
    await runtime.start()  # type: ignore[attr-defined]
    add_serializers(runtime)
    if role == "b":
        await Ponger.register(runtime, "ponger", Ponger)
        await Relay.register(runtime, "relay", Relay)
        await Listener.register(runtime, "listener_b", Listener)
        await runtime.add_subscription(TypeSubscription("news", "listener_b"))
    else:
        await Sink.register(runtime, "sink", Sink)
        await Listener.register(runtime, "listener_c", Listener)
        await runtime.add_subscription(TypeSubscription("news", "listener_c"))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until stdin closes
    await runtime.stop()  # type: ignore[attr-defined]
    telemetry.shutdown()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))

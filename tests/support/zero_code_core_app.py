"""An autogen-core app that knows nothing of otel-agents, past one machine: `RoutedAgent`s on
AutoGen's gRPC runtime, run by the tests under `opentelemetry-instrument` (default settings).

`python zero_code_core_app.py ROLE HOST_ADDRESS`:
- `host`: the `GrpcWorkerAgentRuntimeHost`;
- `writer`, `editor`: a worker each; the writer drafts on `draft-requests` and publishes to `drafts`,
  the editor reviews on `drafts` and publishes to `reviews`; each asks the model once a message;
- `main`: publishes two draft requests from its `main()`, outside any span (two conversations),
  and waits for both reviews;
- `local` (HOST_ADDRESS ignored): the writer, the editor and the desk on one
  `SingleThreadedAgentRuntime`; publishes an announcement no one subscribes to, then the two draft
  requests, and waits for both reviews.
Workers print "ready" once serving and stop when their standard input closes. The OpenAI client's
base URL and key come from `OPENAI_BASE_URL` / `OPENAI_API_KEY`.
"""

import asyncio
import sys
from dataclasses import dataclass

from autogen_core import (
    DefaultTopicId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    message_handler,
    try_get_known_serializers_for_type,
)
from autogen_core.models import UserMessage
from autogen_ext.models.openai import OpenAIChatCompletionClient
from autogen_ext.runtimes.grpc import GrpcWorkerAgentRuntime, GrpcWorkerAgentRuntimeHost


@dataclass
class DraftRequest:
    topic: str


@dataclass
class Draft:
    text: str


@dataclass
class Review:
    text: str


class Writer(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("drafts")
        self._client = OpenAIChatCompletionClient(model="gpt-4o-mini", max_retries=0)

    @message_handler
    async def on_request(self, message: DraftRequest, ctx: MessageContext) -> None:
        result = await self._client.create([UserMessage(content=f"Draft about {message.topic}", source="writer")])
        await self.publish_message(Draft(text=str(result.content)), TopicId("drafts", "default"))


class Editor(RoutedAgent):
    def __init__(self) -> None:
        super().__init__("reviews")
        self._client = OpenAIChatCompletionClient(model="gpt-4o-mini", max_retries=0)

    @message_handler
    async def on_draft(self, message: Draft, ctx: MessageContext) -> None:
        result = await self._client.create([UserMessage(content=f"Review: {message.text}", source="editor")])
        await self.publish_message(Review(text=str(result.content)), TopicId("reviews", "default"))


class Desk(RoutedAgent):
    """Where the reviews come back to, in the main process."""

    def __init__(self, done: asyncio.Queue[Review]) -> None:
        super().__init__("collects reviews")
        self._done = done

    @message_handler
    async def on_review(self, message: Review, ctx: MessageContext) -> None:
        await self._done.put(message)


async def worker(host_address: str) -> GrpcWorkerAgentRuntime:
    runtime = GrpcWorkerAgentRuntime(host_address=host_address)
    await runtime.start()
    for message_type in (DraftRequest, Draft, Review):
        runtime.add_message_serializer(try_get_known_serializers_for_type(message_type))
    return runtime


async def on_one_machine() -> None:
    runtime = SingleThreadedAgentRuntime()
    done: asyncio.Queue[Review] = asyncio.Queue()
    await Writer.register(runtime, "writer", Writer)
    await Editor.register(runtime, "editor", Editor)
    await Desk.register(runtime, "desk", lambda: Desk(done))
    for topic, agent in (("draft-requests", "writer"), ("drafts", "editor"), ("reviews", "desk")):
        await runtime.add_subscription(TypeSubscription(topic, agent))
    runtime.start()
    await runtime.publish_message(DraftRequest(topic="nobody"), TopicId("announcements", "default"))
    for topic in ("tracing", "sampling"):
        await runtime.publish_message(DraftRequest(topic=topic), DefaultTopicId("draft-requests"))
    for _ in range(2):
        await asyncio.wait_for(done.get(), timeout=60)
    await runtime.stop_when_idle()


async def serve(role: str, host_address: str) -> None:
    if role == "local":
        await on_one_machine()
        return
    if role == "host":
        host = GrpcWorkerAgentRuntimeHost(address=host_address)
        host.start()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await host.stop()
        return
    runtime = await worker(host_address)
    if role == "main":
        done: asyncio.Queue[Review] = asyncio.Queue()
        await Desk.register(runtime, "desk", lambda: Desk(done))
        await runtime.add_subscription(TypeSubscription("reviews", "desk"))
        for topic in ("tracing", "sampling"):
            await runtime.publish_message(DraftRequest(topic=topic), DefaultTopicId("draft-requests"))
        for _ in range(2):
            await asyncio.wait_for(done.get(), timeout=60)
    else:
        agent, topic = (Writer, "draft-requests") if role == "writer" else (Editor, "drafts")
        await agent.register(runtime, role, agent)
        await runtime.add_subscription(TypeSubscription(topic, role))
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runtime.stop()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))

"""A small OpenAI-compatible chat completions server on 127.0.0.1 for tests.

Replies come from a script (text, or a tool call), usage is counted per request, streaming sends
the usage in the last chunk when asked (`stream_options.include_usage`). Every request is kept, so
tests can compare what the server billed with what the trace says.

A reply scripted with `hold=True` is kept unanswered until the test calls `release()`: the test
knows the app is waiting for that call (`wait_until_held()`) and acts then, without guessing how
long a delay is long enough. `stop()` drops the calls still held (their connections closed
unanswered), and a call is never held longer than `hold_bound_s`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_call: tuple[str, dict[str, Any]] | None = None  # (function name, arguments)
    delay_s: float = 0.0
    status: int = 200
    cached_tokens: int | None = None
    hold: bool = False
    """Keep the call unanswered until `OpenAIServer.release()` (then answer it as scripted)."""


@dataclass
class Billed:
    prompt_tokens: int
    completion_tokens: int
    model: str
    stream: bool


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # many clients at once (the service benchmark): the default 5 resets some
    daemon_threads = True


@dataclass
class OpenAIServer:
    script: list[Reply] = field(default_factory=list)
    model: str = "gpt-4o-mini-2024-07-18"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    """Each request's headers, names lowercased (a `traceparent` an HTTP-client instrumentation sent)."""
    billed: list[Billed] = field(default_factory=list)
    hold_bound_s: float = 120.0
    """The longest a call is held: past it, its connection is closed unanswered (a test that never
    released it fails on the app's error rather than hanging)."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        self._holding = threading.Condition(self._lock)
        self._held = 0
        self._released = False
        self._stopping = False
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, name="openai-test-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._holding:  # the calls still held end unanswered, so no handler outlives the server
            self._stopping = True
            self._holding.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    @property
    def held_count(self) -> int:
        """Calls scripted with `hold=True` that have arrived (held, or released since)."""
        with self._lock:
            return self._held

    def wait_until_held(self, count: int = 1, within_s: float = 60) -> bool:
        """Wait until `count` held calls have arrived; False if they have not within `within_s`."""
        with self._holding:
            return self._holding.wait_for(lambda: self._held >= count, timeout=within_s)

    def release(self) -> None:
        """Answer the calls held now, and let every held call arriving later through unheld."""
        with self._holding:
            self._released = True
            self._holding.notify_all()

    def _hold(self) -> bool:
        """Called by a held call's handler: wait for `release()` (True: answer it) or `stop()` or
        the bound (False: close the connection unanswered)."""
        with self._holding:
            self._held += 1
            self._holding.notify_all()
            released = self._holding.wait_for(lambda: self._released or self._stopping, timeout=self.hold_bound_s)
            return bool(released) and self._released and not self._stopping

    def play(self, replies: list[Reply]) -> None:
        """Answer the next requests with `replies` from the first (the last one repeated after)."""
        with self._lock:
            self.script = list(replies)
            self._next = 0

    def take_reply(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers or {})
            if not self.script:
                return Reply(text="ok")
            reply = self.script[min(self._next, len(self.script) - 1)]
            self._next += 1
            return reply

    def usage_for(self, body: dict[str, Any], reply: Reply) -> tuple[int, int]:
        prompt = sum(len(json.dumps(m.get("content") or "")) for m in body.get("messages", [])) // 4 + 7
        completion = max(1, len((reply.text or json.dumps(reply.tool_call)).split()))
        return prompt, completion


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            if not self.path.endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": "not found"}})
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            reply = server.take_reply(body, {name.lower(): value for name, value in self.headers.items()})
            if reply.hold:
                if not server._hold():
                    self.close_connection = True
                    return
                try:
                    self._answer(body, reply)
                except OSError:  # the app went away while its call was held (it was ended then)
                    self.close_connection = True
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            self._answer(body, reply)

        def _answer(self, body: dict[str, Any], reply: Reply) -> None:
            if reply.status != 200:
                self._send_json(reply.status, {"error": {"message": f"scripted {reply.status}", "type": "server"}})
                return
            prompt, completion = server.usage_for(body, reply)
            stream = bool(body.get("stream"))
            with server._lock:
                server.billed.append(Billed(prompt, completion, server.model, stream))
            usage: dict[str, Any] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            if reply.cached_tokens is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
            if stream:
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self._send_stream(reply, usage if include_usage else None)
            else:
                self._send_json(200, _completion(server.model, reply, usage))

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, reply: Reply, usage: dict[str, Any] | None) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _chunks(server.model, reply, usage):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def _message(reply: Reply) -> tuple[dict[str, Any], str]:
    if reply.tool_call is not None:
        name, arguments = reply.tool_call
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": reply.text}, "stop"


def _completion(model: str, reply: Reply, usage: dict[str, Any]) -> dict[str, Any]:
    message, finish = _message(reply)
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def _chunks(model: str, reply: Reply, usage: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    message, finish = _message(reply)
    if reply.tool_call is not None:
        call = dict(message["tool_calls"][0], index=0)
        yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]}
    else:
        words = reply.text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            yield {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    if usage is not None:
        yield {**base, "choices": [], "usage": usage}

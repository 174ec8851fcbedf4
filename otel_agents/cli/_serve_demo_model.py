"""`otel-agents serve-demo-model`: the offline demo's scripted model as an OpenAI-compatible endpoint.

    otel-agents serve-demo-model [--port PORT]    # on 127.0.0.1; PORT 0: a free one

So that an app on AutoGen's OpenAI client (the quick start) runs with no API key and no network:
`OPENAI_BASE_URL=http://127.0.0.1:8766/v1 OPENAI_API_KEY=unused python app.py`. The first line it
prints on stdout is that base URL, once the socket listens; Ctrl-C or SIGTERM stops it at once,
with exit 0.

It answers `POST /v1/chat/completions`, streamed or not (a stream ends with the usage when
`stream_options.include_usage` asks for it, as OpenAI's does), and `GET /v1/models`. The replies
are the demo's writers' room lines, in turn: a request's reply is picked by how many messages it
carries past the first, so each agent of a team, and each turn, says the next line. Text only,
never a tool call. Tokens are counted as about four characters each, so a longer prompt costs
more, as with a real model. It answers as the model asked for (`gpt-4o-mini` as its dated
snapshot, the demo's model, which otel-agents prices), so AutoGen's client sees the name it expects.

Cheap to import (the parser is built with every command's): the server's modules are imported
when it runs. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler
    from types import FrameType

HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8766
EXIT_FAILURE: Final = 1
CHARACTERS_PER_TOKEN: Final = 4
TOKENS_PER_MESSAGE: Final = 4
"""What a chat format adds around each message (role, separators): OpenAI's counts add 3 or 4."""


def add_parser(commands: Any) -> None:
    """`serve-demo-model` and its option, on the CLI's subcommands."""
    serve = commands.add_parser(
        "serve-demo-model",
        help="serve the demo's scripted model as an OpenAI-compatible endpoint on 127.0.0.1 (no key, no network)",
    )
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT}; 0: a free one)"
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number, 0 to 65535, not {text!r}")
    return port


class _Stop(Exception):
    """Raised by the signal handler: out of `serve_forever`, which then returns."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM: 0. A port that cannot be listened on: one line, 1."""
    import errno
    import signal

    # Both stop it, however it was started: a background job of a script inherits SIGINT ignored,
    # and a demo model left running after its script was interrupted helps no one.
    previous = {number: signal.signal(number, _stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server = _server(args.port)
        except OSError as error:
            hint = " (--port 0 picks a free one)" if error.errno == errno.EADDRINUSE else ""
            print(
                f"otel-agents: error: cannot listen on {HOST}:{args.port}: {error.strerror or error}{hint}",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        try:
            url = f"http://{HOST}:{server.server_address[1]}/v1"
            print(url, flush=True)
            print(
                f"the demo's scripted model: OPENAI_BASE_URL={url} OPENAI_API_KEY=unused python app.py "
                "(Ctrl-C or SIGTERM stops it)",
                file=sys.stderr,
                flush=True,
            )
            server.serve_forever()
        except _Stop:
            pass
        finally:
            server.server_close()
    except _Stop:  # before it listened
        pass
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 0


def _server(port: int) -> Any:
    from http.server import ThreadingHTTPServer

    class Server(ThreadingHTTPServer):
        daemon_threads = True  # a client's kept-alive connection does not hold the exit
        allow_reuse_address = True
        request_queue_size = 64

    return Server((HOST, port), _handler())


# --- what the model says ----------------------------------------------------------------------


def script() -> tuple[str, ...]:
    """The demo writers' room's lines, in the order its turns say them."""
    from ._demo import CRITIC_LINES, WRITER_LINES

    return (WRITER_LINES[0], CRITIC_LINES[0], WRITER_LINES[1], CRITIC_LINES[1])


def reply_to(messages: list[Any]) -> str:
    """The line for a request: the next one for each message the conversation has past its first
    (the system messages aside), so a team's agents, and each turn, say the next line."""
    lines = script()
    said = [m for m in messages if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))]
    return lines[max(0, len(said) - 1) % len(lines)]


def answering_model(requested: object) -> str:
    """The model a reply names: the one asked for (a prefix of the demo's, as `gpt-4o-mini` is: the
    demo's dated name, as OpenAI answers an alias with its snapshot)."""
    from ._demo import DEMO_MODEL

    if not isinstance(requested, str) or not requested or DEMO_MODEL.startswith(requested):
        return DEMO_MODEL
    return requested


def _tokens(text: str) -> int:
    return max(1, -(-len(text) // CHARACTERS_PER_TOKEN))


def _text(message: object) -> str:
    import json

    if not isinstance(message, dict):
        return json.dumps(message)
    content = message.get("content")
    if isinstance(content, list):  # parts: the text ones count
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    text = content if isinstance(content, str) else ""
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"])
    return text


def usage(messages: list[Any], reply: str) -> dict[str, int]:
    prompt = sum(TOKENS_PER_MESSAGE + _tokens(_text(m)) for m in messages)
    completion = _tokens(reply)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


# --- HTTP ---------------------------------------------------------------------------------------


def _handler() -> type[BaseHTTPRequestHandler]:
    import itertools
    import json
    import threading
    import time
    from http.server import BaseHTTPRequestHandler
    from urllib.parse import urlsplit

    from ._demo import DEMO_MODEL

    numbers = itertools.count(1)
    numbering = threading.Lock()

    def completion_id() -> str:
        with numbering:
            return f"chatcmpl-demo-{next(numbers)}"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "otel-agents-demo-model"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: its output is the URL

        def do_GET(self) -> None:
            if urlsplit(self.path).path.rstrip("/") in ("/v1/models", "/models"):
                model = {"id": DEMO_MODEL, "object": "model", "created": 0, "owned_by": "otel-agents"}
                self._send_json(200, {"object": "list", "data": [model]})
            else:
                self._error(404, f"no such path: {self.path} (the demo's model answers POST /v1/chat/completions)")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            if not urlsplit(self.path).path.rstrip("/").endswith("/chat/completions"):
                self._error(404, f"no such path: {self.path} (the demo's model answers POST /v1/chat/completions)")
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._error(400, "the request body is not JSON")
                return
            messages = body.get("messages") if isinstance(body, dict) else None
            if not isinstance(messages, list) or not messages:
                self._error(400, "expected a JSON object with a non-empty 'messages' list")
                return
            reply = reply_to(messages)
            model = answering_model(body.get("model"))
            counted = usage(messages, reply)
            base = {"id": completion_id(), "created": int(time.time()), "model": model}
            if body.get("stream"):
                options = body.get("stream_options")
                wanted = isinstance(options, dict) and bool(options.get("include_usage"))
                self._send_stream(base, reply, counted if wanted else None)
                return
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop",
                "logprobs": None,
            }
            self._send_json(200, {**base, "object": "chat.completion", "choices": [choice], "usage": counted})

        def _error(self, status: int, message: str) -> None:
            error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
            self._send_json(status, {"error": error})

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, base: dict[str, Any], reply: str, counted: dict[str, int] | None) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")  # the stream ends where the connection does
            self.end_headers()
            chunk = {**base, "object": "chat.completion.chunk"}
            pieces = [{"role": "assistant", "content": ""}]
            pieces += [{"content": word if i == 0 else f" {word}"} for i, word in enumerate(reply.split(" "))]
            events = [{**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in pieces]
            events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if counted is not None:
                events.append({**chunk, "choices": [], "usage": counted})
            for event in events:
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler

"""One GET to a server the page reads (Jaeger, Prometheus), bounded as a whole: in time, by a
deadline the whole answer must arrive within (a server that sends its headers and then dribbles or
holds its body is given up on at the deadline, not only one that never answers), and in size.

The request runs in a thread of its own, so the page's thread returns at the deadline whatever the
server does; that thread reads in chunks, stops at the deadline or the size bound, and ends within
one socket wait after the deadline. Error answers (4xx, 5xx) are answers: their status and (bounded)
body are returned for the caller to say what the server said."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

CHUNK_BYTES: Final = 64 * 1024
ERROR_BODY_BYTES: Final = 64 * 1024
"""How much of an error answer's body is read (its message is in the first lines)."""


class Unanswered(Exception):
    """No whole answer: `slow`, `unreachable` or `too_large`, with the reason."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class Answered:
    status: int
    body: bytes


def get(url: str, *, timeout_s: float, max_bytes: int, deadline: float | None = None) -> Answered:
    """The answer to GET `url` (`Accept: application/json`), whole within `timeout_s` (or by
    `deadline`, a `time.monotonic()` value, when it comes first) and at most `max_bytes` long;
    Unanswered otherwise."""
    end = time.monotonic() + timeout_s
    if deadline is not None:
        end = min(end, deadline)
    box: list[Answered | Unanswered] = []
    done = threading.Event()

    def ask() -> None:
        try:
            box.append(_ask(url, end, max_bytes))
        except Unanswered as failure:
            box.append(failure)
        except Exception as error:  # never lost in the thread: said to the caller
            box.append(Unanswered("unreachable", f"{type(error).__name__}: {error}"))
        finally:
            done.set()

    threading.Thread(target=ask, name="otel-agents-ui-get", daemon=True).start()
    if not done.wait(max(end - time.monotonic(), 0)) or not box:
        raise Unanswered("slow", "no whole answer in time")
    (result,) = box
    if isinstance(result, Unanswered):
        raise result
    return result


def _ask(url: str, end: float, max_bytes: int) -> Answered:
    left = end - time.monotonic()
    if left <= 0:
        raise Unanswered("slow", "no time left")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        response = urllib.request.urlopen(request, timeout=left)
    except urllib.error.HTTPError as error:  # an error answer: its status and the start of its body
        with error:
            return Answered(error.code, _read(error, end, min(max_bytes, ERROR_BODY_BYTES), cut=True))
    except TimeoutError:
        raise Unanswered("slow", "timed out") from None
    except OSError as error:  # URLError: refused, unknown host; a timeout while connecting
        reason = getattr(error, "reason", None) or error
        if isinstance(reason, TimeoutError):
            raise Unanswered("slow", "timed out") from None
        raise Unanswered("unreachable", str(reason)) from None
    with response:
        return Answered(response.status, _read(response, end, max_bytes))


def _read(response: Any, end: float, max_bytes: int, *, cut: bool = False) -> bytes:
    """The body, chunk by chunk, until its end, the deadline or `max_bytes` (past it: too large, or,
    with `cut`, the first `max_bytes`). `read1`: one socket read at most a chunk, so a dribbling
    server meets the deadline check between its bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() >= end:
            raise Unanswered("slow", "the answer did not end in time")
        try:
            chunk = response.read1(CHUNK_BYTES)
        except TimeoutError:
            raise Unanswered("slow", "the answer did not end in time") from None
        except OSError as error:
            raise Unanswered("unreachable", f"the answer broke off: {error}") from None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            if cut:
                chunks.append(chunk[: max_bytes - (size - len(chunk))])
                return b"".join(chunks)
            raise Unanswered("too_large", f"the answer is longer than {max_bytes:,} bytes")
        chunks.append(chunk)

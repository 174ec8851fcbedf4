"""Fingerprints of what a run said and did, for finding repeats with content capture off.

A fingerprint is a keyed BLAKE2b (8 bytes, 16 hex digits) whose key is drawn at random when the
process starts and never leaves it: two equal texts in one process get one fingerprint, so repeats
within a run (and across runs of one process) match, and no text can be guessed from its
fingerprint by hashing candidates elsewhere. The loop rules (`genai/loops.py`) keep hashes of
their own, unkeyed and never exported; these are exported, on message and `execute_tool` spans.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Final

_KEY: Final = os.urandom(16)
"""Drawn once per process (a forked child shares its parent's: the same process image); never
written anywhere."""


def _hex(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8, key=_KEY).hexdigest()


def text_fingerprint(text: str) -> str:
    """16 hex digits for `text` (lone surrogates hashed as they are, never an error)."""
    return _hex(text.encode("utf-8", "surrogatepass"))


def canonical_json(value: Any) -> str:
    """`value` as canonical JSON: sorted keys, no spaces, what JSON cannot hold as its `str()`."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def tool_fingerprint(name: str, arguments: Any) -> str:
    """16 hex digits for a call of tool `name` with `arguments` (parsed: a mapping, or a JSON
    string, parsed first), over the name and the arguments as canonical JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # not JSON: fingerprinted as the text it is
    return _hex(f"{name}\x00{canonical_json(arguments)}".encode("utf-8", "surrogatepass"))

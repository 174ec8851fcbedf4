"""Whether a store directory can be written, and if not, what is wrong and what to do, in words.

Asked before the store is used (at `configure()`, by `otel-agents demo`) and when a write fails:
an OS error alone (`FileExistsError`) tells a person neither the path nor the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

DATABASE: Final = "spans.sqlite3"
"""The store's one database file, in the store directory."""


def unwritable(directory: Path) -> str | None:
    """Why spans cannot be written to a store in `directory`, naming the path and the fix; None
    when, as far as the file system says, they can (a full disk shows only when writing)."""
    try:
        return _why(directory)
    except OSError as error:  # a parent that cannot be searched, a path too long, ...
        return f"cannot reach {directory}: {error.strerror or error}; choose a store directory you can write"


def _why(directory: Path) -> str | None:
    if directory.exists() and not directory.is_dir():
        return (
            f"{directory} is a file, not a directory: give a directory for the store (it is made if "
            "missing), or move the file away"
        )
    existing = directory
    while not existing.exists():  # the nearest part of the path that is there
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, so the store directory {directory} cannot be made in it: choose another path"
    if existing != directory:
        if not os.access(existing, os.W_OK | os.X_OK):
            return (
                f"cannot make the store directory {directory}: {existing} is not writable by you; "
                "choose a directory you can write"
            )
        return None
    database = directory / DATABASE
    if database.exists() and not os.access(database, os.R_OK | os.W_OK):
        return f"{database} is not writable by you: fix its permissions (chmod u+rw) or choose another store directory"
    if not os.access(directory, os.W_OK | os.X_OK):  # SQLite writes its journal files beside the database
        return (
            f"the store directory {directory} is not writable by you: fix its permissions (chmod u+rwx) "
            "or choose another store directory"
        )
    return None

"""The `otel-agents` command: `demo`, `runs`, `show`, `cost`, `explain`, `export`, `prices`,
`serve-demo-model`.

Exit codes: 0 success, 1 a failure at run time (an unreachable endpoint), 2 bad usage or an
unknown run. Every error is one line on stderr, never a traceback.
"""

from ._main import main

__all__ = ["main"]

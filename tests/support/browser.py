"""Debian's chromium, headless, driven by Playwright's sync API (Playwright from PyPI; its own browser
download is never used: scripts/test.sh installs `chromium` from Debian, as it installs Prometheus).

    with chromium() as browser:
        browser.open(url)                 # the page, loaded (bounded), its response status checked
        browser.page.locator(...)         # Playwright's Page
        browser.assert_no_errors()        # no console error, uncaught exception or CSP violation

Each browser starts from a fresh, empty profile, with Chromium's background networking off: this
machine's network is closed, and without those flags Chromium's own connections (updates, sync,
field trials) are refused and its pages wait on them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

CHROMIUM = "/usr/bin/chromium"
ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = {"width": 1280, "height": 800}

# A page's Content-Security-Policy violations, reported to the test through a binding (a CDP binding
# and an init script: neither is subject to the page's policy, so reporting works under any CSP).
_REPORT_CSP = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__otelAgentsCspViolation(
    `${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile || e.documentURI}:${e.lineNumber}`
  );
});
"""


def chromium_binary() -> str:
    """/usr/bin/chromium; a clear error where it is missing (as the Prometheus tests fail without
    Debian's prometheus: the test command installs both, so a missing one is never a silent skip)."""
    if not Path(CHROMIUM).is_file() or shutil.which(CHROMIUM) is None:
        raise RuntimeError(
            f"Debian's chromium is not installed ({CHROMIUM} is missing): apt-get install chromium "
            "(scripts/test.sh installs it)"
        )
    return CHROMIUM


@dataclass
class Browser:
    """A headless Chromium's context and its first page, with what went wrong on its pages."""

    context: Any  # playwright.sync_api.BrowserContext
    page: Any  # playwright.sync_api.Page
    navigation_timeout_s: float
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    csp_violations: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        """Collect `page`'s console errors, uncaught exceptions and CSP violations (done for every
        page the context opens)."""
        page.set_default_timeout(self.navigation_timeout_s * 1000)
        page.set_default_navigation_timeout(self.navigation_timeout_s * 1000)

        def console(message: Any) -> None:
            if message.type == "error":
                where = message.location or {}
                self.console_errors.append(f"{message.text} ({where.get('url', '?')}:{where.get('lineNumber', '?')})")

        page.on("console", console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))

    def open(self, url: str, *, status: int | None = 200, page: Any = None) -> Any:
        """Load `url` in `page` (default: the first page) and wait for its `load` event, within the
        navigation timeout; check its response's status (None: any). Return the response."""
        response = (page or self.page).goto(url, wait_until="load", timeout=self.navigation_timeout_s * 1000)
        assert response is not None, f"no response for {url}"
        if status is not None:
            assert response.status == status, f"{url}: HTTP {response.status}, expected {status}"
        return response

    def new_page(self) -> Any:
        return self.context.new_page()

    @property
    def errors(self) -> list[str]:
        """Every console error, uncaught exception and CSP violation so far, each one line."""
        return (
            [f"console: {e}" for e in self.console_errors]
            + [f"uncaught: {e}" for e in self.page_errors]
            + [f"CSP: {e}" for e in self.csp_violations]
        )

    def assert_no_errors(self) -> None:
        assert self.errors == [], "\n".join(self.errors)


@contextmanager
def chromium(
    *,
    viewport: dict[str, int] | None = None,
    launch_timeout_s: float = 60,
    navigation_timeout_s: float = 30,
    java_script: bool = True,
) -> Iterator[Browser]:
    """Debian's chromium, headless, on a fresh empty profile (a temporary directory removed after);
    `viewport` default 1280x800. Launch and every navigation are bounded; the browser is closed at
    the end."""
    from playwright.sync_api import sync_playwright

    binary = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="otel-agents-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=binary,
            headless=True,
            args=list(ARGS),
            timeout=launch_timeout_s * 1000,
            viewport=cast(Any, viewport or VIEWPORT),
            java_script_enabled=java_script,
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
        )
        try:
            csp_violations: list[str] = []

            def report(violation: str) -> None:
                csp_violations.append(violation)

            context.expose_function("__otelAgentsCspViolation", report)
            context.add_init_script(_REPORT_CSP)
            page = context.pages[0] if context.pages else context.new_page()
            browser = Browser(context, page, navigation_timeout_s, csp_violations=csp_violations)
            browser.watch(page)
            context.on("page", browser.watch)
            yield browser
        finally:
            context.close()

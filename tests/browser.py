"""A headless Chromium that tests drive through the DevTools protocol over a pipe (no extra package).

`--remote-debugging-pipe` makes Chromium read protocol messages from its file descriptor 3 and write
them to 4, each a JSON object ended by a NUL byte. A two-line Python wrapper puts the pipes there.
"""

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Where Debian's chromium package, or another Chromium or Chrome, installs its command.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_WRAPPER = (
    "import fcntl, os, sys\n"
    "a, b = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3])\n"
    "os.dup2(a, 3); os.dup2(b, 4); os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def find_chromium() -> str | None:
    """The path of a Chromium command, or None where none is installed."""
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


class Browser:
    """One headless Chromium with one page; `open`, `evaluate`, `screenshot`, then `close`."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="rawreact-chromium-")
        to_browser, self._writer = os.pipe()
        self._reader, from_browser = os.pipe()
        command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio"]
        command += [f"--user-data-dir={self.profile}", "--remote-debugging-pipe", f"--window-size={width},{height}"]
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WRAPPER, str(to_browser), str(from_browser), *command],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._next_id, self.events = b"", 0, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable", session=True)

    def call(self, method: str, session: bool = False, **params) -> dict:
        """Send one command and return its result (events that arrive meanwhile go to `events`)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._writer, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def _receive(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._reader, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, path: Path, fragment: str = "") -> None:
        """Load a file (at `#fragment`, if given) and wait for its load event."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=path.resolve().as_uri() + (f"#{fragment}" if fragment else ""))
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._receive())

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page; an exception in it fails the test."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, out: Path, width: int = 1280) -> Path:
        """A PNG of the whole page at `width` CSS pixels."""
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        out.write_bytes(base64.b64decode(data))
        return out

    def requests(self) -> list[str]:
        """The URLs the page asked for since it was opened."""
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def problems(self) -> list[str]:
        """Script exceptions and console errors (such as a blocked script) since the page was opened."""
        found = []
        for event in self.events:
            if event.get("method") == "Runtime.exceptionThrown":
                found.append(event["params"]["exceptionDetails"].get("text", "exception"))
            elif event.get("method") == "Log.entryAdded" and event["params"]["entry"]["level"] == "error":
                found.append(event["params"]["entry"]["text"])
        return found

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for fd in (self._writer, self._reader):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)

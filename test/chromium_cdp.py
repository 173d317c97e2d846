"""Headless Chromium driven over the DevTools protocol (CDP), for tests that look at a page as a
person would: navigate, read the DOM, take a screenshot.

Chromium is Debian's package ``chromium``; :func:`ensure_chromium` installs it on first use
(``apt-get update`` then ``apt-get install -y chromium``; CI runs as root), so the tests run
in CI instead of skipping. The CDP connection uses the ``websockets`` client of the lock; no
chromium-driver / Selenium.
"""
from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

__all__ = ["ensure_chromium", "Chromium", "CHROMIUM_FLAGS"]

#: flags for a headless, sandbox-free, network-quiet browser with a fresh profile (software WebGL)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-unsafe-swiftshader", "--hide-scrollbars", "--mute-audio")


def ensure_chromium() -> str:
    """Path of the chromium executable; installs Debian's package when it is missing.
    Raises RuntimeError (with apt's output) when it cannot be installed."""
    exe = shutil.which("chromium")
    if exe:
        return exe
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError("chromium is not installed and apt-get cannot install it here "
                           "(needs root): apt-get install -y chromium")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    logs = []
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        logs.append(f"$ {' '.join(cmd)} -> {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        if r.returncode != 0:
            raise RuntimeError("installing chromium failed:\n" + "\n".join(logs))
    exe = shutil.which("chromium")
    if not exe:
        raise RuntimeError("apt-get installed chromium but no chromium executable is on PATH:\n" + "\n".join(logs))
    return exe


class Chromium:
    """One headless Chromium with one page, driven over CDP. ``width`` x ``height`` CSS pixels.

    ``scheduling``: the browser's CPU priority (:mod:`gato_ros.cpu_priority`: ``idle`` =
    SCHED_IDLE, ``nice`` = nice 19, ``normal``), inherited by all its processes: a browser that
    draws the live view beside a free-running controller on a machine of few cores."""

    def __init__(self, width: int = 1280, height: int = 800, start_timeout_s: float = 60.0,
                 scheduling: str = "normal"):
        from websockets.sync.client import connect

        from gato_ros.cpu_priority import child_preexec

        preexec = child_preexec(scheduling)
        exe = ensure_chromium()
        self.profile = tempfile.mkdtemp(prefix="gato-chromium-")
        self.log = open(Path(self.profile) / "chromium.log", "w+")
        self.proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
                                      f"--window-size={width},{height}", "--remote-debugging-port=0",
                                      "about:blank"], stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=preexec)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + start_timeout_s
        while not (port_file.is_file() and len(port_file.read_text().split()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not open its DevTools port: {self.log_text()[-3000:]}")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self._ids = itertools.count(1)
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def call(self, method: str, timeout: float = 60.0, **params):
        """Send one CDP command and return its result (events in between are dropped)."""
        i = next(self._ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"CDP {method}: {msg['error']}")
                return msg["result"]

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serializable)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, path) -> Path:
        """A PNG of the page as shown, written to ``path``."""
        r = self.call("Page.captureScreenshot", format="png")
        path = Path(path)
        path.write_bytes(base64.b64decode(r["data"]))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

"""What the browser tests share (the `browser` fixture itself is in conftest.py) (test_serve_browser, test_serve_layout): headless Debian chromium
driven by Selenium, a `corecast serve` started on a free port with its secret read from the
address it prints, and small helpers to wait, run JavaScript and save screenshots."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


from conftest import ROOT

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")

ARTEFACTS = Path(os.environ.get("CORECAST_ARTEFACTS", ROOT / "out" / "test-artefacts")) / "serve"


def lockbench() -> str:
    from corecast.native import native_path
    return str(native_path("corecast-lockbench"))


class Server:
    def __init__(self, *files: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "corecast", "serve", "--listen", "127.0.0.1:0",
                                      *map(str, files)], stderr=subprocess.PIPE, text=True)
        line = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_-]+) ", line)
            if m:
                self.url = m.group(1)
                self.secret = m.group(2)
                self.login = f"{self.url}/?token={self.secret}"   # the address printed: the first visit
                break                                            # turns it into the page's cookie
            if self.proc.poll() is not None:
                raise RuntimeError(f"corecast serve ended: {line}{self.proc.stderr.read()}")
        else:
            raise RuntimeError("corecast serve did not start in 60 s")
        self.log: list[str] = []

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def wait(fn, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as err:      # noqa: BLE001 - the page may not be there yet
            last = err
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


def shot(browser, name: str) -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    p = ARTEFACTS / f"{name}.png"
    browser.save_screenshot(str(p))
    return p


def js(browser, script: str, *args):
    return browser.execute_script(script, *args)

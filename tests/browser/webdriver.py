"""A minimal W3C WebDriver client (stdlib only) for kprof's browser tests: starts chromedriver,
opens a headless Chromium session, and wraps the few endpoints the tests use."""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77  # ctest SKIP_RETURN_CODE
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1400,900", "--hide-scrollbars",
]


def find_browser():
    """(chromium binary, chromedriver) or None when either is missing."""
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    binary = None
    for cand in ("/usr/lib/chromium/chromium", shutil.which("chromium") or "",
                 shutil.which("chromium-browser") or ""):
        if cand and os.access(cand, os.X_OK):
            binary = cand
            break
    if not binary or not os.access(driver, os.X_OK):
        return None
    return binary, driver


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary, driver):
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="kprof-chromium-")
        self.proc = subprocess.Popen([driver, "--port=%d" % self.port],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = "http://127.0.0.1:%d" % self.port
        deadline = time.time() + 20
        while True:
            try:
                if self._call("GET", "/status")["value"].get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.time() > deadline:
                self.close()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {"binary": binary,
                                   "args": CHROMIUM_ARGS + ["--user-data-dir=" + self.profile]},
        }}}
        self.session = self._call("POST", "/session", caps)["value"]["sessionId"]
        self._call("POST", self._s("/timeouts"), {"script": 60000, "pageLoad": 120000})

    def _s(self, path):
        return "/session/%s%s" % (self.session, path)

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=180) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            raise WebDriverError("%s %s: %s" % (method, path, e.read().decode()[:500]))

    def open(self, path):
        self._call("POST", self._s("/url"), {"url": "file://" + os.path.abspath(path)})

    def js(self, script, *args):
        return self._call("POST", self._s("/execute/sync"),
                          {"script": script, "args": list(args)})["value"]

    def js_async(self, script, *args):
        return self._call("POST", self._s("/execute/async"),
                          {"script": script, "args": list(args)})["value"]

    def find(self, css):
        return self._call("POST", self._s("/element"),
                          {"using": "css selector", "value": css})["value"][ELEMENT]

    def click(self, css):
        self._call("POST", self._s("/element/%s/click" % self.find(css)), {})

    def type(self, css, text):
        self._call("POST", self._s("/element/%s/value" % self.find(css)), {"text": text})

    def screenshot(self, path):
        png = base64.b64decode(self._call("GET", self._s("/screenshot"))["value"])
        with open(path, "wb") as f:
            f.write(png)

    def alert_open(self):
        try:
            self._call("GET", self._s("/alert/text"))
            return True
        except WebDriverError as e:
            if "no such alert" in str(e):
                return False
            raise

    def logs(self):
        """Browser console entries since the last call (chromedriver's /se/log)."""
        for path in ("/se/log", "/log"):
            try:
                return self._call("POST", self._s(path), {"type": "browser"})["value"]
            except WebDriverError as e:
                if "unknown command" not in str(e):
                    raise
        raise WebDriverError("chromedriver serves no log endpoint")

    def close(self):
        try:
            if getattr(self, "session", None):
                self._call("DELETE", self._s(""))
        except (OSError, WebDriverError):
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

"""A page in headless Chromium, driven over the DevTools protocol with ``websocket-client`` (no browser driver).

:func:`load` opens a file in Debian's ``chromium`` at a given viewport, waits for it to load (every image made
eager and waited for, so lazy thumbnails below the fold load too) and returns what a test checks: the page height,
every console error, uncaught exception and failed resource load, each image's natural width, every link's
resolved URL, the element ids and where named elements lie.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

_PROBE = """(async () => {
  const imgs = [...document.images];
  for (const i of imgs) i.loading = 'eager';
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  const box = s => { const e = document.querySelector(s); if (!e) return null;
                      const r = e.getBoundingClientRect(); return {top: r.top + scrollY, bottom: r.bottom + scrollY}; };
  return JSON.stringify({
    height: document.documentElement.scrollHeight,
    width: document.documentElement.scrollWidth,
    images: imgs.map(i => ({src: i.currentSrc || i.src, naturalWidth: i.naturalWidth})),
    links: [...document.querySelectorAll('a[href]')].map(a => ({href: a.getAttribute('href'), url: a.href})),
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    boxes: Object.fromEntries(BOXES.map(s => [s, box(s)])),
  });
})()"""


class _Session:
    def __init__(self, ws_url: str):
        import websocket  # websocket-client

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > end:
                raise TimeoutError(method)
            self.events.append(json.loads(self.ws.recv()))


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
    return out


def load(path: Path, *, width: int = 1280, height: int = 900, boxes: tuple[str, ...] = (),
         screenshot: Path | None = None, timeout: float = 60.0) -> dict:
    """Open ``path`` in headless Chromium at ``width`` × ``height`` and return ``height`` / ``width`` (of the whole
    page, px), ``errors`` (console errors, exceptions, failed loads), ``images`` (src, naturalWidth), ``links``
    (href as written, url as resolved), ``ids`` and ``boxes`` (``{"top", "bottom"}`` in page px of the first element
    matching each selector in ``boxes``, None when absent). ``screenshot``: a PNG of the first screen."""
    if CHROMIUM is None:
        raise RuntimeError("no chromium on PATH")
    profile = Path(tempfile.mkdtemp(prefix="dpmf-chromium-"))
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             "--no-first-run", "--disable-extensions", "--allow-file-access-from-files",
                             f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             f"--window-size={width},{height}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        end = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"chromium did not start (exit code {proc.poll()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            target = next(t for t in json.load(r) if t.get("type") == "page")
        s = _Session(target["webSocketDebuggerUrl"])
        try:
            for domain in ("Page", "Runtime", "Log"):
                s.call(f"{domain}.enable")
            s.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                   mobile=False)
            s.call("Page.navigate", url=path.resolve().as_uri())
            s.wait_for("Page.loadEventFired", timeout)
            res = s.call("Runtime.evaluate", expression=_PROBE.replace("BOXES", json.dumps(list(boxes))),
                         awaitPromise=True, returnByValue=True)
            if "exceptionDetails" in res:
                raise RuntimeError(f"probe failed: {res['exceptionDetails']}")
            out = json.loads(res["result"]["value"])
            if screenshot is not None:
                import base64

                shot = s.call("Page.captureScreenshot", format="png")
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            time.sleep(0.2)  # late console messages
            s.ws.settimeout(0.2)
            try:
                while True:
                    s.events.append(json.loads(s.ws.recv()))
            except Exception:  # the socket's timeout: nothing more is queued
                pass
            out["errors"] = _errors(s.events)
            return out
        finally:
            s.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)

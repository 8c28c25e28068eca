#!/usr/bin/env python3
"""Load an nsysql HTML report in headless Chromium from a file URL; check every chart was drawn and no
JavaScript error happened; optionally save a screenshot.

    scripts/check_report.py REPORT.html [--screenshot PNG] [--width 1280] [--height 2400]

How: `chromium --headless --dump-dom` after a virtual-time budget of 10 s. The report writes a status element
(#nsysql-status) after load: how many chart divs it holds, how many got plotly's SVG (.main-svg), and the
errors caught by window.onerror / unhandledrejection. Exit 0 when charts == drawn == expected and errors == 0,
1 otherwise, 2 when Chromium is missing. Needs no network: the report embeds plotly.js.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


def run(browser: str, url: str, extra: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="nsysql-chromium-") as prof:
        cmd = [browser, *FLAGS, f"--user-data-dir={prof}", "--virtual-time-budget=10000", *extra, url]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def check(report: Path, screenshot: Path | None = None, width: int = 1280, height: int = 2400) -> dict:
    browser = chromium()
    if browser is None:
        raise FileNotFoundError("no chromium: apt-get install -y chromium")
    url = report.resolve().as_uri()
    text = report.read_text(encoding="utf-8", errors="replace")
    m = re.search(r'id="nsysql-status" data-expected="(\d+)"', text)
    expected = int(m.group(1)) if m else None
    p = run(browser, url, ["--dump-dom"])
    dom = p.stdout
    st = re.search(r'<div id="nsysql-status"([^>]*)>', dom)
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', st.group(1))) if st else {}
    res = {
        "report": str(report),
        "expected": expected,
        "charts": int(attrs.get("data-charts", -1)),
        "drawn": int(attrs.get("data-drawn", -1)),
        "errors": int(attrs.get("data-errors", -1)),
        "error_text": html.unescape(attrs.get("data-error-text", "")),
        "main_svg": dom.count('class="main-svg"'),
        "status_found": bool(attrs.get("data-charts")),
    }
    res["ok"] = (
        res["status_found"]
        and res["errors"] == 0
        and res["charts"] == res["drawn"]
        and (expected is None or res["charts"] == expected)
    )
    if not res["status_found"]:
        res["stderr"] = p.stderr[-2000:]
    if screenshot:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        s = run(browser, url, [f"--screenshot={screenshot.resolve()}", f"--window-size={width},{height}"])
        res["screenshot"] = str(screenshot) if screenshot.exists() else f"failed: {s.stderr[-500:]}"
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--screenshot", type=Path)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=2400)
    a = ap.parse_args()
    try:
        res = check(a.report, a.screenshot, a.width, a.height)
    except FileNotFoundError as e:
        print(f"check_report: {e}", file=sys.stderr)
        return 2
    for k, v in res.items():
        print(f"{k}: {v}")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

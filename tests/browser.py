"""Open built documentation pages in headless Chromium, offline, as a reader would.

``check(page)`` loads a copy of the page with a small script appended (next to the page,
so its relative links still resolve) and returns what the script found once MathJax has
typeset: TeX left as source, MathJax errors, content cut by the layout (an element wider
than the article with no scrolling box around it, or a box that clips what it holds), and
the page's furniture (the outline, copy buttons) and images that did not load.  ``screenshot(page, png)`` saves what a
1280 px window shows.  Used by tests/test_docs.py's slow browser test; by hand::

    .venv/bin/python tests/browser.py docs/_build/html/concepts.html [shot.png]

Chromium is Debian's (``apt-get install -y chromium``); it is started with no network use
of its own (no sync, component updates or background requests) and an empty profile.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

WIDTH = 1280
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)

_SCRIPT = r"""
<script>
window.addEventListener("load", async () => {
  const out = {};
  try {
    if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; }
  } catch (e) { out.mathjax_failed = String(e); }
  const main = document.querySelector("article[role=main]") || document.body;
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "") +
    " '" + (el.textContent || "").trim().slice(0, 60) + "'";
  const raw = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (node.parentElement.closest("pre, code, script, style, mjx-container, .highlight")) continue;
    if (/\\[([]|\\[a-zA-Z]+[{_^]|\$\$/.test(node.textContent)) raw.push(node.textContent.trim().slice(0, 100));
  }
  out.raw_tex = raw;
  out.math = main.querySelectorAll("mjx-container").length;
  out.math_errors = Array.from(main.querySelectorAll("mjx-merror")).map(name);
  const right = main.getBoundingClientRect().right;
  const scrolls = (el) => {
    for (let a = el.parentElement; a && a !== main.parentElement; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === "auto" || o === "scroll") return true;
    }
    return false;
  };
  const cut = [];
  for (const el of main.querySelectorAll("*")) {
    const style = getComputedStyle(el);
    if (style.display === "none" || style.visibility === "hidden") continue;
    const o = style.overflowX;
    if ((o === "hidden" || o === "clip") && el.scrollWidth > el.clientWidth + 2) {
      cut.push(name(el) + " clips " + el.scrollWidth + " px to " + el.clientWidth);
    }
  }
  for (const el of main.querySelectorAll("pre, table, img, svg, mjx-container, p, li, dl")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > right + 2 && !scrolls(el)) {
      cut.push(name(el) + " ends at " + Math.round(box.right) + " px, the article at " + Math.round(right));
    }
  }
  out.cut = cut;
  out.images = main.querySelectorAll("img").length;
  out.broken_images = Array.from(main.querySelectorAll("img"))
    .filter((img) => !img.complete || img.naturalWidth === 0).map((img) => img.getAttribute("src"));
  out.page_width = document.documentElement.scrollWidth;
  out.window_width = window.innerWidth;
  out.outline = document.querySelectorAll(".toc-tree a").length;
  out.code_blocks = main.querySelectorAll("div.highlight pre").length;
  out.copy_buttons = main.querySelectorAll("button.copybtn").length;
  out.footer = (document.querySelector("footer .copyright") || {}).textContent || "";
  out.external = Array.from(document.querySelectorAll("script[src], link[rel=stylesheet]"))
    .map((e) => e.src || e.href).filter((u) => /^(https?:)?\/\//.test(u));
  const pre = document.createElement("pre");
  pre.id = "browser-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str | None:
    """The Chromium binary on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list, height: int = 900, timeout: float = 120) -> str:
    binary = chromium()
    if binary is None:
        raise RuntimeError("no chromium on PATH: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="foltr_jax_chromium_") as profile:
        done = subprocess.run(
            [
                binary,
                *_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{height}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def check(page: pathlib.Path) -> dict:
    """What a reader's browser shows of ``page`` (an .html file of a built site)."""
    page = pathlib.Path(page).resolve()
    probe = page.with_name(page.stem + ".browser-check.html")
    html = page.read_text()
    probe.write_text(html.replace("</body>", _SCRIPT + "</body>", 1))
    try:
        dom = _run(["--virtual-time-budget=30000", "--dump-dom", probe.as_uri()])
    finally:
        probe.unlink()
    found = re.search(r'<pre id="browser-check">(.*?)</pre>', dom, re.DOTALL)
    if found is None:
        raise RuntimeError(f"the check script did not report on {page}: {dom[-1000:]}")
    import html as html_module

    return json.loads(html_module.unescape(found.group(1)))


def screenshot(page: pathlib.Path, png: pathlib.Path, height: int = 1600) -> None:
    """Save what a 1280 px wide window shows of ``page``'s top ``height`` pixels."""
    png = pathlib.Path(png).resolve()
    _run(
        [
            "--virtual-time-budget=30000",
            f"--screenshot={png}",
            pathlib.Path(page).resolve().as_uri(),
        ],
        height=height,
    )


if __name__ == "__main__":
    print(json.dumps(check(pathlib.Path(sys.argv[1])), indent=1))
    if len(sys.argv) > 2:
        screenshot(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))

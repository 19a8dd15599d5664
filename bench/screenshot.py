"""Look at the drawings as a reader does: a small notebook rendered to HTML, screenshotted by Chromium.

The notebook holds a few representative outputs of common.viz: a converted graph with q/dq nodes, a
two-panel ``draw_stages`` that stays side by side, one that is stacked, and a table with Chinese.
Each drawing appears twice: as its SVG (what a trusted JupyterLab shows) and as its PNG (what an
untrusted JupyterLab and GitHub show). nbconvert's JupyterLab template gives the page JupyterLab's
own CSS (tables in outputs are right-aligned there unless a cell says otherwise). Headless Chromium
(Debian: ``apt-get install chromium``; not part of the test suite, which checks the same drawings
without a browser in tests/test_drawings.py) saves one screenshot of the page, 1,130 px wide so
that the output area is a 1,000 px column. A table without the left alignment is shown for contrast.

    .venv/bin/python bench/screenshot.py [--out /tmp/drawings.png] [--html /tmp/drawings.html]

With ``--site`` it looks at the course site instead (build it first: ``make site``): served on
127.0.0.1, opened in headless Chromium (``docs/site/browser.py``), it saves a chapter page (its
title, the links to the student version and the first drawings) and a search for a Chinese word.

    .venv/bin/python bench/screenshot.py --site _site [--chapter M03/M03-4] [--query 共用] [--prefix /tmp/site-]
"""

from __future__ import annotations

import argparse
import base64
import copy
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from nbconvert import HTMLExporter
from PIL import Image, ImageChops

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common.viz import LEFT  # noqa: E402

WINDOW_WIDTH = 1130  # the prompt column and padding take about 125 px: outputs get a column of 1,000 px
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=10000",
]


def drawings() -> list[tuple[str, Any]]:
    """(heading, object with a rich repr) for the representative drawings and a table."""
    import torch

    from common.models import example_inputs, get_model
    from common.pt2e import convert_pt2e, export_module, get_xnnpack_quantizer, prepare_pt2e, quiet
    from common.viz import annotation_notes, draw, draw_stages, table

    quiet()

    def stages(name: str) -> tuple[Any, Any, Any]:
        torch.manual_seed(0)
        gm = export_module(get_model(name).eval(), example_inputs(2, name))
        quantizer, _ = get_xnnpack_quantizer(is_per_channel=True)
        prepared = prepare_pt2e(copy.deepcopy(gm), quantizer)
        prepared(*example_inputs(2, name))
        return gm, prepared, convert_pt2e(copy.deepcopy(prepared))

    gm, prepared, converted = stages("conv_relu")
    residual, residual_prepared, _ = stages("residual")
    annotated = copy.deepcopy(gm)
    get_xnnpack_quantizer(is_per_channel=True)[0].annotate(annotated)
    return [
        ("q/dq：convert_pt2e 之後", draw(converted, title="convert_pt2e 之後：q/dq 成對出現")),
        (
            "兩格並排（draw_stages）",
            draw_stages([(gm, "export 出來的圖"), (prepared, "prepare_pt2e 之後")], title="observer 插在哪裡"),
        ),
        (
            "兩格太寬：上下排（M04-1 那張）",
            draw_stages(
                [(residual, "export 出來的圖"), (residual_prepared, "prepare_pt2e 之後")],
                title="residual：BN 折進 conv",
            ),
        ),
        ("標籤註記（annotation_notes）", draw(annotated, notes=annotation_notes(annotated), title="XNNPACK 貼的標籤")),
        (
            "表格（table）",
            table(
                [["不貼標籤", 0, "annotate → validate"], ["+ 邊 x → conv2d", 2, "共用 x → conv2d 的觀察器"]],
                ["標籤", "observer 數", "說明"],
            ),
        ),
    ]


def notebook(items: list[tuple[str, Any]]) -> tuple[nbformat.NotebookNode, list[tuple[str, int, int]]]:
    """A notebook with each drawing as SVG and as PNG, each table as HTML; and the drawings' sizes."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    sizes = []
    for heading, item in items:
        nb.cells.append(nbformat.v4.new_markdown_cell(f"## {heading}"))
        if hasattr(item, "_repr_mimebundle_"):
            bundle = item._repr_mimebundle_()
            png = Image.open(io.BytesIO(base64.b64decode(bundle["image/png"])))
            sizes.append((heading, len(bundle["image/svg+xml"].encode()), len(bundle["image/png"])))
            for label, keep in (("SVG（信任的 JupyterLab）", "image/svg+xml"), ("PNG（未信任、GitHub）", "image/png")):
                cell = nbformat.v4.new_code_cell(f"# {label}：{png.width}×{png.height} px")
                data = {keep: bundle[keep], "text/plain": bundle["text/plain"]}
                cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
                nb.cells.append(cell)
        else:
            styled = item._repr_html_()
            for label, html in (("table()", styled), ("對照：沒有 text-align 的同一張表", styled.replace(LEFT, ""))):
                cell = nbformat.v4.new_code_cell(f"# {label}")
                cell.outputs = [
                    nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": repr(item)})
                ]
                nb.cells.append(cell)
    return nb, sizes


def screenshot(html_path: Path, out: Path, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        raise SystemExit("找不到 Chromium：sudo apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW_WIDTH},{height}",
                f"--screenshot={out}",
                html_path.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )


def site_screenshots(site: Path, chapter: str, query: str, prefix: str) -> list[Path]:
    """Screenshots of a chapter page and of a search on the built site in ``site``."""
    import functools
    import http.server
    import threading
    import urllib.parse

    sys.path.insert(0, str(ROOT / "docs" / "site"))
    from browser import Browser

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    if not (site / "index.html").is_file():
        raise SystemExit(f"{site} 裡沒有網站：先執行 make site")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    shots = [Path(f"{prefix}chapter.png"), Path(f"{prefix}search.png")]
    try:
        with Browser(width=1280, height=1500) as browser:
            browser.open(f"{url}/{chapter}.html")
            # from the title down to the end of the first drawing
            bottom = browser.evaluate("document.querySelector('div.cell_output img').getBoundingClientRect().bottom")
            browser.resize(int(bottom) + 40)
            browser.screenshot(shots[0])
            browser.resize(1500)
            browser.open(f"{url}/search.html?q={urllib.parse.quote(query)}")
            browser.wait_for("document.querySelectorAll('#search-results ul.search li').length > 2")
            time.sleep(1)  # the summaries below each result arrive one by one
            browser.screenshot(shots[1])
    finally:
        server.shutdown()
    return shots


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "drawings.png")
    parser.add_argument("--html", type=Path, default=Path(tempfile.gettempdir()) / "drawings.html")
    parser.add_argument("--site", type=Path, help="the built course site (make site): screenshot it instead")
    parser.add_argument("--chapter", default="M03/M03-4", help="the chapter page to screenshot (with --site)")
    parser.add_argument("--query", default="共用", help="what to search for (with --site)")
    parser.add_argument("--prefix", default=str(Path(tempfile.gettempdir()) / "site-"), help="screenshots' path prefix")
    args = parser.parse_args()
    if args.site:
        for shot in site_screenshots(args.site, args.chapter, args.query, args.prefix):
            print(f"screenshot: {shot}")
        return

    start = time.perf_counter()
    nb, sizes = notebook(drawings())
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    args.html.write_text(body)
    pictures = [
        Image.open(io.BytesIO(base64.b64decode(o.data["image/png"])))
        for c in nb.cells
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    height = 2 * sum(p.height for p in pictures) + 220 * len(nb.cells)  # each drawing shows twice
    screenshot(args.html, args.out, height)
    shot = Image.open(args.out).convert("RGB")
    used = ImageChops.difference(shot, Image.new("RGB", shot.size, "white")).getbbox()
    if used is not None:  # drop the blank page below the last output
        shot.crop((0, 0, shot.width, min(shot.height, used[3] + 20))).save(args.out)
    seconds = time.perf_counter() - start

    print(f"{'drawing':<36} {'SVG bytes':>10} {'PNG bytes (base64)':>19}")
    for heading, svg_bytes, png_b64 in sizes:
        print(f"{heading:<36} {svg_bytes:>10} {png_b64:>19}")
    shot = Image.open(args.out)
    print(f"HTML: {args.html}\nscreenshot: {args.out} ({shot.width}×{shot.height} px, {seconds:.1f} s)")


if __name__ == "__main__":
    main()

"""The drawings as pictures, checked without a browser (bench/screenshot.py looks at them in Chromium).

A drawing's display output carries a PNG beside the SVG (JupyterLab shows an untrusted notebook's
SVG as text, its PNG as a picture), fits a 1,000 px column, keeps q/dq labels inside their shapes
(measured with the font's own glyph boxes, not dot's estimate), names an installed font that has
the Chinese glyphs, and does not draw Chinese as boxes. Tables are left-aligned.
"""

from __future__ import annotations

import base64
import copy
import io
import re
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
import torch
from conftest import ROOT
from PIL import Image, ImageChops, ImageFont

import common.viz as viz
from common.models import example_inputs, get_model
from common.pt2e import convert_pt2e, export_module, get_xnnpack_quantizer, prepare_pt2e, quiet
from common.viz import MAX_WIDTH_PX, Drawing, draw, draw_stages, table

quiet()

SVG = "{http://www.w3.org/2000/svg}"


def stages(name: str) -> tuple:
    """(exported, prepared and calibrated, converted) for the model ``name`` with XNNPACKQuantizer."""
    torch.manual_seed(0)
    gm = export_module(get_model(name).eval(), example_inputs(2, name))
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=True)
    prepared = prepare_pt2e(copy.deepcopy(gm), quantizer)
    prepared(*example_inputs(2, name))
    return gm, prepared, convert_pt2e(copy.deepcopy(prepared))


@pytest.fixture(scope="module")
def conv_relu() -> tuple:
    return stages("conv_relu")


@pytest.fixture(scope="module")
def residual() -> tuple:
    return stages("residual")


def picture(drawing: Drawing) -> tuple[dict[str, str], Image.Image]:
    bundle = drawing._repr_mimebundle_()
    return bundle, Image.open(io.BytesIO(base64.b64decode(bundle["image/png"])))


def svg_px(svg: str) -> tuple[float, float]:
    root = ET.fromstring(svg)
    width, height = root.get("width", ""), root.get("height", "")
    assert width.endswith("px") and height.endswith("px"), (width, height)
    return float(width[:-2]), float(height[:-2])


# --- PNG beside the SVG, same size, deterministic -------------------------------------------------------


def test_a_drawing_shows_as_png_beside_svg_and_text(conv_relu: tuple) -> None:
    drawing = draw(conv_relu[2], title="量化後")
    bundle, png = picture(drawing)
    assert set(bundle) == {"image/png", "image/svg+xml", "text/plain"}
    png.load()  # decodes
    assert png.format == "PNG" and png.width > 100 and png.height > 100
    width, height = svg_px(bundle["image/svg+xml"])
    assert abs(png.width - width) <= 1 and abs(png.height - height) <= 1, "PNG and SVG show at the same size"
    assert "conv2d" in bundle["text/plain"] and len(bundle["text/plain"]) < 4000
    assert drawing._repr_mimebundle_() == bundle, "a re-run gives byte-identical outputs"
    assert not {"tIME", "tEXt", "zTXt", "iTXt"} & set(png_chunks(base64.b64decode(bundle["image/png"])))


def png_chunks(data: bytes) -> list[str]:
    chunks, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        chunks.append(data[at + 4 : at + 8].decode("ascii"))
        at += 12 + length
    return chunks


# --- a 1,000 px column ------------------------------------------------------------------------------------


def test_wide_two_panel_drawings_stack_and_narrow_ones_stay_side_by_side(conv_relu: tuple, residual: tuple) -> None:
    wide = draw_stages([(residual[0], "export 出來的圖"), (residual[1], "prepare_pt2e 之後")], title="BN 折進 conv")
    narrow = draw_stages([(conv_relu[0], "export 出來的圖"), (conv_relu[1], "prepare 之後")], title="兩階段")
    for drawing, columns in ((wide, 1), (narrow, 2)):
        plan, svgs, title_svg = drawing.plan()
        assert plan.columns == columns
        assert title_svg is not None and str(drawing.title) in title_svg
        bundle, png = picture(drawing)
        assert png.width <= MAX_WIDTH_PX and svg_px(bundle["image/svg+xml"])[0] <= MAX_WIDTH_PX
        assert abs(png.width - round(plan.px(plan.width))) <= 1 and abs(png.height - round(plan.px(plan.height))) <= 1
        for svg, (x, y) in zip(svgs, plan.places, strict=True):  # no panel is cut off
            width, height = viz.svg_size(svg)
            assert 0 <= x and x + width <= plan.width + 0.01 and 0 <= y and y + height <= plan.height + 0.01
        assert bundle["image/svg+xml"].count("<svg") == len(svgs) + 2  # the frame, the title, the panels
    # the side-by-side pair is wider than a column at full size: it is shrunk, but not below the limit
    plan = narrow.plan()[0]
    assert plan.width * viz.PX_PER_PT > MAX_WIDTH_PX and plan.scale >= viz.MIN_SIDE_BY_SIDE_SCALE


def test_a_wide_single_drawing_is_shrunk_to_the_column(residual: tuple) -> None:
    drawing = draw(residual[2], title="residual 量化後")
    plan = drawing.plan()[0]
    assert plan.width * viz.PX_PER_PT > MAX_WIDTH_PX, "this drawing is wider than a column at full size"
    bundle, png = picture(drawing)
    assert MAX_WIDTH_PX - 2 <= png.width <= MAX_WIDTH_PX
    assert svg_px(bundle["image/svg+xml"])[0] <= MAX_WIDTH_PX


# --- q/dq labels inside their shapes ------------------------------------------------------------------------


@cache
def font(bold: bool) -> ImageFont.FreeTypeFont:
    """The font dot draws with (fontconfig's match for the first family of ``viz.FONT`` it has), at 1000 px."""
    family = (viz.cjk_fonts() or ["sans-serif"])[0]
    found = subprocess.run(
        ["fc-match", "-f", "%{file}\n%{index}", f"{family}:weight={'bold' if bold else 'regular'}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return ImageFont.truetype(found[0], 1000, index=int(found[1] or 0))


def ink_box(text: ET.Element) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of a dot SVG ``<text>``'s glyphs, measured in the font itself."""
    size = float(text.get("font-size", "14"))
    left, top, right, bottom = font(text.get("font-weight") == "bold").getbbox(text.text or "", anchor="ls")
    left, top, right, bottom = (v * size / 1000 for v in (left, top, right, bottom))
    x, y = float(text.get("x", "0")), float(text.get("y", "0"))
    if text.get("text-anchor") == "middle":
        x -= (right + left) / 2
    return x + left, y + top, x + right, y + bottom


def inside(point: tuple[float, float], polygon: list[tuple[float, float]], clearance: float = 1.0) -> bool:
    """Whether ``point`` is at least ``clearance`` points inside the convex ``polygon`` (clear of its border)."""
    pairs = list(zip(polygon, polygon[1:] + polygon[:1], strict=True))
    orientation = 1.0 if sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in pairs) > 0 else -1.0
    x, y = point
    for (x1, y1), (x2, y2) in pairs:
        length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5
        if length and orientation * ((x2 - x1) * (y - y1) - (y2 - y1) * (x - x1)) / length < clearance:
            return False
    return True


def overflowing_labels(svg: str, kinds: tuple[str, ...] = ("quantize", "dequantize")) -> tuple[int, list[str]]:
    """How many nodes of ``kinds`` (keys of ``viz.STYLES``) there are, and their label lines that stick out."""
    fills = {viz.STYLES[kind].fill for kind in kinds}
    checked, found = 0, []
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        shape = group.find(f"{SVG}polygon")
        if group.get("class") != "node" or shape is None or shape.get("fill") not in fills:
            continue
        checked += 1
        name = group.findtext(f"{SVG}title") or ""
        points = [tuple(map(float, p.split(","))) for p in (shape.get("points") or "").split()]
        texts = group.findall(f"{SVG}text")
        assert texts, name
        for text in texts:
            left, top, right, bottom = ink_box(text)
            corners = [(left, top), (right, top), (left, bottom), (right, bottom)]
            if not all(inside(c, points[:-1]) for c in corners):
                found.append(f"{name}: {text.text}")
    return checked, found


def test_q_dq_labels_fit_inside_their_shapes(conv_relu: tuple, residual: tuple) -> None:
    for converted in (conv_relu[2], residual[2]):
        svg = viz.render_svg(draw(converted).dot_source)
        checked, found = overflowing_labels(svg)
        assert checked >= 4 and found == []
        checked, found = overflowing_labels(svg, ("op",))
        assert checked >= 2 and found == [], "op boxes' labels fit too"


def test_the_label_check_sees_labels_that_cross_the_border(conv_relu: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extra margin (as before), dot draws q/dq labels across the cds shape's border."""
    for kind in ("quantize", "dequantize"):
        monkeypatch.setitem(viz.STYLES, kind, viz.STYLES[kind].__class__(**{**vars(viz.STYLES[kind]), "margin": None}))
    assert overflowing_labels(viz.render_svg(draw(conv_relu[2]).dot_source))[1]


# --- Chinese -------------------------------------------------------------------------------------------------


def test_the_font_named_in_the_drawings_is_installed_with_chinese_glyphs(conv_relu: tuple) -> None:
    installed = viz.cjk_fonts()
    assert installed, "no font of viz.FONT_FAMILIES with Chinese glyphs: run scripts/bootstrap.sh (fonts-noto-cjk)"
    svg = draw(conv_relu[0], title="匯出後").svg()
    named = {family.strip() for family in re.findall(r'font-family="([^"]+)"', svg)[0].split(",")}
    assert installed[0] in named
    families = subprocess.run(["fc-list", ":lang=zh-tw", "family"], capture_output=True, text=True).stdout
    assert installed[0] in families


def test_chinese_is_drawn_with_glyphs_not_boxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same Chinese title rendered by dot with our fonts and with fonts that lack the glyphs differ."""
    title = Drawing(None, ["\n".join([*viz._graph_header("量化後的圖，共用觀察器"), "}"])], "")
    with_glyphs = Image.open(io.BytesIO(title.png())).convert("RGB")

    latin_only = Path(
        subprocess.run(["fc-match", "-f", "%{file}", "DejaVu Sans"], capture_output=True, text=True).stdout
    )
    config = tmp_path / "fonts.conf"
    config.write_text(
        f'<?xml version="1.0"?>\n<fontconfig><dir>{latin_only.parent}</dir>'
        f"<cachedir>{tmp_path / 'cache'}</cachedir></fontconfig>\n"
    )
    monkeypatch.setenv("FONTCONFIG_FILE", str(config))
    listed = subprocess.run(["fc-list", ":lang=zh-tw", "family"], capture_output=True, text=True).stdout
    assert listed.strip() == "", "the reference render must have no Chinese font"
    boxes = Image.open(io.BytesIO(title.png())).convert("RGB")

    assert with_glyphs.size != boxes.size or ImageChops.difference(with_glyphs, boxes).getbbox() is not None
    dark = with_glyphs.convert("L").point(lambda p: 255 if p < 128 else 0).histogram()[255]
    assert dark > 100, "the title is drawn"


# --- tables ------------------------------------------------------------------------------------------------


class Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.styles: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("td", "th"):
            self.styles.append(dict(attrs).get("style"))


def test_tables_are_left_aligned_in_html_and_plain_text() -> None:
    t = table([["不量化", 1], ["共用 x → conv2d", 22]], ["規格", "observer 數"])
    cells = Cells()
    cells.feed(t._repr_html_())
    assert len(cells.styles) == 6
    assert all(s is not None and re.fullmatch(r"text-align:\s*left;?", s) for s in cells.styles), cells.styles
    assert repr(t).splitlines()[1] == "|:---|:---|"


# --- the executed source notebooks --------------------------------------------------------------------------


def test_every_drawing_in_the_source_notebooks_has_a_png_that_fits() -> None:
    """Executed source/ notebooks show every drawing in JupyterLab without `jupyter trust`, and on GitHub."""
    missing, wide = [], []
    for path in sorted((ROOT / "source").glob("*/*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "image/svg+xml" not in data:
                    continue
                if "image/png" not in data:
                    missing.append(f"{path.stem} [{index}]")
                    continue
                png = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
                if png.width > MAX_WIDTH_PX:
                    wide.append(f"{path.stem} [{index}] {png.width}px")
    assert not missing, f"drawings without a PNG (run `pt2e-course execute`): {missing}"
    assert not wide, f"drawings wider than {MAX_WIDTH_PX}px: {wide}"

"""Drawings of FX graphs and tables that render inline in JupyterLab.

``draw`` turns a GraphModule into a graphviz drawing whose node kinds are told apart
by colour and shape; notes appear under nodes. A drawing displays as one mime bundle:
a PNG (shown by JupyterLab even in an untrusted notebook, and on GitHub), the same
picture as SVG (sharper, shown where SVG is trusted) and its text form. Every drawing
fits a ``MAX_WIDTH_PX`` column: panels of ``draw_stages`` stand side by side only when
that needs little shrinking, else one under the other. Chinese needs a CJK font
(``fonts-noto-cjk`` on Debian/Ubuntu; see ``cjk_fonts``). Where graphviz's ``dot``
program is missing, every drawing says so in one line and falls back to a readable
text form of the graph. ``table`` renders rows as a left-aligned HTML table in a
notebook and as a plain-text (Markdown) table elsewhere.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch.fx import GraphModule, Node

from common.graph_utils import annotation_of, is_observer, spec_short

DOT_MISSING = (
    "（找不到 graphviz 的 dot 程式，改用文字顯示圖；安裝：sudo apt-get install graphviz，"
    "macOS 用 brew install graphviz，Colab 已內建）"
)

# Fonts with the Chinese glyphs, first the one bootstrap installs on Linux (Debian's fonts-noto-cjk),
# then macOS's and Windows' own, then a generic family. dot (pango) and browsers both read this list.
FONT_FAMILIES = (
    "Noto Sans CJK TC",
    "Noto Sans TC",
    "Source Han Sans TC",
    "PingFang TC",
    "Microsoft JhengHei",
    "WenQuanYi Zen Hei",
    "sans-serif",
)
FONT = ", ".join(FONT_FAMILIES)
MAX_WIDTH_PX = 1000  # every drawing fits a column this wide (CSS px; the PNG has as many pixels)
PX_PER_PT = 4 / 3  # dot measures in points; browsers draw a point as 4/3 px, dot's PNG is 96 dpi
MIN_SIDE_BY_SIDE_SCALE = 0.8  # panels stay side by side if that shrinks them no more than this
NEW_OBSERVER_COLOR = "#16a34a"


@dataclass(frozen=True)
class NodeStyle:
    """How one kind of node looks: its Chinese name, shape and fill colour."""

    kind: str
    shape: str
    fill: str
    border: str = "#374151"
    dashed: bool = False
    margin: str | None = None  # dot's node margin (inches, "x,y"); None keeps the graph's default


# dot sizes a cds node's box to the label, but draws the cds body 6pt inside that box at the top
# and bottom and gives its right 12pt to the tip: pad the label by that much so that it stays inside.
CDS_MARGIN = "0.24,0.14"

STYLES: dict[str, NodeStyle] = {
    "input": NodeStyle("輸入", "invhouse", "#dbeafe", "#1d4ed8"),
    "constant": NodeStyle("常數", "cylinder", "#f3f4f6", "#6b7280"),
    "op": NodeStyle("op", "box", "#fff7ed", "#c2410c"),
    "observer": NodeStyle("observer", "octagon", "#fef9c3", "#a16207"),
    "quantize": NodeStyle("quantize", "cds", "#fee2e2", "#b91c1c", margin=CDS_MARGIN),
    "dequantize": NodeStyle("dequantize", "cds", "#e0e7ff", "#4338ca", margin=CDS_MARGIN),
    "output": NodeStyle("輸出", "house", "#f3e8ff", "#7e22ce"),
    "guard": NodeStyle("guard", "box", "#ffffff", "#9ca3af", dashed=True),
    "module": NodeStyle("module", "box3d", "#ecfeff", "#0e7490"),
}


def node_kind(gm: GraphModule, node: Node) -> str:
    """The drawing kind of ``node``: a key of ``STYLES``."""
    if node.op == "placeholder":
        return "input"
    if node.op == "get_attr":
        return "constant"
    if node.op == "output":
        return "output"
    if node.op == "call_module":
        if str(node.target).startswith("_guards"):
            return "guard"
        module = gm.get_submodule(str(node.target))
        return "observer" if is_observer(module) else "module"
    target = str(node.target)
    if "dequantize" in target:
        return "dequantize"
    if "quantize" in target:
        return "quantize"
    return "op"


def target_text(gm: GraphModule, node: Node) -> str:
    """A short description of what ``node`` runs: ``aten.conv2d.default``, an observer class…"""
    if node.op == "call_function":
        text = str(node.target)
        for prefix in ("torch.ops.", "<built-in function ", "<function "):
            text = text.removeprefix(prefix)
        text = text.rstrip(">")
        if "quantize" in text:
            text = text.replace("quantized_decomposed.", "")
            extra = _qparams_text(node)
            return f"{text}\n{extra}" if extra else text
        return text
    if node.op == "call_module":
        if str(node.target).startswith("_guards"):
            return "guard"
        module = gm.get_submodule(str(node.target))
        if is_observer(module):
            return _observer_text(module)
        return type(module).__name__
    if node.op == "get_attr":
        value = getattr_path(gm, str(node.target))
        shape = tuple(getattr(value, "shape", ()))
        dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
        return f"{dtype} {list(shape)}" if shape else dtype
    return ""


def getattr_path(gm: GraphModule, target: str) -> Any:
    """``gm.a.b.c`` for the target ``"a.b.c"``; None when it is missing."""
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def _observer_text(module: Any) -> str:
    name = type(module).__name__
    min_val = getattr(module, "min_val", None)
    if min_val is None or min_val.numel() != 1 or not bool(min_val.isfinite()):
        return name
    try:
        scale, zero_point = module.calculate_qparams()
    except Exception:  # an observer that cannot compute qparams yet: show the class only
        return name
    return f"{name}\nscale={float(scale):.6g} zp={int(zero_point)}"


def _qparams_text(node: Node) -> str:
    args = node.args
    if len(args) >= 3 and isinstance(args[1], int | float) and isinstance(args[2], int):
        return f"scale={args[1]:.6g} zp={args[2]}"
    return ""


def _neighbourhood(gm: GraphModule, focus: Sequence[str], hops: int) -> set[str]:
    by_name = {n.name: n for n in gm.graph.nodes}
    missing = [name for name in focus if name not in by_name]
    if missing:
        raise KeyError(f"focus 指定的 node 不在圖上：{missing}；圖上有 {sorted(by_name)}")
    keep = set(focus)
    frontier = set(focus)
    for _ in range(hops):
        grown: set[str] = set()
        for name in frontier:
            node = by_name[name]
            grown |= {n.name for n in node.all_input_nodes} | {u.name for u in node.users}
        frontier = grown - keep
        keep |= grown
    return keep


@dataclass
class GraphPicture:
    """One graph prepared for drawing: the nodes to show, their kinds, labels and notes."""

    gm: GraphModule
    notes: Mapping[str, str] = field(default_factory=dict)
    focus: Sequence[str] | None = None
    hops: int = 1
    guards: bool = False
    highlight: frozenset[str] = frozenset()

    def nodes(self) -> list[Node]:
        keep = _neighbourhood(self.gm, self.focus, self.hops) if self.focus is not None else None
        shown = []
        for node in self.gm.graph.nodes:
            if keep is not None and node.name not in keep:
                continue
            if not self.guards and node_kind(self.gm, node) == "guard":
                continue
            shown.append(node)
        return shown

    def text_lines(self) -> list[str]:
        lines = []
        shown = self.nodes()
        names = {n.name for n in shown}
        for node in shown:
            kind = node_kind(self.gm, node)
            inputs = [n.name if n.name in names else f"({n.name})" for n in node.all_input_nodes]
            what = target_text(self.gm, node).replace("\n", ", ")
            line = f"  {node.name} [{STYLES[kind].kind}]"
            if what and kind not in ("input", "output"):
                line += f" {what}"
            if inputs:
                line += " ← " + ", ".join(inputs)
            if node.name in self.highlight:
                line += "  ＊新"
            lines.append(line)
            note = self.notes.get(node.name)
            if note:
                lines.extend(f"      {part}" for part in str(note).splitlines())
        return lines

    def dot_body(self, prefix: str = "") -> list[str]:
        """DOT statements for the nodes and edges; ``prefix`` keeps ids unique across stages."""
        out = []
        shown = self.nodes()
        names = {n.name for n in shown}
        for node in shown:
            kind = node_kind(self.gm, node)
            style = STYLES[kind]
            attrs = {
                "shape": style.shape,
                "style": "filled,dashed" if style.dashed else "filled",
                "fillcolor": style.fill,
                "color": style.border,
                "label": _html_label(node.name, target_text(self.gm, node), self.notes.get(node.name)),
            }
            if style.margin:
                attrs["margin"] = style.margin
            if node.name in self.highlight:
                attrs.update(color=NEW_OBSERVER_COLOR, penwidth="3")
            out.append(f'"{prefix}{node.name}" [{_attrs(attrs)}];')
        cut = 0
        for node in shown:
            for src in node.all_input_nodes:
                if src.name in names:
                    out.append(f'"{prefix}{src.name}" -> "{prefix}{node.name}";')
                else:
                    cut += 1
                    out.append(f'"{prefix}…{cut}" [shape=plaintext, label="⋯", fontcolor="#9ca3af"];')
                    out.append(f'"{prefix}…{cut}" -> "{prefix}{node.name}" [style=dashed, color="#9ca3af"];')
            hidden_users = [u for u in node.users if u.name not in names and node_kind(self.gm, u) != "guard"]
            if hidden_users and self.focus is not None:
                cut += 1
                out.append(f'"{prefix}…{cut}" [shape=plaintext, label="⋯", fontcolor="#9ca3af"];')
                out.append(f'"{prefix}{node.name}" -> "{prefix}…{cut}" [style=dashed, color="#9ca3af"];')
        return out


def _attrs(attrs: Mapping[str, str]) -> str:
    parts = []
    for key, value in attrs.items():
        if key == "label" and value.startswith("<"):
            parts.append(f"{key}={value}")
        else:
            parts.append(f'{key}="{value}"')
    return ", ".join(parts)


def _html_label(name: str, what: str, note: str | None) -> str:
    rows = [f"<TR><TD><B>{html.escape(name)}</B></TD></TR>"]
    for line in what.splitlines():
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="#4b5563">{html.escape(line)}</FONT></TD></TR>')
    if note:
        for line in str(note).splitlines():
            rows.append(f'<TR><TD><FONT POINT-SIZE="10" COLOR="#0f766e">{html.escape(line)}</FONT></TD></TR>')
    return f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="1">{"".join(rows)}</TABLE>>'


def dot_available() -> bool:
    """True when graphviz's ``dot`` program is on the PATH."""
    return shutil.which("dot") is not None


def _run_dot(dot_source: str, *options: str) -> bytes:
    result = subprocess.run(["dot", *options], input=dot_source.encode(), capture_output=True, check=True)
    return result.stdout


def render_svg(dot_source: str) -> str:
    """Run ``dot -Tsvg`` on ``dot_source`` and return the SVG text (sized in points, as dot writes it)."""
    svg = _run_dot(dot_source, "-Tsvg").decode()
    return svg[svg.index("<svg") :]


def render_png(dot_source: str, dpi: float = 96.0) -> bytes:
    """Run ``dot -Tpng`` on ``dot_source`` at ``dpi`` (96: a point is 4/3 px, as a browser draws the SVG).

    dot's PNG carries no timestamp: the same source gives the same bytes.
    """
    return _run_dot(dot_source, "-Tpng", f"-Gdpi={dpi:g}")


def cjk_fonts() -> list[str]:
    """The families of ``FONT_FAMILIES`` that fontconfig knows with Chinese (zh-tw) glyphs, in order.

    Empty where none is installed (every Chinese character of a drawing is then a box) or where
    fontconfig's ``fc-list`` is missing (macOS and Windows have their own fonts in the list).
    """
    if shutil.which("fc-list") is None:
        return []
    listed = subprocess.run(["fc-list", ":lang=zh-tw", "family"], capture_output=True, text=True, check=False).stdout
    installed = {name.strip() for line in listed.splitlines() for name in line.split(",")}
    return [family for family in FONT_FAMILIES if family in installed]


_SIZE = re.compile(r'<svg[^>]*?width="([0-9.]+)pt"[^>]*?height="([0-9.]+)pt"')
_SIZE_ATTRS = re.compile(r'width="[0-9.]+pt" height="[0-9.]+pt"')


def svg_size(svg: str) -> tuple[float, float]:
    """The (width, height) in points of an SVG that dot wrote."""
    match = _SIZE.search(svg)
    if match is None:
        raise ValueError("not an SVG written by dot: no width/height in pt")
    return float(match.group(1)), float(match.group(2))


@dataclass(frozen=True)
class Layout:
    """Where a drawing's pictures go, in points, and the resolution that makes it fit ``MAX_WIDTH_PX``.

    ``places`` are the top-left corners of the panels; ``title_place`` that of the title picture.
    ``dpi`` is 96 at full size (a point is 4/3 px) and less when the whole is shrunk to fit.
    """

    width: float
    height: float
    places: tuple[tuple[float, float], ...]
    title_place: tuple[float, float] | None
    columns: int
    dpi: float

    @property
    def scale(self) -> float:
        """The size on screen relative to full size."""
        return self.dpi / 96.0

    def px(self, points: float) -> float:
        """``points`` in pixels (CSS px, and PNG pixels) at this layout's resolution."""
        return points * self.dpi / 72.0


def fit_dpi(width: float) -> float:
    """The resolution at which ``width`` points fit ``MAX_WIDTH_PX`` pixels: 96, or less (to 1/100 dpi)."""
    return min(96.0, math.floor(MAX_WIDTH_PX * 72.0 / width * 100.0) / 100.0)


def layout(
    sizes: Sequence[tuple[float, float]],
    columns: int = 2,
    title: tuple[float, float] | None = None,
    gap: float = 16.0,
) -> Layout:
    """Lay pictures of ``sizes`` (points) out up to ``columns`` to a row, under a title picture.

    The panels stand side by side only if that fits ``MAX_WIDTH_PX`` shrunk by no more than
    ``MIN_SIDE_BY_SIDE_SCALE`` (else the text gets too small to read); otherwise fewer to a row,
    down to one under the other. Each panel is centred in its cell; what is still too wide is shrunk.
    """
    count = len(sizes)
    for per_row in range(max(1, min(columns, count)), 0, -1):
        rows = [list(range(i, min(i + per_row, count))) for i in range(0, count, per_row)]
        col_widths = [max(sizes[row[c]][0] for row in rows if c < len(row)) for c in range(per_row)]
        panels_width = sum(col_widths) + gap * (per_row - 1)
        width = max(panels_width, title[0] if title else 0.0)
        if width * PX_PER_PT * MIN_SIDE_BY_SIDE_SCALE <= MAX_WIDTH_PX:
            break
    top = title[1] if title else 0.0
    places: list[tuple[float, float]] = []
    y = top
    for row in rows:
        x = (width - panels_width) / 2
        for column, index in enumerate(row):
            places.append((x + (col_widths[column] - sizes[index][0]) / 2, y))
            x += col_widths[column] + gap
        y += max(sizes[i][1] for i in row) + gap
    height = y - gap
    title_place = ((width - title[0]) / 2, 0.0) if title else None
    return Layout(width, height, tuple(places), title_place, per_row, fit_dpi(width))


def compose_svg(svgs: Sequence[str], plan: Layout, title_svg: str | None = None) -> str:
    """One SVG of the panels ``svgs`` (and the title picture) placed by ``plan``, sized in px to fit."""
    size = f'width="{plan.px(plan.width):.0f}px" height="{plan.px(plan.height):.0f}px"'
    if len(svgs) == 1 and title_svg is None:
        return _SIZE_ATTRS.sub(size, svgs[0], count=1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" {size} viewBox="0 0 {plan.width:.2f} {plan.height:.2f}">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    placed = list(zip(svgs, plan.places, strict=True))
    if title_svg is not None and plan.title_place is not None:
        placed.insert(0, (title_svg, plan.title_place))
    for svg, (x, y) in placed:
        width, height = svg_size(svg)
        inner = _SIZE_ATTRS.sub("", svg, count=1)
        inner = inner.replace("<svg", f'<svg x="{x:.2f}" y="{y:.2f}" width="{width:.2f}" height="{height:.2f}"', 1)
        parts.append(inner)
    parts.append("</svg>")
    return "\n".join(parts)


def compose_png(sources: Sequence[str], plan: Layout, title_source: str | None = None) -> bytes:
    """One PNG of the DOT ``sources`` (and the title) rendered at ``plan.dpi`` and placed by ``plan``.

    The picture is stored with a 256-colour palette (a third of the size, no visible change on
    flat-coloured drawings) and no metadata, so that the same drawing gives the same bytes.
    """
    from PIL import Image

    pictures = [(render_png(source, plan.dpi), place) for source, place in zip(sources, plan.places, strict=True)]
    if title_source is not None and plan.title_place is not None:
        pictures.insert(0, (render_png(title_source, plan.dpi), plan.title_place))
    if len(pictures) == 1:
        canvas = Image.open(io.BytesIO(pictures[0][0])).convert("RGB")
    else:
        canvas = Image.new("RGB", (round(plan.px(plan.width)), round(plan.px(plan.height))), "white")
        for png, (x, y) in pictures:
            canvas.paste(Image.open(io.BytesIO(png)).convert("RGB"), (round(plan.px(x)), round(plan.px(y))))
    out = io.BytesIO()
    canvas.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
    return out.getvalue()


def _title_dot(title: str) -> str:
    return "\n".join(
        [
            "digraph T {",
            f'graph [fontname="{FONT}", fontsize=14, labelloc=t, label=<<B>{html.escape(title)}</B>>];',
            "}",
        ]
    )


@dataclass
class Drawing:
    """A drawing that shows as a picture (PNG and SVG) in a notebook and as text elsewhere.

    It holds one DOT graph per panel; several panels are laid out up to ``columns`` to a row
    (see ``layout``) under ``title``. One panel carries its title in its own DOT graph.
    """

    title: str | None
    dot_sources: list[str]
    text: str
    columns: int = 2

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        if not dot_available():
            return {"text/plain": f"{DOT_MISSING}\n{self.text}"}
        svg, png = self.render()
        return {"image/png": base64.b64encode(png).decode("ascii"), "image/svg+xml": svg, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text if dot_available() else f"{DOT_MISSING}\n{self.text}"

    @property
    def dot_source(self) -> str:
        """The DOT source (of every panel, one after the other)."""
        return "\n".join(self.dot_sources)

    def _title_source(self) -> str | None:
        return _title_dot(self.title) if self.title and len(self.dot_sources) > 1 else None

    def plan(self) -> tuple[Layout, list[str], str | None]:
        """The layout, the panels' SVGs and the title's SVG (needs ``dot``)."""
        svgs = [render_svg(source) for source in self.dot_sources]
        title_source = self._title_source()
        title_svg = render_svg(title_source) if title_source else None
        title_size = svg_size(title_svg) if title_svg else None
        return layout([svg_size(svg) for svg in svgs], self.columns, title_size), svgs, title_svg

    def render(self) -> tuple[str, bytes]:
        """The SVG text and the PNG bytes of the same picture, fitted to ``MAX_WIDTH_PX`` (needs ``dot``)."""
        plan, svgs, title_svg = self.plan()
        return compose_svg(svgs, plan, title_svg), compose_png(self.dot_sources, plan, self._title_source())

    def svg(self) -> str:
        """The SVG text (needs ``dot``)."""
        plan, svgs, title_svg = self.plan()
        return compose_svg(svgs, plan, title_svg)

    def png(self) -> bytes:
        """The PNG bytes (needs ``dot``)."""
        plan, _, _ = self.plan()
        return compose_png(self.dot_sources, plan, self._title_source())


def _graph_header(title: str | None, bold: bool = True) -> list[str]:
    lines = [
        "digraph G {",
        f'graph [rankdir=TB, fontname="{FONT}", fontsize=14, labelloc=t, nodesep=0.3, ranksep=0.35];',
        f'node [fontname="{FONT}", fontsize=11, margin="0.08,0.04"];',
        'edge [color="#4b5563", arrowsize=0.7];',
    ]
    if title:
        text = html.escape(title)
        lines.append(f"label=<<B>{text}</B>>;" if bold else f"label=<{text}>;")
    return lines


def draw(
    gm: GraphModule,
    notes: Mapping[str, str] | None = None,
    title: str | None = None,
    focus: str | Sequence[str] | None = None,
    hops: int = 1,
    guards: bool = False,
) -> Drawing:
    """Draw an FX graph.

    Args:
        gm: the graph module to draw.
        notes: ``{node name: text}`` written under those nodes (several lines allowed).
        title: a title above the drawing.
        focus: a node name or names; only nodes within ``hops`` edges of them are drawn.
        hops: how far from ``focus`` to draw (0 draws exactly the focus nodes).
        guards: also draw the ``_guards_fn`` node that ``torch.export`` adds.
    """
    names = [focus] if isinstance(focus, str) else (list(focus) if focus is not None else None)
    picture = GraphPicture(gm, notes or {}, names, hops, guards)
    dot = "\n".join([*_graph_header(title), *picture.dot_body(), "}"])
    text = "\n".join(([title] if title else []) + picture.text_lines())
    return Drawing(title, [dot], text)


def _observer_positions(gm: GraphModule) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each observer node's position: (what it observes, who reads it), by node names.

    Observer node names are renumbered by prepare_pt2e whenever a label is added, so
    "the same observer" across two stages means "the same position", not the same name.
    """
    positions = {}
    for node in gm.graph.nodes:
        if node.op == "call_module" and node_kind(gm, node) == "observer":
            source = node.args[0]
            source_name = source.name if isinstance(source, Node) else repr(source)
            positions[node.name] = (source_name, tuple(sorted(u.name for u in node.users)))
    return positions


def draw_stages(stages: Sequence[tuple[GraphModule, str]], title: str | None = None, columns: int = 2) -> Drawing:
    """Draw several versions of a graph, ``columns`` to a row, each under its own title.

    Observers that are new at a stage (at a position, an edge between two named
    nodes, where the stage before had none) are framed green.
    """
    sources = []
    texts = [title] if title else []
    previous: set[tuple[str, tuple[str, ...]]] = set()
    for index, (gm, stage_title) in enumerate(stages):
        positions = _observer_positions(gm)
        new = frozenset(name for name, where in positions.items() if where not in previous)
        picture = GraphPicture(gm, highlight=new)
        previous = set(positions.values())
        sources.append("\n".join([*_graph_header(f"{index + 1}. {stage_title}", bold=False), *picture.dot_body(), "}"]))
        texts.append(f"[{index + 1}] {stage_title}")
        texts.extend(picture.text_lines())
    return Drawing(title, sources, "\n".join(texts), columns)


def annotation_notes(gm: GraphModule, unlabeled: bool = False) -> dict[str, str]:
    """A note per annotated node, for ``draw(notes=...)``.

    One line per input edge ``邊 上游：規格``, one line ``輸出：規格`` when the output
    is labelled; ``不量化`` stands for a None spec. With ``unlabeled=True`` every
    op without an annotation gets the note ``沒有標籤``.
    """
    notes: dict[str, str] = {}
    for node in gm.graph.nodes:
        ann = annotation_of(node)
        if ann is None:
            if unlabeled and node.op == "call_function":
                notes[node.name] = "沒有標籤"
            continue
        lines = [f"邊 {producer.name}：{spec_short(spec)}" for producer, spec in ann.input_qspec_map.items()]
        if ann.output_qspec is not None:
            lines.append(f"輸出：{spec_short(ann.output_qspec)}")
        if lines:  # XNNPACKQuantizer leaves empty annotations on constants: nothing to say
            notes[node.name] = "\n".join(lines)
    return notes


LEFT = ' style="text-align: left"'  # JupyterLab right-aligns output tables unless a cell says otherwise


@dataclass
class Table:
    """Rows that render as a left-aligned HTML table in a notebook and as a Markdown table in plain text."""

    rows: list[list[Any]]
    headers: list[str]

    def _repr_html_(self) -> str:
        head = "".join(f"<th{LEFT}>{html.escape(str(h))}</th>" for h in self.headers)
        body = "".join(
            "<tr>" + "".join(f"<td{LEFT}>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        # cells unpadded, as the seed chapters print them; ":---" asks a Markdown renderer to left-align
        lines = ["| " + " | ".join(map(str, self.headers)) + " |", "|" + ":---|" * len(self.headers)]
        lines += ["| " + " | ".join(map(str, row)) + " |" for row in self.rows]
        return "\n".join(lines)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> Table:
    """A table of ``rows`` under ``headers``; shows as HTML in a notebook."""
    return Table([list(r) for r in rows], list(headers))

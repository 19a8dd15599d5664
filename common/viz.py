"""Drawings of FX graphs and tables that render inline in JupyterLab.

``draw`` turns a GraphModule into a graphviz drawing (inline SVG) whose node kinds
are told apart by colour and shape; notes appear under nodes. Where graphviz's
``dot`` program is missing, every drawing says so in one line and falls back to a
readable text form of the graph. ``table`` renders rows as an HTML table in a
notebook and as a plain-text table elsewhere.
"""

from __future__ import annotations

import html
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

FONT = "Noto Sans CJK TC, Noto Sans TC, PingFang TC, Microsoft JhengHei, sans-serif"
NEW_OBSERVER_COLOR = "#16a34a"


@dataclass(frozen=True)
class NodeStyle:
    """How one kind of node looks: its Chinese name, shape and fill colour."""

    kind: str
    shape: str
    fill: str
    border: str = "#374151"
    dashed: bool = False


STYLES: dict[str, NodeStyle] = {
    "input": NodeStyle("輸入", "invhouse", "#dbeafe", "#1d4ed8"),
    "constant": NodeStyle("常數", "cylinder", "#f3f4f6", "#6b7280"),
    "op": NodeStyle("op", "box", "#fff7ed", "#c2410c"),
    "observer": NodeStyle("observer", "octagon", "#fef9c3", "#a16207"),
    "quantize": NodeStyle("quantize", "cds", "#fee2e2", "#b91c1c"),
    "dequantize": NodeStyle("dequantize", "cds", "#e0e7ff", "#4338ca"),
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


def render_svg(dot_source: str) -> str:
    """Run ``dot -Tsvg`` on ``dot_source`` and return the SVG text."""
    result = subprocess.run(["dot", "-Tsvg"], input=dot_source.encode(), capture_output=True, check=True)
    svg = result.stdout.decode()
    return svg[svg.index("<svg") :]


@dataclass
class Drawing:
    """A drawing that shows as inline SVG in a notebook and as text elsewhere.

    It holds one DOT graph per panel; several panels are laid out ``columns`` to a row
    in one SVG under ``title``.
    """

    title: str | None
    dot_sources: list[str]
    text: str
    columns: int = 2

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        if not dot_available():
            return {"text/plain": f"{DOT_MISSING}\n{self.text}"}
        return {"image/svg+xml": self.svg(), "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text if dot_available() else f"{DOT_MISSING}\n{self.text}"

    @property
    def dot_source(self) -> str:
        """The DOT source (of every panel, one after the other)."""
        return "\n".join(self.dot_sources)

    def svg(self) -> str:
        """The SVG text (needs ``dot``)."""
        panels = [render_svg(source) for source in self.dot_sources]
        if len(panels) == 1:
            return panels[0]
        return grid_svg(panels, self.columns, self.title)


_SIZE = re.compile(r'<svg[^>]*?width="([0-9.]+)pt"[^>]*?height="([0-9.]+)pt"')


def grid_svg(panels: Sequence[str], columns: int, title: str | None, gap: float = 16.0) -> str:
    """Lay SVG panels out ``columns`` to a row in one SVG, with ``title`` on top."""
    sizes = []
    for panel in panels:
        match = _SIZE.search(panel)
        sizes.append((float(match.group(1)), float(match.group(2))) if match else (300.0, 300.0))
    rows = [list(range(i, min(i + columns, len(panels)))) for i in range(0, len(panels), columns)]
    col_widths = [max(sizes[r[c]][0] for r in rows if c < len(r)) for c in range(min(columns, len(panels)))]
    row_heights = [max(sizes[i][1] for i in row) for row in rows]
    top = 28.0 if title else 0.0
    width = sum(col_widths) + gap * (len(col_widths) - 1)
    height = top + sum(row_heights) + gap * (len(rows) - 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}pt" height="{height:.0f}pt" '
        f'viewBox="0 0 {width:.0f} {height:.0f}">'
    ]
    if title:
        parts.append(
            f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" font-family="{FONT}" font-size="14" '
            f'font-weight="bold">{html.escape(title)}</text>'
        )
    y = top
    for row, row_height in zip(rows, row_heights, strict=True):
        x = 0.0
        for column, index in enumerate(row):
            inner = re.sub(r'width="[0-9.]+pt" height="[0-9.]+pt"', "", panels[index], count=1)
            inner = inner.replace(
                "<svg", f'<svg x="{x:.0f}" y="{y:.0f}" width="{sizes[index][0]:.0f}" height="{sizes[index][1]:.0f}"', 1
            )
            parts.append(inner)
            x += col_widths[column] + gap
        y += row_height + gap
    parts.append("</svg>")
    return "\n".join(parts)


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


@dataclass
class Table:
    """Rows that render as an HTML table in a notebook and as a pipe table in plain text."""

    rows: list[list[Any]]
    headers: list[str]

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in self.headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in self.rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        lines = ["| " + " | ".join(map(str, self.headers)) + " |", "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(map(str, row)) + " |" for row in self.rows]
        return "\n".join(lines)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> Table:
    """A table of ``rows`` under ``headers``; shows as HTML in a notebook."""
    return Table([list(r) for r in rows], list(headers))

"""A picture for the feedback: the smallest failing hidden case, as the student's program labelled it.

For graph exercises the evidence holds the student's labels (``label_groups``: each labelled position,
its spec and its sharing group) beside the answer key's. The judge keeps the smallest case where the two
differ (``autograder.engine.diagnose.failing_case``); ``draw_case`` draws it with graphviz: every labelled edge with
the student's spec and sharing group (one colour a group), the wrong ones red and thick, with one line
saying what they should be; a position the student left out is a dashed red edge. It shows no more of
the answer than the check's own message does (which positions share, which should have a label).

Everything drawn comes from a submission's evidence: the text is cleaned and quoted for DOT, and the SVG is
shown as an image (``results.picture_img``), so nothing in it runs.
"""

from __future__ import annotations

import hashlib
from typing import Any

from autograder.reports.hygiene import clean
from selfcheck.evidence import spec_text

PALETTE = ("#2563eb", "#9333ea", "#0d9488", "#ca8a04", "#db2777", "#4b5563")
WRONG = "#dc2626"
FONT = "Noto Sans CJK TC, Noto Sans TC, PingFang TC, Microsoft JhengHei, sans-serif"


def _quote(text: object) -> str:
    """A DOT double-quoted string of cleaned text."""
    value = clean(text, 200).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{value}"'


def _node_id(name: str) -> str:
    return "n" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]


def _split(position: str) -> tuple[str, str | None]:
    """``"a → b"`` → (a, b); ``"b 的輸出"`` → (b, None)."""
    if " → " in position:
        source, _, consumer = position.partition(" → ")
        return source, consumer
    return position.removesuffix(" 的輸出"), None


def _groups(positions: dict[str, Any]) -> dict[str, list[str]]:
    members: dict[str, list[str]] = {}
    for position, entry in sorted(positions.items()):
        if isinstance(entry, dict):
            members.setdefault(str(entry.get("group")), []).append(position)
    return members


def _partners(positions: dict[str, Any], position: str) -> list[str]:
    group = positions.get(position, {}).get("group") if isinstance(positions.get(position), dict) else None
    return sorted(p for p, e in positions.items() if isinstance(e, dict) and e.get("group") == group and p != position)


def _spec_brief(entry: Any) -> str:
    spec = entry.get("spec") if isinstance(entry, dict) else None
    text = spec_text(spec, none="沒有 spec")
    return text.replace("per_tensor_", "").replace("per_channel_", "per-channel ").replace("Observer", "")


def _group_of(positions: dict[str, Any], position: str) -> str | None:
    entry = positions.get(position)
    return str(entry.get("group")) if isinstance(entry, dict) else None


def _main_part(members: list[str], group_of: dict[str, str | None]) -> str | None:
    """The group that holds most of ``members`` on the other side (None on a tie: no part is the main one)."""
    counts: dict[str | None, int] = {}
    for member in members:
        counts[group_of[member]] = counts.get(group_of[member], 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    if len(ranked) > 1 and ranked[0] == ranked[1]:
        return None
    return max(counts, key=lambda group: counts[group])


def sharing_mistakes(got_positions: dict[str, Any], want_positions: dict[str, Any]) -> dict[str, str]:
    """The positions labelled on both sides whose *own* sharing is wrong, with what it should be.

    A group of the key split in two (the output left out of an add's group) marks the members outside the part
    that holds most of the group, not every member: their partners changed too, but they are where they belong.
    Likewise a group of the student's that joins positions of two of the key's marks the ones that do not belong.
    """
    both = [p for p in sorted(got_positions) if p in want_positions]
    got_group = {p: _group_of(got_positions, p) for p in both}
    want_group = {p: _group_of(want_positions, p) for p in both}
    mistakes: dict[str, str] = {}
    for groups, other in ((want_group, got_group), (got_group, want_group)):
        members: dict[str | None, list[str]] = {}
        for position in both:
            members.setdefault(groups[position], []).append(position)
        for group in members.values():
            main = _main_part(group, other)
            for position in group:
                if position in mistakes or other[position] == main:
                    continue
                partners = _partners(want_positions, position)
                mistakes[position] = "✗ 應該和 " + "、".join(partners) + " 共用" if partners else "✗ 應該自己一組"
    return mistakes


def _ends(position: str) -> set[str]:
    source, consumer = _split(position)
    return {source, consumer if consumer is not None else f"{source} 的輸出"}


def cropped(got_positions: dict[str, Any], want_positions: dict[str, Any], wrong: set[str]) -> set[str]:
    """The positions to draw: the wrong ones and their neighbours (positions that touch one of their nodes); all of
    them when none is wrong or the graph is small (``SMALL_GRAPH`` positions)."""
    every = set(got_positions) | set(want_positions)
    if not wrong or len(every) <= SMALL_GRAPH:
        return every
    touched = set().union(*(_ends(p) for p in wrong))
    return {p for p in every if p in wrong or _ends(p) & touched}


SMALL_GRAPH = 8
"""A failing case with at most this many labelled positions is drawn whole; a bigger one is cropped to its wrong
positions and their neighbours, so that it stays legible at a phone's width."""


def _labels_dot(got: dict[str, Any], want: dict[str, Any], title: str) -> str:
    got_positions, want_positions = got["positions"], want["positions"]
    sharing = sharing_mistakes(got_positions, want_positions)
    wrong_positions = {
        p
        for p in set(got_positions) | set(want_positions)
        if p not in got_positions
        or p not in want_positions
        or got_positions[p].get("spec") != want_positions[p].get("spec")
        or p in sharing
    }
    shown = cropped(got_positions, want_positions, wrong_positions)
    if shown != set(got_positions) | set(want_positions):
        title += f"（只畫出錯的位置和它們旁邊的，{len(shown)} 個位置，共 {len(set(got_positions) | set(want_positions))} 個）"
    letters = {
        group: chr(ord("A") + index)
        for index, (group, members) in enumerate(g for g in _groups(got_positions).items() if len(g[1]) > 1)
    }
    colours = {group: PALETTE[index % len(PALETTE)] for index, group in enumerate(letters)}
    lines = [
        "digraph case {",
        f'  graph [rankdir=TB, fontname="{FONT}", fontsize=12, labelloc=t, label={_quote(title)}, nodesep=0.4];',
        f'  node [fontname="{FONT}", fontsize=11, shape=box, style="rounded,filled", fillcolor="#f3f4f6", color="#9ca3af"];',
        f'  edge [fontname="{FONT}", fontsize=10, color="#6b7280"];',
    ]
    nodes: dict[str, str] = {}

    def node(name: str, shape: str = "box") -> str:
        if name not in nodes:
            nodes[name] = _node_id(name)
            extra = ', shape=plaintext, style=""' if shape == "out" else ""
            label = "（輸出）" if shape == "out" else name
            lines.append(f"  {nodes[name]} [label={_quote(label)}{extra}];")
        return nodes[name]

    for position in sorted(shown):
        mine, key = got_positions.get(position), want_positions.get(position)
        source, consumer = _split(position)
        head = node(consumer) if consumer is not None else node(f"{source} 的輸出", "out")
        tail = node(source)
        if mine is None:
            label = f"沒有標籤\n✗ 應該有標籤（{_spec_brief(key)}）"
            lines.append(
                f'  {tail} -> {head} [label={_quote(label)}, color="{WRONG}", fontcolor="{WRONG}", style=dashed];'
            )
            continue
        group = str(mine.get("group"))
        share = f"共用組 {letters[group]}" if group in letters else "自己一組"
        label = f"{_spec_brief(mine)}\n{share}"
        wrong = ""
        if key is None:
            wrong = "✗ 不該有標籤"
        elif mine.get("spec") != key.get("spec"):
            wrong = f"✗ 應該是 {_spec_brief(key)}"
        elif position in sharing:
            wrong = sharing[position]
        colour = WRONG if wrong else colours.get(group, "#6b7280")
        width = 2.6 if wrong else 1.6
        text = f"{label}\n{wrong}" if wrong else label
        lines.append(
            f'  {tail} -> {head} [label={_quote(text)}, color="{colour}", fontcolor="{colour if wrong else "#374151"}",'
            f" penwidth={width}];"
        )
    lines.append("}")
    return "\n".join(lines)


def draw_case(case: dict[str, Any]) -> dict[str, str] | None:
    """``{"caption", "svg"}`` for a failing case chosen by ``autograder.engine.diagnose.failing_case``; None when
    dot is missing or the case cannot be drawn."""
    from common.viz import dot_available, render_svg

    if not dot_available():
        return None
    try:
        svg = render_svg(_labels_dot(case["got"], case["want"], "一個你沒看過的模型：你的程式貼的標籤"))
    except Exception:  # a drawing is a courtesy: the feedback stands without it
        return None
    caption = "出錯的隱藏例子裡最小的一個。每條邊寫著你貼的規格與共用組；紅色是不對的位置，虛線是少貼的"
    return {"caption": caption, "svg": svg}

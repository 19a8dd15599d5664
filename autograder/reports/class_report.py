"""The class report: one self-contained HTML file an instructor opens after grading (``graded/<module>-report.html``).

It answers what instructors ask after an assignment: which exercise the class found hard (score
distributions, facility per exercise and per check), which misconception is common enough for the next
lecture (the causes the feedback named, with the chapter section), which check deserves a look (never
failed, never passed, or passed more by the weaker students), and who crashed, hit a limit, left work
empty or tampered. It ends with how to reproduce the grading and what the gradebook's columns mean.
Plots are matplotlib SVG (``autograder.reports.plots``) embedded as images; long lists fold
(``<details>``), so a class of 500 reads on one screen. Everything shown went through ``hygiene.clean``.
"""

from __future__ import annotations

import base64
import html
import statistics as stats
from pathlib import Path

from autograder.reports import plots
from autograder.reports.class_record import ClassRecord
from autograder.reports.hygiene import clean
from autograder.reports.statistics import (
    MIN_STUDENTS,
    OPERATION_LABELS,
    OPERATION_MEANINGS,
    CheckStats,
    ClassStats,
    class_stats,
    histogram,
)

SHOWN_MISCONCEPTIONS = 12
SHOWN_FLAGGED = 10
CSV_COLUMNS = {
    "student": "學生（繳交資料夾的名字，通常是學號）",
    "M0x-y": "這本 notebook 的分數（每本一欄）",
    "total": "這個模組的總分",
    "max": "這個模組的滿分",
    "tampering": "評分時記下的竄改紀錄有幾則（0 是沒有；不是扣分的分數，被竄改的部分已經不計分）",
    "tampering_reason": "每本 notebook 最明確的一則竄改紀錄",
    "seed": "這位學生評分時隱藏例子的亂數種子（--seed 加上它可重現）",
}


def _e(text: object) -> str:
    return html.escape(clean(text), quote=True)


def _pct(value: float) -> str:
    """``0.83`` → ``83%``; near but not at 0 or 1 with a decimal, so that 99.5 % never reads as 100 %."""
    if 0 < value < 0.005 or 0.995 <= value < 1:
        return f"{value:.1%}"
    return f"{value:.0%}"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _points(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _img(svg: str, alt: str) -> str:
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<figure><img class="plot" alt="{_e(alt)}" src="data:image/svg+xml;base64,{data}"></figure>'


def _table(header: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """An HTML table; cells are already escaped HTML. The ``numeric`` columns align right."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _cols(*indices: int) -> frozenset[int]:
    return frozenset(indices)


def _folded(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{summary}</summary>{body}</details>"


def _names(names: list[str]) -> str:
    return '<p class="names">' + "、".join(_e(n) for n in sorted(names)) + "</p>"


# --- the sections -----------------------------------------------------------------------------------------


def summary_section(s: ClassStats) -> str:
    totals = [s.scores[name]["total"] for name in s.students]
    parts = [f"<p>交了作業的學生：<b>{len(s.students)}</b> 位"]
    if s.absent:
        parts.append(f"（另有 {len(s.absent)} 位一本都沒交，不算進統計）")
    parts.append(f"。滿分 {_points(s.maximum)}。")
    if totals:
        parts.append(
            f"平均 {_points(stats.mean(totals))}，中位數 {_points(stats.median(totals))}，"
            f"滿分的 {sum(t >= s.maximum - 1e-9 for t in totals)} 位，0 分的 {sum(t <= 0 for t in totals)} 位。"
        )
    parts.append("</p>")
    return "".join(parts)


def distribution_section(s: ClassStats) -> str:
    panels = [(f"{s.module} 總分（滿分 {_points(s.maximum)}）", [s.scores[n]["total"] for n in s.students], s.maximum)]
    panels += [
        (f"{nb}（滿分 {_points(m)}）", [s.scores[n].get(nb, 0.0) for n in s.students], m) for nb, m in s.notebooks
    ]
    picture = plots.histograms([(title, histogram(values, m)) for title, values, m in panels])
    rows = []
    for title, values, maximum in panels:
        if not values:
            continue
        rows.append(
            [
                _e(title),
                _points(stats.mean(values)),
                _points(stats.median(values)),
                str(sum(v >= maximum - 1e-9 for v in values)),
                str(sum(v <= 0 for v in values)),
            ]
        )
    return (
        '<section id="distribution"><h2>分數分布</h2>'
        + _img(picture, f"{s.module} 總分與每本 notebook 的分數分布（直方圖）")
        + _table(["", "平均", "中位數", "滿分人數", "0 分人數"], rows, _cols(1, 2, 3, 4))
        + "</section>"
    )


def _check_row(c: CheckStats) -> list[str]:
    flag = '<span class="flag" title="請看看這項檢查">⚑</span> ' if c.flags else ""
    return [
        flag + _e(c.name),
        _pct(c.facility),
        _num(c.discrimination),
        _num(c.upper_lower),
        f"{_points(c.mean_points)} / {_points(c.points)}",
    ]


def checks_section(s: ClassStats) -> str:
    out = ['<section id="checks"><h2>哪一題難：每一題、每一項檢查</h2>']
    out.append(
        "<p>通過率（facility）是通過的學生比例，只算答案有被評的學生（沒交、沒作答、還沒寫完、當掉或竄改而沒評到的不算，"
        "他們列在「需要處理的學生」）；"
        "鑑別度是「通過這項」與「模組其他部分的分數」的相關係數（point-biserial，越接近 1 越能分出懂與不懂，"
        "負的表示其他部分考得好的反而比較常沒通過）；高低分組差是其他部分分數最高與最低各 27% 學生的通過率相減。</p>"
    )
    flagged = s.flagged
    few = [c for c in s.checks if c.students < MIN_STUDENTS]
    if flagged:
        items = [
            f"<li><b>{_e(c.notebook)}</b>「{_e(c.name)}」（通過率 {_pct(c.facility)}，{c.students} 位）："
            f"{'；'.join(_e(f) for f in c.flags)}</li>"
            for c in flagged
        ]
        shown = "".join(items[:SHOWN_FLAGGED])
        more = (
            _folded(f"其餘 {len(items) - SHOWN_FLAGGED} 項", "<ul>" + "".join(items[SHOWN_FLAGGED:]) + "</ul>")
            if len(items) > SHOWN_FLAGGED
            else ""
        )
        out.append(
            f'<div class="look" id="flagged"><p><b>請看看這 {len(flagged)} 項檢查</b></p><ul>{shown}</ul>{more}</div>'
        )
    elif few:
        out.append(
            f'<p class="ok" id="flagged">沒有標記任何檢查：有 {len(few)} 項檢查被評到的答案少於 {MIN_STUDENTS} 份，'
            "人數太少，通過率與鑑別度說明不了檢查好不好；其餘的每一項都有人通過、有人沒通過，鑑別度也不低。</p>"
        )
    else:
        out.append('<p class="ok" id="flagged">沒有需要特別看的檢查：每一項都有人通過、有人沒通過，鑑別度也不低。</p>')
    exercise_rows = [
        [
            f"{_e(e.notebook)}｜{_e(e.title)}",
            _pct(e.facility),
            _num(e.discrimination),
            f"{_points(e.mean_points)} / {_points(e.points)}",
        ]
        for e in sorted(s.exercises, key=lambda e: e.facility)
    ]
    out.append("<h3>每一題（最難的在前）</h3>")
    out.append(_table(["練習", "滿分的比例", "鑑別度", "平均得分"], exercise_rows, _cols(1, 2, 3)))
    checks = s.checks
    if checks:
        labels = [f"{c.notebook}｜{clean(c.name)[:28]}" for c in checks]
        picture = plots.facility_bars(labels, [c.facility for c in checks], [bool(c.flags) for c in checks])
        out.append(
            _folded("每一項檢查的通過率（圖）", _img(picture, "每一項檢查的通過比例，紅色是請看看的檢查"), open_=True)
        )
    for notebook, _ in s.notebooks:
        rows = []
        for e in (e for e in s.exercises if e.notebook == notebook):
            rows.append(
                [
                    f"<b>{_e(e.title)}</b>",
                    _pct(e.facility),
                    _num(e.discrimination),
                    "",
                    f"{_points(e.mean_points)} / {_points(e.points)}",
                ]
            )
            rows += [_check_row(c) for c in e.checks]
        flagged_here = sum(bool(c.flags) for c in checks if c.notebook == notebook)
        summary = f"{_e(notebook)} 的檢查" + (f"（{flagged_here} 項請看看）" if flagged_here else "")
        out.append(
            _folded(
                summary,
                _table(["練習／檢查", "通過率", "鑑別度", "高低分組差", "平均得分"], rows, _cols(1, 2, 3, 4)),
                open_=bool(flagged_here),
            )
        )
    out.append("</section>")
    return "".join(out)


def misconceptions_section(s: ClassStats) -> str:
    out = ['<section id="misconceptions"><h2>常見的誤解</h2>']
    if not s.misconceptions:
        out.append("<p>這次評分的回饋沒有點名任何誤解。</p></section>")
        return "".join(out)
    out.append(
        "<p>回饋裡「可能的原因」點名的誤解（一題最多兩個，第一個是最可能的）。"
        "人數多的，值得下一堂課花十分鐘；連結是課程網站上講它的那一節。</p>"
    )
    shown = s.misconceptions[:SHOWN_MISCONCEPTIONS]
    picture = plots.count_bars(
        [f"{m.notebook}｜{clean(m.name)[:30]}" for m in shown], [len(m.students) for m in shown], len(s.students)
    )
    out.append(_img(picture, "最常被點名的誤解與人數"))
    rows = []
    for m in s.misconceptions:
        link = f'<a href="{_e(m.url)}">{_e(m.where)}</a>' if m.url else _e(m.where)
        rows.append(
            [
                f"<b>{_e(m.name)}</b><br><span class=muted>{_e(m.notebook)}｜{_e(_exercise_title(s, m.notebook, m.exercise))}</span>",
                f"{len(m.students)}（{_pct(len(m.students) / max(1, len(s.students)))}）",
                str(m.first),
                link,
                _folded(f"{len(m.students)} 位", _names(m.students)),
            ]
        )
    header = ["誤解（練習）", "人數", "列為第一個原因", "要重讀的段落", "學生"]
    out.append(_table(header, rows[:SHOWN_MISCONCEPTIONS], _cols(1, 2)))
    if len(rows) > SHOWN_MISCONCEPTIONS:
        rest = len(rows) - SHOWN_MISCONCEPTIONS
        out.append(_folded(f"其餘 {rest} 個誤解", _table(header, rows[SHOWN_MISCONCEPTIONS:], _cols(1, 2))))
    out.append("</section>")
    return "".join(out)


def _exercise_title(s: ClassStats, notebook: str, exercise: str) -> str:
    return next((e.title for e in s.exercises if e.notebook == notebook and e.exercise == exercise), exercise)


def operations_section(s: ClassStats) -> str:
    out = ['<section id="operations"><h2>需要處理的學生：當掉、碰到上限、空白、竄改</h2>']
    out += [f"<p>沙盒：{_e(note)}</p>" for note in s.sandbox]  # the memory mode in force, measures missing
    if not s.operations and not s.absent:
        out.append("<p>沒有：每位學生的每本 notebook 都正常跑完，沒有空白、沒有竄改。</p></section>")
        return "".join(out)
    by_kind: dict[str, list] = {}
    for op in s.operations:
        by_kind.setdefault(op.kind, []).append(op)
    rows = [
        [
            f'<a href="#op-{kind}">{_e(OPERATION_LABELS[kind])}</a>',
            str(len({o.student for o in by_kind[kind]})),
            str(len(by_kind[kind])),
            _e(OPERATION_MEANINGS[kind]),
        ]
        for kind in OPERATION_LABELS
        if kind in by_kind
    ]
    out.append(_table(["情況", "學生", "notebook", "代表什麼"], rows, _cols(1, 2)))
    if s.absent:
        out.append(_folded(f"一本都沒交的學生（{len(s.absent)} 位）", _names(s.absent)))
    for kind in OPERATION_LABELS:
        if kind not in by_kind:
            continue
        ops = sorted(by_kind[kind], key=lambda o: (o.student, o.notebook))
        table = _table(["學生", "notebook", "原因"], [[_e(o.student), _e(o.notebook), _e(o.text)] for o in ops])
        students = len({o.student for o in ops})
        out.append(
            f'<div id="op-{kind}">'
            + _folded(f"{_e(OPERATION_LABELS[kind])}：{students} 位學生", table, open_=len(ops) <= 10)
            + "</div>"
        )
    out.append("</section>")
    return "".join(out)


def reproduce_section(s: ClassStats) -> str:
    rows = [
        [
            _e(run.graded_at),
            "" if run.seed is None else str(run.seed),
            str(run.students),
            f"<code>{_e(run.command)}</code>",
        ]
        for run in s.runs
    ]
    return (
        '<section id="reproduce"><h2>重現這次評分</h2>'
        "<p>隱藏例子由亂數種子決定；同一個種子、同一份作業，分數一樣。部分重評的學生會有自己的一列。</p>"
        + _table(["評分時間", "亂數種子", "學生", "指令"], rows, _cols(1, 2))
        + "</section>"
    )


def legend_section(s: ClassStats) -> str:
    rows = [[f"<code>{_e(k)}</code>", _e(v)] for k, v in CSV_COLUMNS.items()]
    files = [
        [f"<code>{s.module}-grades.csv</code>", "成績表（上面的欄位）"],
        [
            f"<code>{s.module}-canvas.csv</code>",
            "Canvas 成績簿匯入格式：Student、ID、SIS User ID、SIS Login ID、Section，每本 notebook 一欄，第二列是 Points Possible",
        ],
        [
            f"<code>{s.module}-moodle.csv</code>",
            "Moodle「從 CSV 匯入成績」：Username 對應使用者，每本 notebook 一欄與總分",
        ],
        [f"<code>{s.module}-class.json</code>", "這份報告的資料：每位學生每項檢查的結果、點名的誤解、執行情況"],
        [
            "<code>&lt;學生&gt;/" + s.module + "/feedback.html</code>、<code>results.json</code>",
            "學生的回饋（Gradescope 格式）",
        ],
    ]
    return (
        '<section id="legend"><h2>成績表的欄位與記號</h2>'
        + _table(["欄位", "意思"], rows)
        + "<p><b>⚠</b>（終端機印出的成績表裡，分數旁邊）：這本 notebook 有竄改紀錄，原因在 CSV 的 <code>tampering_reason</code> 與上面的「疑似竄改」。</p>"
        + "<h3>這次評分寫出的檔案</h3>"
        + _table(["檔案", "內容"], files)
        + "</section>"
    )


def scores_section(s: ClassStats) -> str:
    notebooks = [nb for nb, _ in s.notebooks]
    rows = [
        [_e(name), *(_points(s.scores[name].get(nb, 0.0)) for nb in notebooks), _points(s.scores[name]["total"])]
        for name in sorted(s.scores)
    ]
    table = _table(["學生", *(_e(nb) for nb in notebooks), "總分"], rows, _cols(*range(1, len(notebooks) + 2)))
    return '<section id="scores"><h2>全班成績</h2>' + _folded(f"{len(rows)} 位學生", table) + "</section>"


_STYLE = """
:root { color-scheme: light; }
body { font-family: "Noto Sans TC", "Noto Sans CJK TC", "PingFang TC", "Microsoft JhengHei", sans-serif;
  max-width: 1040px; margin: 0 auto; padding: 1rem 1.25rem 3rem; line-height: 1.6; color: #1f2937; }
h1 { font-size: 1.5rem; margin: .5rem 0; } h2 { font-size: 1.2rem; margin-top: 2.2rem;
  border-bottom: 2px solid #e5e7eb; padding-bottom: .2rem; } h3 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
nav a { margin-right: 1em; white-space: nowrap; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .6em 0; font-size: .93em; }
th, td { padding: .35em .7em; border-bottom: 1px solid #e5e7eb; text-align: left; vertical-align: top; }
th { background: #f3f4f6; white-space: nowrap; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td details, td summary { margin: 0; }
figure { margin: .8em 0; } img.plot { max-width: 100%; height: auto; display: block; }
details { margin: .6em 0; } summary { cursor: pointer; font-weight: bold; color: #1d4ed8; }
.look { background: #fef2f2; border-left: 4px solid #dc2626; padding: .4em 1em; border-radius: 6px; }
.ok { background: #f0fdf4; padding: .5em 1em; border-radius: 6px; }
.flag { color: #dc2626; } .muted { color: #6b7280; font-size: .9em; } .names { overflow-wrap: anywhere; }
code { font-size: .9em; overflow-wrap: anywhere; }
@media (max-width: 480px) { body { padding: .75rem; } h1 { font-size: 1.25rem; } }
"""


def report_html(record: ClassRecord) -> str:
    s = class_stats(record)
    nav = "".join(
        f'<a href="#{anchor}">{title}</a>'
        for anchor, title in (
            ("distribution", "分數分布"),
            ("checks", "哪一題難"),
            ("misconceptions", "常見的誤解"),
            ("operations", "需要處理的學生"),
            ("reproduce", "重現"),
            ("legend", "欄位說明"),
        )
    )
    body = [
        f"<h1>{_e(s.module)} 全班報告</h1>",
        f"<nav>{nav}</nav>",
        summary_section(s),
        distribution_section(s),
        checks_section(s),
        misconceptions_section(s),
        operations_section(s),
        reproduce_section(s),
        legend_section(s),
        scores_section(s),
    ]
    return (
        '<!DOCTYPE html><html lang="zh-Hant-TW"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(s.module)} 全班報告</title><style>{_STYLE}</style></head><body><main>"
        + "\n".join(body)
        + "</main></body></html>"
    )


def write_report(out: Path, record: ClassRecord) -> Path:
    """``OUT/<module>-report.html`` for ``record``; returns its path."""
    path = out / f"{record.module}-report.html"
    path.write_text(report_html(record), encoding="utf-8")
    return path

"""The class report: one self-contained HTML file an instructor opens after grading (``graded/<module>-report.html``).

It opens with what to do on Monday (``monday_section``): the exercise the class found hardest, the two or three
misconceptions the feedback named most, each with its share of the class and the section to reread, and the
students who need attention, each linked to their feedback page. Then the score distributions, the item statistics
(with a rule of thumb for reading them, and "n < 30：僅供參考" where they rest on few students), every misconception,
who crashed, hit a limit, left work empty or tampered, the class's scores, how to reproduce the grading and what the
gradebook's columns mean. It ends with the item-quality flags, a note for the course's author (a check everybody
passed, nobody passed, or the weaker students passed more). Every student's name links to their feedback page
(``<student>/<module>/feedback.html`` beside the report, as ``pt2e-course grade`` writes it).
Plots are matplotlib SVG (``autograder.reports.plots``) embedded as images; long lists fold
(``<details>``), so a class of 500 reads on one screen. Everything shown went through ``hygiene.clean``.
"""

from __future__ import annotations

import base64
import html
import re
import statistics as stats
from pathlib import Path
from urllib.parse import quote

from autograder.reports import plots
from autograder.reports.class_record import ClassRecord
from autograder.reports.hygiene import clean
from autograder.reports.statistics import (
    ATTENTION,
    MIN_STUDENTS,
    OPERATION_LABELS,
    OPERATION_MEANINGS,
    RELIABLE,
    CheckStats,
    ClassStats,
    MisconceptionCount,
    class_stats,
    hardest,
    histogram,
    needs_attention,
)

SHOWN_MISCONCEPTIONS = 12
SHOWN_FLAGGED = 10
TOP_MISCONCEPTIONS = 3
"""How many misconceptions the first block names."""
SHOWN_PAIRS = 20
"""Flagged pairs listed with their code side by side; the rest are counted (the JSON has them all)."""
MAX_CODE_LINES = 400
SHOWN_NAMES = 12
"""A list of students longer than this folds."""
FEW = f"n &lt; {RELIABLE}：僅供參考"
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


def feedback_href(student: str, module: str) -> str:
    """The student's feedback page, relative to the report (``OUT/<student>/<module>/feedback.html``)."""
    return f"{quote(clean(student), safe='')}/{quote(module, safe='')}/feedback.html"


def _student(name: str, module: str) -> str:
    """A student's name, linked to their feedback page."""
    return f'<a class="student" href="{_e(feedback_href(name, module))}">{_e(name)}</a>'


def _names(names: list[str], module: str) -> str:
    return '<p class="names">' + "、".join(_student(n, module) for n in sorted(names)) + "</p>"


def _few(n: int) -> str:
    """A mark after a figure over fewer than ``RELIABLE`` students."""
    return f' <span class="few" title="{FEW}">†</span>' if n < RELIABLE else ""


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


def monday_section(s: ClassStats) -> str:
    """The first block: what to reteach (the hardest exercise, the commonest misconceptions) and who needs help."""
    out = ['<section id="monday" class="monday"><h2>下一堂課：要再講什麼、誰需要幫忙</h2>', summary_section(s)]
    items = []
    exercise = hardest(s)
    if exercise is not None:
        full = round(exercise.facility * exercise.students)
        items.append(
            f'<li id="hardest"><b>最難的一題</b>：<a href="#nb-{_e(exercise.notebook)}">{_e(exercise.notebook)}｜'
            f"{_e(exercise.title)}</a>，通過率 <b>{_pct(exercise.facility)}</b>（{exercise.students} 位中 {full} 位"
            f"拿到全部 {_points(exercise.points)} 分），平均 {_points(exercise.mean_points)} / {_points(exercise.points)} 分"
            f"{_few(exercise.students)}</li>"
        )
    top = s.misconceptions[:TOP_MISCONCEPTIONS]
    if top:
        rows = []
        for m in top:
            share = len(m.students) / max(1, len(s.students))
            link = f'<a href="{_e(m.url)}">重讀：{_e(m.where)}</a>' if m.url else f"重讀：{_e(m.where)}"
            rows.append(
                f"<li><b>{_e(m.name)}</b>（{_e(m.notebook)}｜{_e(_exercise_title(s, m.notebook, m.exercise))}）："
                f"<b>{_pct(share)}</b> 的學生（{len(m.students)} 位）。{link}</li>"
            )
        items.append(
            f'<li id="top-misconceptions"><b>最常見的誤解</b>（回饋點名的次數最多的 {len(top)} 個，'
            f'全部在<a href="#misconceptions">「常見的誤解」</a>）<ul>{"".join(rows)}</ul></li>'
        )
    else:
        items.append("<li><b>最常見的誤解</b>：這次評分的回饋沒有點名任何誤解。</li>")
    attention = needs_attention(s)
    if attention:
        groups = []
        for key, names in attention.items():
            listed = "、".join(_student(n, s.module) for n in names)
            body = (
                _folded(f"{_e(ATTENTION[key])}：{len(names)} 位", f'<p class="names">{listed}</p>')
                if len(names) > SHOWN_NAMES
                else f'{_e(ATTENTION[key])}（{len(names)} 位）：<span class="names">{listed}</span>'
            )
            groups.append(f'<li id="attention-{key}">{body}</li>')
        items.append(
            '<li id="attention"><b>需要關心的學生</b>（名字連到他的回饋；原因的細節在'
            f'<a href="#operations">「需要處理的學生」</a>）<ul>{"".join(groups)}</ul></li>'
        )
    else:
        items.append('<li id="attention"><b>需要關心的學生</b>：沒有。</li>')
    out.append(f'<ul class="first">{"".join(items)}</ul>')
    if len(s.students) < RELIABLE:
        out.append(
            f'<p class="note">全班不到 {RELIABLE} 位（{len(s.students)} 位）：{FEW}。通過率與鑑別度在這麼少的學生上，'
            "一兩位學生就能改變很多；看它們找要再講的地方，不要拿來判斷題目好不好。</p>"
        )
    out.append("</section>")
    return "".join(out)


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
    flag = '<a class="flag" href="#quality" title="列在「給課程作者：檢查的品質」">⚑</a> ' if c.flags else ""
    return [
        flag + _e(c.name),
        _pct(c.facility),
        _num(c.discrimination),
        _num(c.upper_lower),
        f"{_points(c.mean_points)} / {_points(c.points)}",
        f"{c.students}{_few(c.students)}",
    ]


DEFINITIONS = (
    "<p><b>通過率</b>：一項檢查的通過率是通過它的學生比例；一題的通過率是這一題的每項檢查都通過、拿到全部分數的學生比例。"
    "只算答案有被評的學生（沒交、沒作答、還沒寫完、當掉或竄改而沒評到的不算，他們列在「需要處理的學生」）。"
    "<b>鑑別度</b>：通過這一項（一題：這一題的分數）與「模組其他部分的分數」的相關係數（point-biserial），越接近 1 越能分出懂與不懂。"
    "<b>高低分組差</b>：其他部分分數最高與最低各 27% 學生的通過率相減。"
    "<b>n</b>：算進這一列的學生人數。</p>"
)
RULE_OF_THUMB = (
    '<p class="rule"><b>怎麼讀</b>：通過率低於 50% 的題目值得在課堂上再講一次；鑑別度 0.3 以上表示分得出懂與不懂，'
    f"0.1 以下幾乎分不出來，負的見下方說明；標 † 的列 {FEW}。</p>"
)


def _negative(items: list, what: str) -> str:
    """The explanation of a negative discrimination, when ``items`` show one."""
    negative = [i for i in items if i.discrimination is not None and i.discrimination < 0]
    if not negative:
        return ""
    named = "、".join(
        f"{_e(i.notebook)}｜{_e(getattr(i, 'title', None) or i.name)}（{i.discrimination:.2f}）" for i in negative[:5]
    )
    more = f"等 {len(negative)} 項" if len(negative) > 5 else ""
    few = any(i.students < RELIABLE for i in negative)
    return (
        f'<p class="note negative"><b>鑑別度是負的</b>：{named}{more}。意思是{what}的學生，模組其他部分的分數反而比較低。'
        + (
            f"這裡的人數不到 {RELIABLE} 位，多半是一兩位學生造成的偶然，不必處理。"
            if few
            else "人數夠多時這不是偶然：看看它是不是考到了課程沒教的東西，或檢查有錯（見最後的「給課程作者：檢查的品質」）。"
        )
        + "</p>"
    )


def checks_section(s: ClassStats) -> str:
    out = ['<section id="checks"><h2>哪一題難：每一題、每一項檢查</h2>', DEFINITIONS, RULE_OF_THUMB]
    exercise_rows = [
        [
            f'<a href="#nb-{_e(e.notebook)}">{_e(e.notebook)}</a>｜{_e(e.title)}',
            _pct(e.facility),
            _num(e.discrimination),
            f"{_points(e.mean_points)} / {_points(e.points)}",
            f"{e.students}{_few(e.students)}",
        ]
        for e in sorted(s.exercises, key=lambda e: e.facility)
    ]
    out.append("<h3>每一題（最難的在前）</h3>")
    out.append(_table(["練習", "通過率", "鑑別度", "平均得分", "n"], exercise_rows, _cols(1, 2, 3, 4)))
    out.append(_negative(s.exercises, "拿到這一題全部分數"))
    checks = s.checks
    if checks:
        labels = [f"{c.notebook}｜{clean(c.name)}" for c in checks]  # wrapped at word boundaries by the plot
        picture = plots.facility_bars(labels, [c.facility for c in checks], [bool(c.flags) for c in checks])
        out.append(
            _folded(
                "每一項檢查的通過率（圖）",
                _img(picture, "每一項檢查的通過率，紅色是列在「給課程作者」的檢查"),
                open_=len(checks) <= 40,
            )
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
                    f"{e.students}{_few(e.students)}",
                ]
            )
            rows += [_check_row(c) for c in e.checks]
        here = [c for c in checks if c.notebook == notebook]
        flagged_here = sum(bool(c.flags) for c in here)
        summary = f"{_e(notebook)} 的檢查" + (f"（{flagged_here} 項列在「給課程作者」）" if flagged_here else "")
        out.append(
            f'<div id="nb-{_e(notebook)}">'
            + _folded(
                summary,
                _table(["練習／檢查", "通過率", "鑑別度", "高低分組差", "平均得分", "n"], rows, _cols(1, 2, 3, 4, 5))
                + _negative(here, "通過這項檢查"),
            )
            + "</div>"
        )
    out.append("</section>")
    return "".join(out)


def quality_section(s: ClassStats) -> str:
    """Item-quality flags, for the course's author: checks that tell nothing about who understood."""
    out = [
        '<section id="quality"><h2>給課程作者：檢查的品質</h2>',
        "<p>這一節是給寫題目與檢查的人看的，不是下一堂課要講的：每個人都通過、沒有人通過、"
        "或其他部分考得差的學生反而比較常通過的檢查，分不出誰懂，值得看看檢查本身。</p>",
    ]
    flagged = s.flagged
    few = [c for c in s.checks if c.students < MIN_STUDENTS]
    if flagged:
        items = [
            f"<li><b>{_e(c.notebook)}</b>「{_e(c.name)}」（通過率 {_pct(c.facility)}，n = {c.students}）："
            f"{'；'.join(_e(f) for f in c.flags)}</li>"
            for c in flagged
        ]
        shown = "".join(items[:SHOWN_FLAGGED])
        more = (
            _folded(f"其餘 {len(items) - SHOWN_FLAGGED} 項", "<ul>" + "".join(items[SHOWN_FLAGGED:]) + "</ul>")
            if len(items) > SHOWN_FLAGGED
            else ""
        )
        note = (
            f"<p>全班不到 {RELIABLE} 位：{FEW}，人數少時每個人都通過並不稀奇。</p>"
            if len(s.students) < RELIABLE
            else ""
        )
        out.append(
            f'<div class="look" id="flagged"><p><b>請看看這 {len(flagged)} 項檢查</b></p><ul>{shown}</ul>{more}{note}</div>'
        )
    elif few:
        out.append(
            f'<p class="ok" id="flagged">沒有標記任何檢查：有 {len(few)} 項檢查被評到的答案少於 {MIN_STUDENTS} 份，'
            "人數太少，通過率與鑑別度說明不了檢查好不好；其餘的每一項都有人通過、有人沒通過，鑑別度也不低。</p>"
        )
    else:
        out.append('<p class="ok" id="flagged">沒有需要特別看的檢查：每一項都有人通過、有人沒通過，鑑別度也不低。</p>')
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
        [f"{m.notebook}｜{clean(m.name)}" for m in shown], [len(m.students) for m in shown], len(s.students)
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
                _practised(m),
                link,
                _folded(f"{len(m.students)} 位", _names(m.students, s.module)),
            ]
        )
    header = ["誤解（練習）", "人數", "列為第一個原因", "再練一題通過", "要重讀的段落", "學生"]
    out.append(_table(header, rows[:SHOWN_MISCONCEPTIONS], _cols(1, 2, 3)))
    if len(rows) > SHOWN_MISCONCEPTIONS:
        rest = len(rows) - SHOWN_MISCONCEPTIONS
        out.append(_folded(f"其餘 {rest} 個誤解", _table(header, rows[SHOWN_MISCONCEPTIONS:], _cols(1, 2, 3))))
    if any(m.practice for m in s.misconceptions):
        out.append(
            "<p class=muted>「再練一題通過」：被點名這個誤解的學生裡，交來的 notebook 裡寫了它的再練一題、"
            "而且在評分沙盒裡通過的人數（照跑他們的程式判斷，不看 notebook 印了什麼）；「—」是這個誤解沒有再練一題。</p>"
        )
    out.append("</section>")
    return "".join(out)


def _practised(m: MisconceptionCount) -> str:
    """How many of the students the misconception was named to passed its practice: "3／12 (25%)", or "—"."""
    if m.practice is None:
        return "—"
    return f"{len(m.practised)}／{len(m.students)}（{_pct(len(m.practised) / max(1, len(m.students)))}）"


def _exercise_title(s: ClassStats, notebook: str, exercise: str) -> str:
    return next((e.title for e in s.exercises if e.notebook == notebook and e.exercise == exercise), exercise)


def operations_section(s: ClassStats) -> str:
    out = ['<section id="operations"><h2>需要處理的學生：當掉、碰到上限、空白、竄改</h2>']
    out += [f"<p>沙盒：{_e(note)}</p>" for note in s.sandbox]  # the memory mode in force, measures missing
    if s.explained_errors:
        out.append(
            f'<p class="muted" id="explained-errors">另有 {len(s.explained_errors)} 位學生的格子出錯只是答錯的結果'
            "（自我檢查、評分預覽或鎖定格的 assert 沒有通過），算在上面的通過率與誤解裡，不列在「有格子出錯」。</p>"
        )
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
        out.append(_folded(f"一本都沒交的學生（{len(s.absent)} 位）", _names(s.absent, s.module)))
    for kind in OPERATION_LABELS:
        if kind not in by_kind:
            continue
        ops = sorted(by_kind[kind], key=lambda o: (o.student, o.notebook))
        table = _table(
            ["學生", "notebook", "原因"], [[_student(o.student, s.module), _e(o.notebook), _e(o.text)] for o in ops]
        )
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
        [
            _student(name, s.module),
            *(_points(s.scores[name].get(nb, 0.0)) for nb in notebooks),
            _points(s.scores[name]["total"]),
        ]
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
.flag { color: #dc2626; text-decoration: none; } .muted { color: #6b7280; font-size: .9em; } .names { overflow-wrap: anywhere; }
code { font-size: .9em; overflow-wrap: anywhere; }
.monday { background: #eff6ff; border-left: 4px solid #2563eb; padding: .2em 1.1em .6em; border-radius: 6px; }
.monday h2 { margin-top: .6rem; border-bottom: none; } ul.first > li { margin: .45em 0; }
.note { background: #fffbeb; border-left: 4px solid #d97706; padding: .4em 1em; border-radius: 6px; }
.rule { background: #f3f4f6; padding: .4em 1em; border-radius: 6px; } .few { color: #b45309; font-weight: bold; }
a.student { color: inherit; text-decoration: underline dotted; }
.side-by-side { display: flex; flex-wrap: wrap; gap: .5em; } .code-side { flex: 1 1 22em; min-width: 0; }
.code-side pre { font-size: .75rem; overflow-x: auto; background: #f9fafb; padding: .4em; border-radius: 6px; margin: 0; }
.code-side pre span { display: block; white-space: pre; } .code-side .same { background: #fef08a; }
.code-title { font-weight: bold; margin: .3em 0; }
@media (max-width: 480px) { body { padding: .75rem; } h1 { font-size: 1.25rem; } ul { padding-left: 1.2em; }
  .monday { padding: .2em .7em .5em; } }
"""


def _score(record: ClassRecord, name: str) -> str:
    """A compared side's score in the module: a student's total, or what the published solutions or an earlier
    term's answers are."""
    from autograder.reports.class_record import scores

    entry = record.students.get(name)
    if entry is None:
        return "—"
    total = sum(scores(entry).values())
    return f"{_points(total)} / {_points(sum(float(nb['max_score']) for nb in entry['notebooks']))}"


def _side(record: ClassRecord, name: str, kind: str, module: str) -> str:
    if kind == "reference":
        return "<b>公開的解答</b>（課程網站與 source/）"
    if kind == "archive":
        return f"{_e(name)}（往屆）"
    return _student(name, module) if name in record.students else _e(name)


def _code_side(lines: list, title: str) -> str:
    shown = []
    for item in lines[:MAX_CODE_LINES]:
        text, shared = (item[0], item[1]) if isinstance(item, list | tuple) and len(item) == 2 else ("", False)
        shown.append(f'<span class="{"same" if shared else "own"}">{_e(text) or " "}</span>')
    more = f'<span class="own">（還有 {len(lines) - MAX_CODE_LINES} 行）</span>' if len(lines) > MAX_CODE_LINES else ""
    return f'<div class="code-side"><div class="code-title">{title}</div><pre>{"".join(shown)}{more}</pre></div>'


def similarity_section(record: ClassRecord, data: dict | None) -> str:
    """Pairs whose own code is nearly the same (``autograder.reports.similarity``): a place to look, not a verdict."""
    head = '<section id="similarity"><h2>相似的答案</h2>'
    if data is None:
        return (
            head + "<p>這次沒有比對相似度（<code>pt2e-course grade</code> 加了 <code>--no-similarity</code>，"
            "或報告是從別處的評分紀錄重做的）。</p></section>"
        )
    thresholds = data.get("thresholds", {})
    share, tokens = float(thresholds.get("share", 0)), int(thresholds.get("tokens", 0))
    method = (
        f'<p class="rule">比的是每位學生自己寫的程式（作答格與自己加的格，整個模組的 notebook 合在一起），'
        f"學生版 notebook 本來就有的程式不算；也和公開的解答比（加 <code>--similar-to</code> 也和往屆比）。"
        f"用 copydetect（MOSS 的 winnowing）：名字換掉、註解與空白刪掉也認得出來。"
        f"兩邊各有至少 {share:.0%} 的程式相同、相同的部分也夠長（至少 {tokens} 個 token）才列出來。"
        f"答案短、解法有限時，各自寫的對的答案也會有點像：這裡列出的是要去看一眼的，不是抄襲的判決。</p>"
    )
    flagged = [p for p in data.get("flagged", []) if isinstance(p, dict)]
    compared = int(data.get("students", 0))
    if not flagged:
        return head + f'<p class="ok">比了 {compared} 位學生，沒有幾乎一樣的答案。</p>' + method + "</section>"
    rows, views = [], []
    for index, pair in enumerate(flagged[:SHOWN_PAIRS]):
        kinds = pair.get("kinds", ["student", "student"])
        names = [str(pair.get("first", "")), str(pair.get("second", ""))]
        shares = pair.get("share", [0, 0])
        sides = [_side(record, n, k, record.module) for n, k in zip(names, kinds, strict=False)]
        rows.append(
            [
                f'<a href="#pair-{index}">{index + 1}</a>',
                f"{sides[0]} ↔ {sides[1]}",
                f"{float(shares[0]):.0%} / {float(shares[1]):.0%}",
                f"{_score(record, names[0])} ／ {_score(record, names[1])}",
            ]
        )
        lines = pair.get("lines", [[], []])
        titles = [re.sub(r"<[^>]+>", "", side) for side in sides]
        views.append(
            _folded(
                f'<span id="pair-{index}">第 {index + 1} 對：{sides[0]} ↔ {sides[1]}，相同的行標成黃色</span>',
                '<div class="side-by-side">'
                + _code_side(lines[0], _e(titles[0]))
                + _code_side(lines[1], _e(titles[1]))
                + "</div>",
            )
        )
    more = (
        f"<p>還有 {len(flagged) - SHOWN_PAIRS} 對沒有列出（見 {_e(record.module)}-similarity.json）。</p>"
        if len(flagged) > SHOWN_PAIRS
        else ""
    )
    table = _table(["#", "哪兩份", "相同的比例（左／右）", "分數（左／右）"], rows)
    summary = f"<p>比了 {compared} 位學生，{len(flagged)} 對幾乎一樣：</p>"
    return head + summary + table + more + "".join(views) + method + "</section>"


def report_html(record: ClassRecord, similarity: dict | None = None) -> str:
    s = class_stats(record)
    nav = "".join(
        f'<a href="#{anchor}">{title}</a>'
        for anchor, title in (
            ("monday", "下一堂課"),
            ("distribution", "分數分布"),
            ("checks", "哪一題難"),
            ("misconceptions", "常見的誤解"),
            ("operations", "需要處理的學生"),
            ("similarity", "相似的答案"),
            ("scores", "全班成績"),
            ("reproduce", "重現"),
            ("legend", "欄位說明"),
            ("quality", "給課程作者"),
        )
    )
    body = [
        f"<h1>{_e(s.module)} 全班報告</h1>",
        f"<nav>{nav}</nav>",
        monday_section(s),
        distribution_section(s),
        checks_section(s),
        misconceptions_section(s),
        operations_section(s),
        similarity_section(record, similarity),
        scores_section(s),
        reproduce_section(s),
        legend_section(s),
        quality_section(s),
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
    from autograder.reports.similarity import read_similarity

    path = out / f"{record.module}-report.html"
    path.write_text(report_html(record, read_similarity(out, record.module)), encoding="utf-8")
    return path

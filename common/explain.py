"""Errors in words a student reads: what an exception means, and which line of *their* code raised it.

A crash inside a student's ``annotate`` surfaces deep in torchao (or, on the grader's side, in the
replay of a recording). What helps is the student's own line and what the exception means, not
the library's frames. This module finds the innermost frame of student code in a traceback
(``student_frame``), says it as ``AddQuantizer.annotate 第 5 行：inputs[0]`` (``where_text``) and glosses
the common exception types in Chinese (``meaning``). ``autograder`` uses the same words on the
grader's side; everything here ships with the course. In a notebook, ``failure_lines`` says what a
failed cell did wrong in a few lines and ``show_traceback_folded`` keeps the full traceback one click away.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig
import traceback
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

MEANINGS = {
    "NotImplementedError": "還沒寫完：程式走到了 raise NotImplementedError()，也就是練習要你填的地方",
    "RecursionError": "函式一層呼叫一層停不下來，遞迴太深；通常是某個東西指向了自己",
    "IndexError": "索引超出範圍：串列、tuple 或 tensor 在那一維比你以為的短，也可能是空的",
    "KeyError": "用 [] 取的 key 不在那裡（字典沒有它，或模組、圖裡沒有這個名字）",
    "AttributeError": "這個物件沒有你用的屬性或方法：它的型別可能和你以為的不同",
    "TypeError": "型別不對：把某個值當成了它不是的東西（例如把 list 當成 Node，或引數個數不對）",
    "ValueError": "值不合法：型別對了，內容不被接受",
    "NameError": "用到一個還沒定義的名字：先執行定義它的那一格，或檢查拼字",
    "AssertionError": "assert 的條件不成立",
    "ZeroDivisionError": "除以零",
    "StopIteration": "next() 沒有東西可以拿了：要找的東西不存在",
    "RuntimeError": "torch 或 torchao 拒絕了一個操作，訊息會說原因",
    "UnboundLocalError": "區域變數在給值之前就被用了",
    "Timeout": "超過時間上限還沒有結束（可能是無窮迴圈）",
    "MemoryError": "記憶體不夠",
}
"""Exception type → what it usually means, in a sentence a student can act on."""

CODE_CHARS = 120
FUNCTION_CHARS = 60


def meaning(error: str) -> str:
    """The Chinese gloss of an exception type name ('' when it has none)."""
    return MEANINGS.get(error, "")


@cache
def _library_roots() -> tuple[str, ...]:
    """Folders whose code is not the student's: the standard library, installed packages, this course's packages."""
    roots = {sysconfig.get_paths().get(key, "") for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    here = Path(__file__).resolve().parent.parent
    roots |= {str(here / name) for name in ("common", "selfcheck", "autograder")}
    return tuple(sorted(os.path.normpath(r) + os.sep for r in roots if r))


_CELL_FILE = re.compile(r"(^<ipython-input-\d+-[0-9a-f]+>$)|([/\\]ipykernel_\d+[/\\]\d+\.py$)")


def is_student_file(filename: str) -> bool:
    """A notebook cell (IPython's ``<ipython-input-…>``, ipykernel's ``/tmp/ipykernel_N/M.py``) or a file
    outside the standard library, the installed packages and the course's own packages."""
    if _CELL_FILE.search(filename):
        return True
    if filename.startswith("<"):  # <string>, <frozen …>: code without a file of its own
        return False
    path = os.path.normpath(os.path.abspath(filename)) + os.sep
    return not path.startswith(_library_roots())


def student_frame(tb: TracebackType | None) -> dict[str, Any] | None:
    """The innermost frame of student code in ``tb``: ``{"function", "line", "code"}``, or None."""
    found = None
    try:
        while tb is not None:
            code = tb.tb_frame.f_code
            if is_student_file(code.co_filename):
                found = (code, tb.tb_lineno)
            tb = tb.tb_next
        if found is None:
            return None
        code, line = found
        text = linecache.getline(code.co_filename, line).strip()
        function = getattr(code, "co_qualname", code.co_name)
        return {"function": str(function)[:FUNCTION_CHARS], "line": int(line), "code": text[:CODE_CHARS]}
    except Exception:  # a traceback is read, never trusted to be well-formed
        return None


def clean_where(data: Any) -> dict[str, Any] | None:
    """A ``where`` record from elsewhere (a recording), with only fields of the right type and size."""
    if not isinstance(data, dict):
        return None
    function, line, code = data.get("function"), data.get("line"), data.get("code")
    if type(line) is not int or not isinstance(function, str) or not isinstance(code, str):
        return None
    function = function if re.fullmatch(r"[\w.<>]{1,60}", function) else "?"
    return {"function": function, "line": line, "code": " ".join(code.split())[:CODE_CHARS]}


def where_text(where: dict[str, Any] | None) -> str:
    """``（你寫的 AddQuantizer.annotate 第 5 行：first = inputs[0]）``, or '' without a place."""
    where = clean_where(where)
    if where is None:
        return ""
    function = "" if where["function"] in ("<module>", "?") else f" {where['function']}"
    code = f"：{where['code']}" if where["code"] else ""
    return f"（你寫的{function} 第 {where['line']} 行{code}）"


UNFINISHED = "還沒寫完"
"""How the sentence for an answer that reached ``raise NotImplementedError()`` starts (the class report counts them)."""


def error_sentence(error: str, message: str) -> str:
    """``執行時出錯：IndexError（索引超出範圍：…）：list index out of range``, for a case that raised; an
    unfinished answer (``NotImplementedError``) says so, with the line it stopped at."""
    if error == "NotImplementedError":
        where = message[message.rfind("（你寫的") :] if "（你寫的" in message else ""
        return f"{UNFINISHED}：你的程式走到了 raise NotImplementedError()，也就是練習要你填的地方{where}"
    gloss = meaning(error)
    head = f"{error}（{gloss}）" if gloss else error
    message = message.strip()
    if not message:
        return f"執行時出錯：{head}"
    return f"執行時出錯：{head}{'' if message.startswith('（') else '：'}{message}"


TRACEBACK_CHARS = 20_000


def failure_head(error: BaseException, failed: str = "自我檢查沒有通過", crashed: str = "自我檢查時出錯") -> str:
    """The first line a student reads about a failed check cell: the assert's message (or its line), or the
    exception, what it means, and the innermost line of notebook code that raised it."""
    if isinstance(error, AssertionError):
        message = " ".join(str(error).split())
        if not message:
            where = student_frame(error.__traceback__)
            message = f"這個條件不成立：{where['code']}" if where and where["code"] else "有一個 assert 的條件不成立"
        return f"✗ {failed}：{message}"
    name = type(error).__name__
    gloss = meaning(name)
    text = " ".join(str(error).split())[:300]
    head = f"✗ {crashed}：{name}" + (f"（{gloss}）" if gloss else "") + (f"：{text}" if text else "")
    where = where_text(student_frame(error.__traceback__))
    return head + where.replace("（你寫的", "（出錯的是 notebook 裡", 1) if where else head


def show_traceback_folded(error: BaseException) -> None:
    """In a notebook, the full traceback folded (HTML ``<details>``), for whoever wants it; elsewhere nothing."""
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is None:
            return
        import html

        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))[-TRACEBACK_CHARS:]
        folded = (
            "<details><summary>完整的 traceback（想看細節的話）</summary>"
            f'<pre style="white-space: pre-wrap; font-size: 0.85em">{html.escape(text)}</pre></details>'
        )
        display(
            {"text/html": folded, "text/plain": "（完整的 traceback 收起來了：在 JupyterLab 或 Colab 點開）"}, raw=True
        )
    except Exception:
        return


class ShortFailure(AssertionError):
    """A check cell that failed; ``lines`` is what the student reads, shown by IPython instead of a traceback."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__(lines[0] if lines else "沒有通過")

    def _render_traceback_(self) -> list[str]:
        return list(self.lines)

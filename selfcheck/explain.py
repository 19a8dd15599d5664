"""Errors in words a student reads: what an exception means, and which line of *their* code raised it.

A crash inside a student's ``annotate`` surfaces deep in torchao (or, on the grader's side, in the
replay of a recording). What helps is the student's own line and what the exception means, not
the library's frames. This module finds the innermost frame of student code in a traceback
(``student_frame``), says it as ``AddQuantizer.annotate 第 5 行：inputs[0]`` (``where_text``) and glosses
the common exception types in Chinese (``meaning``). ``autograder`` uses the same words on the
grader's side; everything here ships with the course.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

MEANINGS = {
    "NotImplementedError": "還沒寫完：程式走到了 raise NotImplementedError()，也就是練習要你填的地方",
    "RecursionError": "函式一層呼叫一層停不下來（遞迴太深），通常是某個東西指向了自己",
    "IndexError": "索引超出範圍：串列或 tuple 比你以為的短（也可能是空的）",
    "KeyError": "字典裡沒有這個 key：要找的東西不在那裡",
    "AttributeError": "這個物件沒有你用的屬性或方法：它的型別可能和你以為的不同",
    "TypeError": "型別不對：把某個值當成了它不是的東西（例如把 list 當成 Node，或引數個數不對）",
    "ValueError": "值不合法：型別對了，內容不被接受",
    "NameError": "用到一個還沒定義的名字：先執行定義它的那一格，或檢查拼字",
    "AssertionError": "assert 的條件不成立",
    "ZeroDivisionError": "除以零",
    "StopIteration": "next() 沒有東西可以拿了：要找的東西不存在",
    "RuntimeError": "執行時出錯（常見於 torch 拒絕一個操作）",
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


def error_sentence(error: str, message: str) -> str:
    """``執行時出錯：IndexError（索引超出範圍：…）：list index out of range``, for a case that raised."""
    gloss = meaning(error)
    head = f"{error}（{gloss}）" if gloss else error
    message = message.strip()
    if not message:
        return f"執行時出錯：{head}"
    return f"執行時出錯：{head}{'' if message.startswith('（') else '：'}{message}"

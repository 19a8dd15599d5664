"""Hidden checks of M03-4: AddQuantizer and CatQuantizer with shared qparams.

Each check compares three things the student's Quantizer decides: the labels it wrote (read from
the annotations, sharing resolved into groups, the observer class included), the observers
``prepare_pt2e`` put on every edge (how many, which instances are shared, of which class and range),
and where asked the q/dq parameters after ``convert_pt2e``.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
add_quantizer
- adds found by name or ``str(target)`` ("add" in addmm, an input called add, an add and a mul whose
  names a pass swapped) → shared_branches;
- the anchor is ``node.args[0]`` (a constant first operand), scalars and constants labelled, a
  constant operand means "skip the add", no activation input crashes → constants;
- ``add(r, r)`` labels one edge twice → self_add;
- ``share`` ignored either way, the output not shared, the anchor on the producer's output or on
  the add's output → separate, shared_residual, shared_branches, converted;
- the output label written as edge labels on the users → every case;
- what another Quantizer wrote first: a claimed add relabelled, an unclaimed label skipped, the own
  add not marked ``_annotated`` → pre_annotated;
- XNNPACK's HistogramObserver instead of ``act_spec()`` → every case.
cat_quantizer
- ``node.args[:2]`` like an add (a cat's inputs are one list), only the first two inputs → cat_pool,
  three_way;
- a constant in the list labelled, the first entry taken as the anchor (a constant), a repeated
  input labelled twice → constant_and_repeat;
- cats found by name (a placeholder called cat, a cat and a stack whose names a pass swapped) →
  constant_and_repeat;
- labels on the producers' outputs instead of the cat's input edges → constant_and_repeat;
- no sharing, output not shared, the anchor on the cat's output → every case;
- another Quantizer's claim overwritten, unclaimed labels skipped, no ``_annotated`` → cat_pool.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, compare_observers, compare_paths, expect, value
from autograder.checks.support import spec_text as _spec_text


def spec_text(spec: Any) -> str:
    return _spec_text(spec, none="（共用的位置沒有規格）")


# --- comparisons ----------------------------------------------------------------------------------


def compare_labels(got: dict[str, Any], want: dict[str, Any], where: str, nodes: list[str] | None = None) -> None:
    """The same labelled positions, the same spec (observer class included) and the same sharing groups.

    ``nodes``: only the labels carried by these nodes (all when None).
    """
    try:
        got_positions, want_positions = got["positions"], want["positions"]
    except (KeyError, TypeError):
        raise Fail(f"{where}：證據格式不對") from None

    def wanted(entry: dict[str, Any]) -> bool:
        return nodes is None or entry.get("node") in nodes

    for position in sorted({p for p, e in want_positions.items() if wanted(e)}):
        entry = want_positions[position]
        seen = got_positions.get(position)
        if seen is None:
            raise Fail(f"{where}：{position} 應該有標籤（{spec_text(entry['spec'])}），看到沒有標籤")
        if seen.get("spec") != entry["spec"]:
            raise Fail(f"{where}：{position} 的規格預期 {spec_text(entry['spec'])}，看到 {spec_text(seen.get('spec'))}")
        if seen.get("group") != entry["group"]:
            raise Fail(
                f"{where}：{position} 預期和 {_group_text(want_positions, entry['group'])} 共用，"
                f"看到和 {_group_text(got_positions, seen.get('group'))} 共用"
            )
    for position in sorted({p for p, e in got_positions.items() if wanted(e)} - set(want_positions)):
        raise Fail(f"{where}：{position} 不該有標籤，看到 {spec_text(got_positions[position].get('spec'))}")


def _group_text(positions: dict[str, Any], group: Any) -> str:
    members = sorted(p for p, e in positions.items() if e.get("group") == group)
    return "、".join(members) if len(members) > 1 else "誰都不（自己一組）"


def compare_marks(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """``_annotated`` right after the student's annotate, on every node either side labelled."""
    got_marks, want_marks = got.get("annotated", {}), want.get("annotated", {})
    for node in sorted(set(got_marks) | set(want_marks)):
        expect(
            bool(got_marks.get(node)) == bool(want_marks.get(node)),
            f"{where}：{node} 的 _annotated 預期 {bool(want_marks.get(node))}，看到 {bool(got_marks.get(node))}",
        )


def compare_prepared(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Observers on every edge, shared the same way, each instance of the same kind and class."""
    compare_observers(got, want, where)
    for index, want_record in enumerate(want["instances"]):
        got_class = got["instances"][index].get("class")
        expect(
            got_class == want_record.get("class"),
            f"{where}：observer 實例 #{index} 預期是 {want_record.get('class')}，看到 {got_class}",
        )


def compare_case(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Labels first (the clearer message), then the observers they gave."""
    compare_labels(got["labels"], want["labels"], where)
    compare_prepared(got["prepared"], want["prepared"], where)


def _converted_adds(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    paths = want["converted"]["paths"]
    consumers = [name for name in paths if name.startswith(("add", "relu"))]
    compare_paths(got["converted"], want["converted"], where, consumers)


# --- AddQuantizer ---------------------------------------------------------------------------------


@check("add_quantizer", 1, "AddQuantizer(share=False)：每個 add 的輸入與輸出各有自己的 observer 實例")
def test_add_separate(seen, expected):
    got, want = value(seen, "separate"), value(expected, "separate")
    compare_case(got["two_inputs"], want["two_inputs"], "a + b")
    compare_case(got["mixed"], want["mixed"], "有純量、常數、alpha 的幾個 add")


@check("add_quantizer", 1, "AddQuantizer(share=True) 在 residual 上：add 的三個位置共用同一個 observer 實例")
def test_add_shared_residual(seen, expected):
    compare_case(value(seen, "shared_residual"), value(expected, "shared_residual"), "residual")


@check(
    "add_quantizer",
    1,
    "AddQuantizer(share=True) 在沒看過的模型上：每個 add 的輸入與輸出共用 observer 實例，名字像 add 的不算",
)
def test_add_shared_branches(seen, expected):
    got, want = value(seen, "shared_branches"), value(expected, "shared_branches")
    compare_case(got["branches"], want["branches"], "三個分支相加的模型")
    compare_case(got["look_alikes"], want["look_alikes"], "輸入叫 add、還有 addmm 的模型")
    compare_case(got["renamed"], want["renamed"], "node 名字被 pass 對調的圖（叫 mul_90 的是 add、叫 add_91 的是 mul）")


@check("add_quantizer", 1, "常數與純量不貼標籤：add(x, self.b)、add(self.b, x)、add(x, 0.5) 只量化 activation")
def test_add_constants(seen, expected):
    got, want = value(seen, "constants"), value(expected, "constants")
    for case, where in (("constants", "有常數與純量的 add"), ("mixed", "有純量、常數、alpha 的幾個 add")):
        prepared = got[case]["prepared"]
        labelled = sorted({o["observes"] for o in prepared["observers"]} & set(prepared["constants"]))
        expect(
            not labelled, f"{where}：模型常數（get_attr）{labelled} 被貼了標籤：常數不是 activation，不該有 observer"
        )
        compare_case(got[case], want[case], where)


@check("add_quantizer", 1, "add(r, r) 兩個輸入是同一個 node：只貼一條邊，和輸出共用")
def test_add_self(seen, expected):
    compare_case(value(seen, "self_add"), value(expected, "self_add"), "r + r 與 torch.add(r, r, alpha=2)")


@check("add_quantizer", 1, "convert 之後：add 的每個輸入與輸出都經過同一組 scale / zero point 的 q → dq")
def test_add_converted(seen, expected):
    _converted_adds(value(seen, "shared_residual"), value(expected, "shared_residual"), "residual")
    got, want = value(seen, "shared_branches"), value(expected, "shared_branches")
    _converted_adds(got["branches"], want["branches"], "三個分支相加的模型")
    got, want = value(seen, "constants"), value(expected, "constants")
    _converted_adds(got["mixed"], want["mixed"], "有純量、常數、alpha 的幾個 add")


@check(
    "add_quantizer",
    1,
    "尊重 _annotated：別人標過的 add 不改，沒人認領的標籤照規則重貼，自己標過的 add 設 _annotated = True",
)
def test_add_pre_annotated(seen, expected):
    got, want = value(seen, "pre_annotated"), value(expected, "pre_annotated")
    where = "((a + b) + c) + d：add 已被別人標過、add_1 有一張 _annotated=False 的標籤"
    compare_labels(got["labels"], want["labels"], where)
    compare_marks(got["labels"], want["labels"], where)
    compare_prepared(got["prepared"], want["prepared"], where + "，之後再跑一個 Quantizer")


# --- CatQuantizer ---------------------------------------------------------------------------------


@check(
    "cat_quantizer",
    1,
    "CatQuantizer 在 cat_pool 上共用一個 observer 實例；別人標過的 cat 不改、自己標過的設 _annotated",
)
def test_cat_pool(seen, expected):
    got, want = value(seen, "cat_pool"), value(expected, "cat_pool")
    compare_case(got["cat_pool"], want["cat_pool"], "cat_pool")
    where = "三個 cat 串接：cat 已被別人標過、cat_1 有一張 _annotated=False 的標籤"
    compare_labels(got["claimed"]["labels"], want["claimed"]["labels"], where)
    compare_marks(got["claimed"]["labels"], want["claimed"]["labels"], where)
    compare_prepared(got["claimed"]["prepared"], want["claimed"]["prepared"], where + "，之後再跑一個 Quantizer")


@check("cat_quantizer", 1, "CatQuantizer 在三個輸入的 cat 上：範圍不同的三個分支共用一組 qparams")
def test_cat_three_way(seen, expected):
    got, want = value(seen, "three_way"), value(expected, "three_way")
    compare_case(got, want, "三個分支的 cat")
    compare_paths(got["converted"], want["converted"], "三個分支的 cat（convert 之後）", ["cat"])


@check(
    "cat_quantizer",
    1,
    "常數不量化、重複的輸入只貼一次、常數排第一個也一樣；輸入叫 cat 的 placeholder、名字被改成別的 op 的 node 都看 target",
)
def test_cat_constant_and_repeat(seen, expected):
    got, want = value(seen, "constant_and_repeat"), value(expected, "constant_and_repeat")
    compare_case(got["mix"], want["mix"], "cat([r, 常數, r])、cat([常數, r * 2, r])、cat([r])")
    compare_paths(
        got["mix"]["converted"], want["mix"]["converted"], "同一個模型 convert 之後", ["cat_1", "cat_2", "cat_3"]
    )
    compare_case(
        got["renamed"], want["renamed"], "node 名字被 pass 對調的圖（叫 stack_90 的是 cat、叫 cat_91 的是 stack）"
    )

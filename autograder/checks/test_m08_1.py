"""Hidden checks of M08-1: quantizer_report's ops left without a spec, and its shared observer instances.

Assumptions a half-understanding can bake in, and the hidden input that refutes each:

- "an op is annotated when it has a label object" (``unannotated_ops``): claimed labels without a
  spec keep cat and a conv in fp32 (``kept``);
- "``_annotated`` says whether an op is annotated": the same empty claimed labels, and a sigmoid
  labelled with ``_annotated`` left False (``kept``);
- "an input edge named with a ``None`` spec counts": cat's claimed label names each edge with None
  (``kept``);
- "only the output spec counts" / "only the input specs count": conv → relu, add → relu and
  linear → relu put the specs on the inputs of the first op and the output of the last (``adds``,
  ``pool_chain``);
- "a producer is annotated when a consumer's ``input_qspec_map`` names it": abs feeds a conv and
  sigmoid a linear; the edges from them are quantized by their consumers' labels, they have none
  (``nobody``), and so do reshape / transpose with torchao's testing quantizer (``pool_chain``);
- "``getitem`` is an op": cat reads two getitems of a split (``cat_inputs``);
- "BN is still there": a conv → BN → relu whose BN prepare folds (``kept``);
- "sharing means the same observer class", "... the same module name", "... ``named_modules()``",
  "... one observer read by several ops", "the groups are what SharedQuantizationSpec names":
  ExecuTorch's cat shares one instance across its inputs, its output and max_pool2d's, chained
  through cat (``cat_inputs``, ``pool_chain``), while torchao's testing quantizer shares none and an
  input read by two convs is one observer of one node (``cat_inputs``, ``kept``);
- "the group holds the ops that read the observer" (``node.users``): the groups are named by what
  each observer observes (every case);
- a fixed order of cat's inputs: the seed permutes them (``cat_inputs``).

The model and example inputs a student's function receives are plain modules and tensors: what it
does to them is not recorded in the sandbox (only graphs are), so no check can see it; the report
is read from the graph the function prepares itself.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

QUANTIZER_WORDS = {
    "torchao": "torchao 測試版",
    "executorch": "ExecuTorch 版",
    "executorch_per_tensor": "ExecuTorch 版（per-tensor weight）",
}


def _names(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]" if names else "[]（空的）"


def _groups(groups: list[list[str]]) -> str:
    return "、".join(_names(g) for g in groups) if groups else "[]（沒有共用的實例）"


def compare(seen: Any, expected: Any, case: str, part: str, where: str, quantizers: tuple[str, ...] = ()) -> None:
    """One case's ``unannotated`` or ``shared`` for each Quantizer it ran (all of them by default)."""
    got, want = value(seen, case), value(expected, case)
    for which in quantizers or tuple(want):
        label = f"{where}，{QUANTIZER_WORDS[which]}"
        mine = got.get(which) if isinstance(got, dict) else None
        expect(isinstance(mine, dict) and part in mine, f"{label}：證據格式不對")
        if mine[part] == want[which][part]:
            continue
        if part == "unannotated":
            extra = sorted(set(mine[part]) - set(want[which][part]))
            missing = sorted(set(want[which][part]) - set(mine[part]))
            detail = "".join(
                [f"；多了 {_names(extra)}" if extra else "", f"；少了 {_names(missing)}" if missing else ""]
            )
            raise Fail(f"{label}：沒標到的 op 預期 {_names(want[which][part])}，看到 {_names(mine[part])}{detail}")
        raise Fail(
            f"{label}：共用一個 observer 實例的 node 預期 {_groups(want[which][part])}，看到 {_groups(mine[part])}"
        )


# --- unannotated ---------------------------------------------------------------------------------


@check("quantizer_report", 1, "cat 的輸入是串列：torchao 測試版漏標 cat 與 max_pool2d，ExecuTorch 版都標；getitem 不算")
def test_unannotated_cat(seen, expected):
    compare(seen, expected, "cat_inputs", "unannotated", "split → cat（輸入是串列）→ max_pool2d 的模型")


@check("quantizer_report", 1, "只有輸入規格或只有輸出規格的 op（conv → relu、add → relu、linear → relu）算標到")
def test_unannotated_patterns(seen, expected):
    compare(seen, expected, "adds", "unannotated", "add → relu、殘差 add、linear → relu 的模型")
    compare(seen, expected, "pool_chain", "unannotated", "conv → relu → max_pool2d → conv → reshape / transpose 的模型")


@check(
    "quantizer_report",
    1,
    "沒有 Quantizer 會標的 op（abs、sigmoid、softmax、tanh）：只被 consumer 的輸入邊量化的 producer 也算沒標到",
)
def test_unannotated_nobody(seen, expected):
    compare(seen, expected, "nobody", "unannotated", "abs → conv、mean、sigmoid → linear、softmax、tanh 的模型")


@check("quantizer_report", 1, "看規格：規格全是 None 的標籤算沒標到，_annotated 沒設的標籤算標到；BN 已折進 conv")
def test_unannotated_specs(seen, expected):
    compare(
        seen,
        expected,
        "kept",
        "unannotated",
        "BN 折進 conv；cat（每條邊都是 None）與一個 conv 貼了沒有規格的標籤；sigmoid 的標籤沒設 _annotated",
    )


# --- shared --------------------------------------------------------------------------------------


@check("quantizer_report", 2, "ExecuTorch 版的 cat：每個輸入、cat 與 max_pool2d 的輸出共用一個 observer 實例")
def test_shared_cat(seen, expected):
    compare(seen, expected, "cat_inputs", "shared", "split → cat（輸入是串列）→ max_pool2d 的模型", ("executorch",))


@check("quantizer_report", 1, "max_pool2d、mean、flatten、reshape、transpose 和上一個 op 的輸出共用實例")
def test_shared_propagated(seen, expected):
    compare(seen, expected, "pool_chain", "shared", "conv → relu → max_pool2d → conv → reshape / transpose 的模型")
    compare(seen, expected, "nobody", "shared", "abs → conv、mean、sigmoid → linear、softmax、tanh 的模型")
    compare(seen, expected, "adds", "shared", "add → relu、殘差 add、linear → relu 的模型")


@check("quantizer_report", 1, "沒有共用的實例時回傳空 list（一個 observer 的輸出給好幾個 op 用不算共用）")
def test_shared_none(seen, expected):
    compare(seen, expected, "cat_inputs", "shared", "split → cat（輸入是串列）→ max_pool2d 的模型", ("torchao",))
    compare(seen, expected, "kept", "shared", "cat 與一個 conv 留在 fp32 的模型")

"""Hidden checks of M04-3: FusionQuantizer puts observers on pattern boundaries and none inside."""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, compare_observers, compare_paths, path_text, value

NOTEBOOK = "M04-3"


def internal_edges(want: dict[str, Any]) -> list[tuple[str, str]]:
    """Edges inside a fused pattern, from the answer key's labels: both ends claimed, neither end labelled."""
    labels = want["labels"]
    edges = []
    for consumer, inputs in want["prepared"]["edges"].items():
        mine = labels.get(consumer)
        if not mine or not mine["claimed"]:
            continue
        for source, _chain in inputs:
            theirs = labels.get(source)
            if theirs and theirs["claimed"] and not theirs["output"] and source not in mine["inputs"]:
                edges.append((source, consumer))
    return edges


def _edge_map(prepared: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    try:
        return {consumer: {src: chain for src, chain in inputs} for consumer, inputs in prepared["edges"].items()}
    except (KeyError, TypeError, ValueError):
        raise Fail("證據格式不對") from None


def compare_fusion(got: Any, want: dict[str, Any], where: str) -> None:
    """No observer inside a pattern, as many observers as the key on each boundary edge, then the whole layout."""
    if not isinstance(got, dict) or "prepared" not in got:
        raise Fail(f"{where}：證據格式不對")
    edges = _edge_map(got["prepared"])
    for source, consumer in internal_edges(want):
        chain = edges.get(consumer, {}).get(source)
        if chain is None:
            raise Fail(f"{where}：圖上找不到邊 {source} → {consumer}")
        if chain:
            raise Fail(f"{where}：{source} → {consumer} 在同一個 pattern 裡面，預期沒有 observer，看到 {len(chain)} 個")
    for consumer, inputs in want["prepared"]["edges"].items():
        for source, want_chain in inputs:
            if not want_chain:
                continue
            chain = edges.get(consumer, {}).get(source) or []
            if len(chain) != len(want_chain):
                raise Fail(
                    f"{where}：pattern 的邊界 {source} → {consumer} 預期 {len(want_chain)} 個 observer，"
                    f"看到 {len(chain)} 個"
                )
    compare_observers(got["prepared"], want["prepared"], where)


@check(
    "fusion_quantizer", 1, "[(CONV, RELU), (LINEAR, RELU)]：conv → relu 與 linear → relu 中間沒有 observer，邊界都有"
)
def test_chain(seen, expected):
    compare_fusion(value(seen, "chain"), value(expected, "chain"), "conv/linear 串起來的模型")


@check(
    "fusion_quantizer",
    1,
    "[(CONV, RELU), (ADD, RELU), (CONV,)]：residual block 的 add → relu 融合，單獨的 conv 前後都有",
)
def test_residual(seen, expected):
    compare_fusion(value(seen, "residual"), value(expected, "residual"), "residual block")


@check(
    "fusion_quantizer",
    1,
    "三個 op 的 pattern (CONV, ADD, RELU)：conv 是 add 的第二個輸入，另一個輸入從外面進來要貼標籤",
)
def test_three_ops(seen, expected):
    compare_fusion(value(seen, "three_ops"), value(expected, "three_ops"), "relu(x + conv(x))")


@check("fusion_quantizer", 1, "conv 的輸出還有別的使用者：conv → relu 不能融，conv 單獨量化")
def test_shared_output(seen, expected):
    compare_fusion(value(seen, "shared_output"), value(expected, "shared_output"), "relu(conv(x)) + conv(x)")


@check("fusion_quantizer", 1, "pattern 的順序就是優先順序：先被認領（_annotated）的 node 不再被後面的 pattern 使用")
def test_priority(seen, expected):
    got, want = value(seen, "priority"), value(expected, "priority")
    if not isinstance(got, dict):
        raise Fail("證據格式不對")
    compare_fusion(got.get("single_first"), want["single_first"], "patterns = [(RELU,), (CONV, RELU)]")
    compare_fusion(got.get("pair_first"), want["pair_first"], "patterns = [(CONV, RELU), (RELU,)]")


@check("fusion_quantizer", 1, "每個 member 都設 _annotated = True：後面的 Quantizer 不會在 pattern 裡面插 observer")
def test_marks_members(seen, expected):
    where = "(CONV, RELU, MAX_POOL) 之後接一個替沒人認領的 op 貼輸出標籤的 Quantizer"
    compare_fusion(value(seen, "marks_members"), value(expected, "marks_members"), where)


@check("fusion_quantizer", 1, "convert 之後：pattern 裡面沒有 q/dq，邊界的 q/dq 參數和答案相同")
def test_converted(seen, expected):
    for case, where in (("chain", "conv/linear 串起來的模型"), ("residual", "residual block")):
        got, want = value(seen, case), value(expected, case)
        if not isinstance(got, dict) or "converted" not in got:
            raise Fail(f"{where}：證據格式不對")
        paths = {c: {s: steps for s, steps in inputs} for c, inputs in got["converted"]["paths"].items()}
        for source, consumer in internal_edges(want):
            steps = paths.get(consumer, {}).get(source)
            if steps:
                raise Fail(
                    f"{where}（convert 之後）：{source} → {consumer} 在 pattern 裡面，預期沒有 q/dq，"
                    f"看到 {path_text(steps)}"
                )
        compare_paths(got["converted"], want["converted"], f"{where}（convert 之後）")

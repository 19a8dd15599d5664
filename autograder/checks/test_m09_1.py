"""Hidden checks of M09-1: linear_roles (the nn.Linear of each linear node) and annotation_census.

Assumptions a half-understanding can bake in, and the hidden input that refutes each:

linear_roles
- "the linears come in the order q, k, v, out, fc1, fc2 per block, then head": a model whose blocks
  run the MLP first (``mlp_first``) and one that applies a block several times (``shared_layers``);
- "the module is the first entry of ``nn_module_stack``" (the root, ``""``), "its type", "the node's
  name": every case;
- "every node with an ``nn_module_stack`` is a linear": layer_norm, matmul… belong to modules too (every case);
- "the module's name is in the bias's name" (``node.args[2]``): linears without bias (``no_bias``);
- "the stack's key is the module's name" (``L__self__blocks.0.attn.q``, ``…@1`` on a second call),
  "each module gives one node": shared layers (``shared_layers``).

annotation_census
- "an op is annotated when an observer follows it": layer_norm, gelu, the embeddings and the reshape
  before ``out`` feed annotated consumers whose input edges are observed (``static``, ``dynamic``,
  ``module_type``), and a graph only annotated has no observers at all (``annotated_only``);
- "a producer named in a consumer's ``input_qspec_map`` is annotated": the same layer_norms and gelus;
- "only the output spec counts": dynamic linears have input specs only (``dynamic``);
- "only the input specs count", "``_annotated`` says it", "a label object says it": an empty claimed
  label on the head and output-only labels with ``_annotated`` False on the softmaxes (``other_labels``);
- "only a ``QuantizationSpec`` counts": the reshape / transpose after q, k, v and the second input of
  add carry ``SharedQuantizationSpec`` only (``static``, ``module_type``);
- "count observers", "count every node" (get_attr, call_module): every prepared case.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, expect, value

# --- linear_roles ---------------------------------------------------------------------------------


def compare_roles(seen: Any, expected: Any, case: str, where: str) -> None:
    got, want = value(seen, case), value(expected, case)
    expect(isinstance(got, dict), f"{where}：證據格式不對")
    if got == want:
        return
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    if extra:
        raise Fail(
            f"{where}：{', '.join(extra[:5])} 不是 aten.linear.default 的 node（預期 {len(want)} 個 linear node）"
        )
    if missing:
        raise Fail(f"{where}：少了 linear node {', '.join(missing[:5])}（預期 {len(want)} 個）")
    wrong = [name for name in want if got[name] != want[name]]
    name = wrong[0]
    raise Fail(f"{where}：{name} 來自 {want[name]!r}，看到 {got[name]!r}（{len(wrong)} 個 node 不對）")


@check("linear_roles", 1, "其他大小、層數、post-LN 與 ReLU 的 TinyLM：每個 linear node 對到最內層的 nn.Linear")
def test_roles_variants(seen, expected):
    compare_roles(seen, expected, "variants", "沒看過的 TinyLM（其他大小與層數，pre/post-LN、GELU/ReLU）")


@check("linear_roles", 1, "沒有 bias 的 linear 也要對到")
def test_roles_no_bias(seen, expected):
    compare_roles(seen, expected, "no_bias", "linear 都沒有 bias 的 TinyLM")


@check("linear_roles", 1, "不假設順序：MLP 在 attention 前面的 block")
def test_roles_order(seen, expected):
    compare_roles(seen, expected, "mlp_first", "每個 block 先算 MLP、再算 attention 的模型")


@check("linear_roles", 1, "同一個 block 用好幾次：一個 nn.Linear 對到好幾個 linear node")
def test_roles_shared_layers(seen, expected):
    compare_roles(seen, expected, "shared_layers", "同一個 block 連用好幾次的模型（共用的層）")


# --- annotation_census ----------------------------------------------------------------------------


def _counts(counts: Any) -> str:
    if not isinstance(counts, dict):
        return "沒有這個 op"
    return f"標了 {counts.get('annotated')}、沒標 {counts.get('unannotated')}"


def compare_census(seen: Any, expected: Any, case: str, where: str) -> None:
    got, want = value(seen, case), value(expected, case)
    expect(isinstance(got, dict), f"{where}：證據格式不對")
    if got == want:
        return
    extra = sorted(set(got) - set(want))
    if extra:
        raise Fail(f"{where}：圖上的 call_function node 沒有 {', '.join(extra[:4])}（key 是 str(node.target)）")
    for op, counts in want.items():
        if got.get(op) != counts:
            raise Fail(f"{where}：{op} 預期 {_counts(counts)}，看到 {_counts(got.get(op))}")


@check("annotation_census", 2, "static config：linear、add、mul 與它們之間的 reshape / transpose 標到，其他留在浮點")
def test_census_static(seen, expected):
    compare_census(seen, expected, "static", "static config prepare 之後的 TinyLM")


@check("annotation_census", 1, "dynamic config：只有 linear 標到，而且只有輸入規格")
def test_census_dynamic(seen, expected):
    compare_census(seen, expected, "dynamic", "dynamic config prepare 之後的模型（MLP 在 attention 前面）")


@check("annotation_census", 1, "set_module_type 只設定一種 module：其他 module 的 op 都沒標")
def test_census_module_type(seen, expected):
    compare_census(
        seen, expected, "module_type", "static config 只用 set_module_type 設在 Mlp 或 CausalSelfAttention 上"
    )


@check("annotation_census", 1, "看規格：空的認領標籤不算標到，_annotated 沒設、只有輸出規格的標籤算標到")
def test_census_other_labels(seen, expected):
    compare_census(
        seen, expected, "other_labels", "head 貼了空的認領標籤、softmax 貼了只有輸出規格（_annotated 沒設）的標籤"
    )


@check("annotation_census", 1, "只 annotate、還沒 prepare 的圖（沒有 observer）也數得出來")
def test_census_annotated_only(seen, expected):
    compare_census(seen, expected, "annotated_only", "只呼叫 annotate、還沒插 observer 的圖")

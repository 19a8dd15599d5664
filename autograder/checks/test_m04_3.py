"""Hidden checks of M04-3: FusionQuantizer puts observers on pattern boundaries and none inside.

Each case is judged twice: the observers after prepare_pt2e (how many on every edge, which
edges share an instance, of which class and range), compared in a form that does not depend
on the order in which labels were written; and the annotations right after the student's
``annotate`` (which nodes are claimed, which input edges and outputs carry which spec,
observer class included), read from the annotations themselves.

Assumptions a half-understanding bakes in, and the hidden case that refutes each:
- the next member is the next node in graph order, or must be adjacent → chain, interleaved;
- members recognised by node name → interleaved (inputs called conv2d and relu), module_names (every
  op renamed after its module: ``relu`` is a conv, ``conv`` a relu, ``relu_head`` a linear);
- the chain follows ``args[0]`` only (a conv that is an add's second input) → three_ops;
- member inputs read from ``args`` without flattening lists (a cat's list), constants labelled →
  cat_list, constant_operands, residual;
- only the first member's inputs labelled, or the edge from the previous member labelled too, or
  the previous member recognised by target (two relus into one add) → three_ops, relu_pair;
- the output label on the first member, or on every member, or missing → chain, residual;
- inputs labelled as the producers' outputs (every consumer of the producer quantized) → shared_output;
- middle members with other consumers fused, or the last member required to have one consumer →
  shared_output, many_users;
- what another Quantizer claimed first ignored, labels taken for claims, only the first member
  checked, nodes walked before patterns (the order of patterns is not a priority) → priority,
  claimed_before;
- members not all marked ``_annotated`` → marks_members, marks_boundaries;
- one match per pattern, pairs only → chain, three_ops;
- XNNPACK's HistogramObserver instead of ``act_spec()`` → every case.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import Fail, check, compare_paths, path_text, spec_text, value

# --- annotations ----------------------------------------------------------------------------------


def normalize(annotations: Any, where: str) -> dict[str, dict[str, Any]]:
    """Per node: claimed, the spec of each labelled input edge, the output spec.

    A ``None`` spec is the same as no label, and an unclaimed annotation without any spec is
    the same as none: prepare_pt2e and later Quantizers treat them alike.
    """
    if not isinstance(annotations, dict):
        raise Fail(f"{where}：證據格式不對")
    out: dict[str, dict[str, Any]] = {}
    for node, ann in annotations.items():
        if ann is None:
            continue
        if not isinstance(ann, dict) or "inputs" not in ann:
            raise Fail(f"{where}：{node} 的標籤不是 QuantizationAnnotation（看到 {ann!r}）")
        inputs = {str(src): spec for src, spec in ann["inputs"] if spec is not None}
        claimed = bool(ann.get("annotated"))
        output = ann.get("output")
        if not claimed and not inputs and output is None:
            continue
        out[node] = {"claimed": claimed, "inputs": inputs, "output": output}
    return out


def compare_annotations(got: Any, want: Any, where: str) -> None:
    """The same nodes claimed, the same input edges and outputs labelled, with the same specs."""
    got_n, want_n = normalize(got, where), normalize(want, where)
    for node, mine in got_n.items():
        if node not in want_n:
            labels = sorted(mine["inputs"]) + (["輸出"] if mine["output"] is not None else [])
            claim = "，_annotated=True" if mine["claimed"] else ""
            raise Fail(f"{where}（你的 annotate 之後）：{node} 不在任何 pattern 裡，不該有標籤，看到 {labels}{claim}")
    for node, theirs in want_n.items():
        mine = got_n.get(node)
        if mine is None:
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 預期有標籤（_annotated={theirs['claimed']}），看到沒有標籤"
            )
        if mine["claimed"] != theirs["claimed"]:
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 的 _annotated 預期 {theirs['claimed']}，看到 {mine['claimed']}"
            )
        if sorted(mine["inputs"]) != sorted(theirs["inputs"]):
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 預期貼標籤的輸入邊來自 {sorted(theirs['inputs'])}，"
                f"看到 {sorted(mine['inputs'])}"
            )
        for source, spec in theirs["inputs"].items():
            if mine["inputs"][source] != spec:
                raise Fail(
                    f"{where}（你的 annotate 之後）：邊 {source} → {node} 的規格預期 {spec_text(spec)}，"
                    f"看到 {spec_text(mine['inputs'][source])}"
                )
        if mine["output"] != theirs["output"]:
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 的輸出標籤預期 {spec_text(theirs['output'])}，"
                f"看到 {spec_text(mine['output'])}"
            )


# --- observers ------------------------------------------------------------------------------------


def record_text(record: Any) -> str:
    if not isinstance(record, dict):
        return repr(record)
    return f"{record.get('class')} {record.get('dtype')} [{record.get('qmin')},{record.get('qmax')}] {record.get('qscheme')}"


def layout(prepared: Any, where: str) -> dict[tuple[str, str], list[tuple[tuple[str, ...], str]]]:
    """Every edge with its observers, each named by the edges its instance observes and by its kind.

    Instance numbers depend on the order observers were inserted; the set of edges an instance
    serves does not, so two solutions that label the same edges in another order compare equal.
    """
    try:
        edges = {
            (str(src), str(dst)): list(chain) for dst, inputs in prepared["edges"].items() for src, chain in inputs
        }
        records = prepared["instances"]
        serves: dict[int, set[str]] = {}
        for (src, dst), chain in edges.items():
            for instance in chain:
                serves.setdefault(instance, set()).add(f"{src} → {dst}")
        return {
            edge: [(tuple(sorted(serves[i])), record_text(records[i])) for i in chain] for edge, chain in edges.items()
        }
    except (KeyError, TypeError, IndexError, ValueError, AttributeError):
        raise Fail(f"{where}：證據格式不對") from None


def _inside(edge: tuple[str, str], want_labels: dict[str, dict[str, Any]]) -> bool:
    """Both ends claimed in the answer, the producer's output unlabelled and the edge unlabelled: inside a pattern."""
    src, dst = edge
    producer, consumer = want_labels.get(src), want_labels.get(dst)
    return bool(
        producer
        and consumer
        and producer["claimed"]
        and consumer["claimed"]
        and producer["output"] is None
        and src not in consumer["inputs"]
    )


def compare_layout(got: Any, want: Any, where: str, want_labels: dict[str, dict[str, Any]]) -> None:
    got_layout, want_layout = layout(got, where), layout(want, where)
    for edge, want_chain in want_layout.items():
        got_chain = got_layout.get(edge)
        src, dst = edge
        if got_chain is None:
            raise Fail(f"{where}：圖上找不到邊 {src} → {dst}")
        if len(got_chain) != len(want_chain):
            if not want_chain and _inside(edge, want_labels):
                raise Fail(f"{where}：{src} → {dst} 在同一個 pattern 裡面，預期沒有 observer，看到 {len(got_chain)} 個")
            raise Fail(f"{where}：邊 {src} → {dst} 預期 {len(want_chain)} 個 observer，看到 {len(got_chain)} 個")
    for edge, want_chain in want_layout.items():
        got_chain = got_layout[edge]
        src, dst = edge
        for (got_serves, got_kind), (want_serves, want_kind) in zip(got_chain, want_chain, strict=True):
            if got_kind != want_kind:
                raise Fail(f"{where}：邊 {src} → {dst} 的 observer 預期 {want_kind}，看到 {got_kind}")
            if got_serves != want_serves:
                raise Fail(
                    f"{where}：邊 {src} → {dst} 的 observer 預期同時觀察 {list(want_serves)}，"
                    f"看到同時觀察 {list(got_serves)}"
                )
    extra = sorted(edge for edge, chain in got_layout.items() if chain and edge not in want_layout)
    if extra:
        raise Fail(f"{where}：邊 {extra[0][0]} → {extra[0][1]} 預期沒有 observer")


def compare_fusion(got: Any, want: Any, where: str) -> None:
    """Observers on every edge as in the answer, then the annotations the student wrote."""
    if not isinstance(got, dict) or "prepared" not in got or "annotations" not in got:
        raise Fail(f"{where}：證據格式不對")
    want_labels = normalize(want["annotations"], where)
    compare_layout(got["prepared"], want["prepared"], where, want_labels)
    compare_annotations(got["annotations"], want["annotations"], where)


def judge_cases(seen: Any, expected: Any, cases: dict[str, str]) -> None:
    for case, where in cases.items():
        compare_fusion(value(seen, case), value(expected, case), where)


# --- checks ---------------------------------------------------------------------------------------


@check(
    "fusion_quantizer",
    1,
    "conv / linear 串起來的模型：conv → relu、linear → relu 中間沒有 observer；relu 不是圖上緊接在 conv 後面的 node、"
    "node 的名字和 op 對不上時也一樣",
)
def test_chain(seen, expected):
    judge_cases(
        seen,
        expected,
        {
            "chain": "[(CONV, RELU), (LINEAR, RELU)]，conv/linear 串起來的模型",
            "interleaved": "[(CONV, RELU), (ADD,)]，圖的順序上 conv 後面緊接著的是別的 relu（輸入名叫 conv2d、relu）",
            "module_names": (
                "[(CONV, RELU), (LINEAR, RELU)]，op 依 module 改過名的圖（叫 relu_90 的是 conv、叫 conv_91 的是 relu、"
                "叫 linear_92 的是 conv、叫 relu_head_94 的是 linear）"
            ),
        },
    )


@check(
    "fusion_quantizer",
    1,
    "residual block 的 add → relu；add 的另一個運算元是純量或常數、cat 的輸入在 list 裡：都只標從外面進來的 activation",
)
def test_residual(seen, expected):
    judge_cases(
        seen,
        expected,
        {
            "residual": "[(CONV, RELU), (ADD, RELU), (CONV,)]，residual block",
            "constant_operands": "[(ADD, RELU), (CONV,)]，relu(y + 0.5) * relu(y + 常數 tensor)",
            "cat_list": "[(CONV, CAT, RELU)]，relu(cat([conv(x), x]))",
        },
    )


@check(
    "fusion_quantizer",
    1,
    "從外面進到中間 member 的邊要貼標籤：conv 是 add 的第二個輸入；add 的兩個輸入都是 relu 時，只有上一個 member 那條不貼",
)
def test_three_ops(seen, expected):
    judge_cases(
        seen,
        expected,
        {
            "three_ops": "[(CONV, ADD, RELU)]，relu(x + conv(x))",
            "relu_pair": "[(RELU, ADD), (CONV,)]，relu(conv1(x)) + relu(conv2(x))",
        },
    )


@check(
    "fusion_quantizer",
    1,
    "中間的 node 有別的 consumer 就不能融；最後一個 member 或 pattern 外的 node 有好幾個 consumer 則沒關係",
)
def test_shared_output(seen, expected):
    judge_cases(
        seen,
        expected,
        {
            "shared_output": "[(CONV, RELU), (CONV,), (ADD,)]，relu(conv(x)) + conv(x)",
            "many_users": "[(CONV, RELU), (CONV,), (ADD,)]，max_pool2d 餵兩個 conv、relu 的輸出給兩個 op",
        },
    )


@check(
    "fusion_quantizer",
    1,
    "已被認領（_annotated=True）的 node 不再使用：pattern 的順序就是優先順序；有標籤但沒認領的 node 照樣可以融",
)
def test_priority(seen, expected):
    got, want = value(seen, "priority"), value(expected, "priority")
    if not isinstance(got, dict):
        raise Fail("證據格式不對")
    compare_fusion(got.get("single_first"), want["single_first"], "patterns = [(RELU,), (CONV, RELU)]")
    compare_fusion(got.get("pair_first"), want["pair_first"], "patterns = [(CONV, RELU), (RELU,)]")
    where = (
        "[(CONV, RELU), (CONV,)]，之前的 Quantizer 已經認領第一個 relu（空標籤、_annotated=True），"
        "並替第二個 conv 的輸入貼了標籤但沒有認領"
    )
    compare_fusion(value(seen, "claimed_before"), value(expected, "claimed_before"), where)


@check("fusion_quantizer", 1, "每個 member 都設 _annotated = True：後面的 Quantizer 不會在 pattern 裡面插 observer")
def test_marks_members(seen, expected):
    judge_cases(
        seen,
        expected,
        {
            "marks_members": "(CONV, RELU, MAX_POOL) 之後接一個替沒人認領的 op 貼輸出標籤的 Quantizer",
            "marks_boundaries": "(CONV, RELU) 之後接一個替沒人認領的 op 貼輸出標籤的 Quantizer",
        },
    )


@check("fusion_quantizer", 1, "convert 之後：pattern 裡面沒有 q/dq，邊界的 q/dq 參數和答案相同")
def test_converted(seen, expected):
    for case, where in (("chain", "conv/linear 串起來的模型"), ("residual", "residual block")):
        got, want = value(seen, case), value(expected, case)
        if not isinstance(got, dict) or not isinstance(got.get("converted"), dict):
            raise Fail(f"{where}：證據格式不對")
        want_labels = normalize(want["annotations"], where)
        try:
            paths = {c: {s: steps for s, steps in inputs} for c, inputs in got["converted"]["paths"].items()}
            want_paths = want["converted"]["paths"]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise Fail(f"{where}：證據格式不對") from None
        for consumer, inputs in want_paths.items():
            for source, want_steps in inputs:
                steps = paths.get(consumer, {}).get(source)
                if steps and not want_steps and _inside((source, consumer), want_labels):
                    raise Fail(
                        f"{where}（convert 之後）：{source} → {consumer} 在 pattern 裡面，預期沒有 q/dq，"
                        f"看到 {path_text(steps)}"
                    )
        compare_paths(got["converted"], want["converted"], f"{where}（convert 之後）")

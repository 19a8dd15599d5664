"""Hidden checks of M04-3: FusionQuantizer puts observers on pattern boundaries and none inside.

Each case is judged twice: the observers after prepare_pt2e (how many on every edge, which
edges share an instance, of which class and range), compared in a form that does not depend
on the order in which labels were written; and the annotations right after the student's
``annotate`` (which nodes are claimed, which input edges and outputs carry which spec,
observer class included), read from the annotations themselves.

The half-understandings these checks refute are the misconceptions of the exercise's record
(``selfcheck/public/m04_3.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

import itertools
from typing import Any

from autograder.checks.support import Fail, check, compare_paths, detects, path_text, spec_text, value
from selfcheck import diagnosis
from selfcheck.public import m04_3 as fusion
from selfcheck.public.m04_3 import Label, Place

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
            raise Fail(f"{where}：{node} 的標籤應該是一個 QuantizationAnnotation，你的是 {ann!r}")
        inputs = {str(src): spec for src, spec in ann["inputs"] if spec is not None}
        claimed = bool(ann.get("annotated"))
        output = ann.get("output")
        if not claimed and not inputs and output is None:
            continue
        out[node] = {"claimed": claimed, "inputs": inputs, "output": output}
    return out


def _listed(items: Any) -> str:
    """Names as a phrase: ``x、conv2d``, or 「沒有任何一個」."""
    names = sorted(str(item) for item in items)
    return "、".join(names) if names else "沒有任何一個"


def compare_annotations(got: Any, want: Any, where: str) -> None:
    """The same nodes claimed, the same input edges and outputs labelled, with the same specs."""
    got_n, want_n = normalize(got, where), normalize(want, where)
    for node, mine in got_n.items():
        if node not in want_n:
            parts = [f"{source} → {node} 這條邊" for source in sorted(mine["inputs"])]
            parts += ["它的輸出"] if mine["output"] is not None else []
            labels = "、".join(parts) if parts else "一張空標籤"
            claim = "，而且設了 _annotated=True" if mine["claimed"] else ""
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 不在任何 pattern 裡，不該有標籤，你的貼了{labels}{claim}"
            )
    for node, theirs in want_n.items():
        mine = got_n.get(node)
        if mine is None:
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 應該有標籤（_annotated={theirs['claimed']}），你的沒有標籤"
            )
        if mine["claimed"] != theirs["claimed"]:
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 的 _annotated 應該是 {theirs['claimed']}，你的是 {mine['claimed']}"
            )
        if sorted(mine["inputs"]) != sorted(theirs["inputs"]):
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 貼標籤的輸入邊應該來自 {_listed(theirs['inputs'])}，"
                f"你的來自 {_listed(mine['inputs'])}"
            )
        for source, spec in theirs["inputs"].items():
            if mine["inputs"][source] != spec:
                raise Fail(
                    f"{where}（你的 annotate 之後）：邊 {source} → {node} 的規格應該是 {spec_text(spec)}，"
                    f"你的是 {spec_text(mine['inputs'][source])}"
                )
        if mine["output"] != theirs["output"]:
            raise Fail(
                f"{where}（你的 annotate 之後）：{node} 的輸出標籤應該是 {spec_text(theirs['output'])}，"
                f"你的是 {spec_text(mine['output'])}"
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
                raise Fail(f"{where}：{src} → {dst} 在同一個 pattern 裡面，不該有 observer，你的有 {len(got_chain)} 個")
            raise Fail(f"{where}：邊 {src} → {dst} 應該有 {len(want_chain)} 個 observer，你的有 {len(got_chain)} 個")
    for edge, want_chain in want_layout.items():
        got_chain = got_layout[edge]
        src, dst = edge
        for (got_serves, got_kind), (want_serves, want_kind) in zip(got_chain, want_chain, strict=True):
            if got_kind != want_kind:
                raise Fail(f"{where}：邊 {src} → {dst} 的 observer 應該是 {want_kind}，你的是 {got_kind}")
            if got_serves != want_serves:
                raise Fail(
                    f"{where}：邊 {src} → {dst} 的 observer 應該同時觀察 {_listed(want_serves)}，"
                    f"你的同時觀察 {_listed(got_serves)}"
                )
    extra = sorted(edge for edge, chain in got_layout.items() if chain and edge not in want_layout)
    if extra:
        raise Fail(f"{where}：邊 {extra[0][0]} → {extra[0][1]} 不該有 observer，你的有")


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
            "graph_output": "[(CONV, RELU), (CONV,)]，y = conv1(x) 給 relu，也是模型的輸出（output node 也讀它）",
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
                        f"{where}（convert 之後）：{source} → {consumer} 在 pattern 裡面，不該有 q/dq，"
                        f"你的{path_text(steps)}"
                    )
        compare_paths(got["converted"], want["converted"], f"{where}（convert 之後）")


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m04_3.py) --------
# Each case is a ``Place``: the key's labels and the student's, on the key's graph (the prepared edges, in
# graph order, with each node's inputs in ``all_input_nodes`` order). The relations themselves are
# ``selfcheck.public.m04_3``'s, shared with the preview; the ones that need a hidden case are here.

CHECK_OF = {
    "chain": "test_chain",
    "interleaved": "test_chain",
    "module_names": "test_chain",
    "residual": "test_residual",
    "constant_operands": "test_residual",
    "cat_list": "test_residual",
    "three_ops": "test_three_ops",
    "relu_pair": "test_three_ops",
    "shared_output": "test_shared_output",
    "graph_output": "test_shared_output",
    "many_users": "test_shared_output",
    "priority": "test_priority",
    "claimed_before": "test_priority",
    "marks_members": "test_marks_members",
    "marks_boundaries": "test_marks_members",
}
NAMES_LIE = ("module_names", "interleaved")  # ops renamed after their modules; inputs named like ops
LIST_INPUTS = "cat_list"  # a member whose inputs arrive in a list


def labels_of(annotations: Any) -> dict[str, Label] | None:
    """``describe_annotations`` as data (None when it is not a dict of annotations)."""
    if not isinstance(annotations, dict):
        return None
    found: dict[str, Label] = {}
    for node, ann in annotations.items():
        if ann is None:
            continue
        if not isinstance(ann, dict) or "inputs" not in ann:
            return None
        label = fusion.as_label(ann.get("annotated"), ann["inputs"], ann.get("output"))
        if label is not None:
            found[str(node)] = label
    return found


def places(seen: Any, expected: Any) -> list[Place]:
    """A ``Place`` per prepared graph the student's case returned (``priority/single_first`` for a nested one)."""
    found = []
    for case in diagnosis.cases(expected):
        want = diagnosis.value(expected, case)
        if not isinstance(want, dict):
            continue
        parts = (
            {case: (want, diagnosis.value(seen, case))}
            if "annotations" in want
            else {f"{case}/{sub}": (record, diagnosis.value(seen, case, sub)) for sub, record in want.items()}
        )
        for name, (key, student) in parts.items():
            if not isinstance(key, dict) or not isinstance(student, dict):
                continue
            wanted, got = labels_of(key.get("annotations")), labels_of(student.get("annotations"))
            prepared = key.get("prepared") or {}
            if got is None or wanted is None:
                continue
            inputs = {str(c): [str(s) for s, _ in sources] for c, sources in prepared.get("edges", {}).items()}
            found.append(Place(name, wanted, got, inputs, frozenset(map(str, prepared.get("constants", [])))))
    return found


def case_of(place: Place) -> str:
    return place.name.split("/")[0]


def wrong_places(seen: Any, expected: Any) -> list[Place]:
    return [p for p in places(seen, expected) if p.differs()]


def specs(evidence: Any) -> list[str]:
    """The observer class of every spec the annotations carry."""
    classes = []
    for _, record in diagnosis.walk([diagnosis.value(evidence, c) for c in diagnosis.cases(evidence)], "annotated"):
        items = [spec for _, spec in record.get("inputs") or []] + [record.get("output")]
        for spec in items:
            if isinstance(spec, dict) and spec.get("kind") == "spec":
                classes.append(str((spec.get("observer") or {}).get("class")))
    return classes


def order_of(place: Place) -> list[str]:
    """The nodes with inputs, in graph order (the key's prepared graph keeps it)."""
    return list(place.inputs)


def adjacent(place: Place, source: str, node: str) -> bool:
    """``node`` comes right after ``source`` in graph order."""
    order = order_of(place)
    return source in order and order.index(source) + 1 < len(order) and order[order.index(source) + 1] == node


def broken(place: Place) -> list[list[str]]:
    return [g for g in place.groups() if not place.exact(g)]


def only_in(found: list[Place], cases: tuple[str, ...]) -> bool:
    return bool(found) and all(case_of(p) in cases for p in found)


def relabels_preclaimed(found: list[Place]) -> bool:
    """A node another Quantizer claimed first (with no label) gets a label from the student."""
    return any(p.got.get(n) != p.want[n] for p in found for n in p.preclaimed())


def skips_unclaimed_labels(found: list[Place]) -> bool:
    """A chain the key claims left alone: one member carries only another Quantizer's unclaimed label, the others
    no label at all; and the student does claim elsewhere."""
    for p in found:
        for g in p.groups():
            kept = [m for m in g if m in p.got]
            if len(kept) == 1 and not p.got[kept[0]][0] and (p.got[kept[0]][1] or p.got[kept[0]][2]):
                return any(label[0] for q in found for n, label in q.got.items() if n not in q.preclaimed())
    return False


def first_members_relabelled(found: list[Place]) -> bool:
    """A chain's first member (claimed by an earlier pattern) gets an output label from a later one, while the
    chain's last member keeps its own."""
    return any(
        len(g) > 1 and g[0] in p.got and p.got[g[0]][2] and g[-1] in p.got and p.got[g[-1]][2]
        for p in found
        for g in p.groups()
    )


@detects("fusion_quantizer", "never_marks")
def never_marks(seen: Any, expected: Any) -> bool:
    return fusion.never_marks(places(seen, expected))


@detects("fusion_quantizer", "constant_labelled")
def constant_labelled(seen: Any, expected: Any) -> bool:
    return fusion.constant_labelled(places(seen, expected))


@detects("fusion_quantizer", "labels_producer_output")
def labels_producer_output(seen: Any, expected: Any) -> bool:
    return fusion.producer_outputs(places(seen, expected))


@detects("fusion_quantizer", "labels_every_output")
def labels_every_output(seen: Any, expected: Any) -> bool:
    return fusion.outputs_everywhere(places(seen, expected))


@detects("fusion_quantizer", "output_on_first")
def output_on_first(seen: Any, expected: Any) -> bool:
    return fusion.output_on_first(places(seen, expected))


@detects("fusion_quantizer", "no_output_label")
def no_output_label(seen: Any, expected: Any) -> bool:
    return fusion.no_output(places(seen, expected))


@detects("fusion_quantizer", "labels_previous_member")
def labels_previous_member(seen: Any, expected: Any) -> bool:
    return fusion.previous_member_labelled(places(seen, expected))


@detects("fusion_quantizer", "first_member_inputs_only", explains=("test_residual", "test_three_ops"))
def first_member_inputs_only(seen: Any, expected: Any) -> bool:
    return fusion.later_members_unlabelled(places(seen, expected))


@detects("fusion_quantizer", "args_not_flattened", explains=("test_residual",))
def args_not_flattened(seen: Any, expected: Any) -> bool:
    """The only labels missing are edges into a member whose inputs arrive in a list."""
    found = wrong_places(seen, expected)
    return only_in(found, (LIST_INPUTS,)) and all(
        p.missing_inputs() and not p.extra_inputs() and set(p.got) == set(p.want) for p in found
    )


@detects("fusion_quantizer", "skips_previous_by_target", explains=("test_three_ops",))
def skips_previous_by_target(seen: Any, expected: Any) -> bool:
    return fusion.same_op_as_previous_unlabelled(places(seen, expected))


@detects("fusion_quantizer", "found_by_name", explains=("test_chain",))
def found_by_name(seen: Any, expected: Any) -> bool:
    """Wrong only where names lie: ops renamed after their modules, inputs named like ops."""
    found = wrong_places(seen, expected)
    return only_in(found, NAMES_LIE) and any(case_of(p) == "module_names" for p in found)


@detects("fusion_quantizer", "next_in_graph_order", explains=("test_chain", "test_three_ops"))
def next_in_graph_order(seen: Any, expected: Any) -> bool:
    """A node the key leaves alone is claimed, and a member without an output label has no fellow member
    among its users: the student's next member was not a user."""
    for p in places(seen, expected):
        extra = [n for n, label in p.got.items() if n not in p.want and label[0]]
        dangling = [
            n
            for n, label in p.got.items()
            if label[0]
            and not label[2]
            and n in p.want
            and not p.want[n][2]
            and not any(u in p.got and p.got[u][0] and n not in p.got[u][1] for u in p.users(n))
        ]
        if extra and dangling:
            return True
    return False


@detects("fusion_quantizer", "requires_adjacent", explains=("test_chain", "test_three_ops"))
def requires_adjacent(seen: Any, expected: Any) -> bool:
    """Every chain the student got wrong has two members that are not next to each other in graph order; every
    chain whose members are has it right."""
    wrong = [(p, g) for p in places(seen, expected) for g in broken(p)]
    if not wrong:
        return False
    for p, g in wrong:
        if all(adjacent(p, a, b) for a, b in itertools.pairwise(g)):
            return False
    return True


@detects("fusion_quantizer", "args0_chain_only", explains=("test_residual", "test_three_ops"))
def args0_chain_only(seen: Any, expected: Any) -> bool:
    """A chain whose next member reads the previous one as a later input (not args[0]) is missing, and the only
    chains wrong are such, or longer ones (a cat reads its inputs from a list)."""
    wrong = [(p, g) for p in places(seen, expected) for g in broken(p)]

    def later_input(p: Place, g: list[str]) -> bool:
        return any(p.inputs.get(b, []).index(a) > 0 for a, b in itertools.pairwise(g) if a in p.inputs.get(b, []))

    return (
        any(p.absent(g) and later_input(p, g) for p, g in wrong)
        and all(later_input(p, g) or len(g) > 2 for p, g in wrong)
        and not any(p.extra_inputs() or set(p.got) - set(p.want) for p in places(seen, expected))
    )


@detects("fusion_quantizer", "pairs_only")
def pairs_only(seen: Any, expected: Any) -> bool:
    return fusion.pairs_only(places(seen, expected))


@detects("fusion_quantizer", "first_match_only")
def first_match_only(seen: Any, expected: Any) -> bool:
    """Every chain wrong comes after a chain of the same length, right, in the same graph."""
    wrong = [(p, g) for p in places(seen, expected) for g in broken(p)]
    if not wrong:
        return False
    for p, g in wrong:
        order = order_of(p)
        earlier = [
            other
            for other in p.groups()
            if len(other) == len(g)
            and p.exact(other)
            and other[0] in order
            and g[0] in order
            and order.index(other[0]) < order.index(g[0])
        ]
        if not earlier:
            return False
    return True


@detects("fusion_quantizer", "output_not_a_user", explains=("test_shared_output",))
def output_not_a_user(seen: Any, expected: Any) -> bool:
    """Wrong only where the fused-across value's other consumer is the output node (the model returns it)."""
    found = wrong_places(seen, expected)
    return only_in(found, ("graph_output",)) and fusion.fused_past_other_users(found)


@detects("fusion_quantizer", "no_single_user_check", explains=("test_shared_output",))
def no_single_user_check(seen: Any, expected: Any) -> bool:
    return fusion.fused_past_other_users(places(seen, expected))


@detects("fusion_quantizer", "last_member_single_user", explains=("test_residual", "test_shared_output"))
def last_member_single_user(seen: Any, expected: Any) -> bool:
    return fusion.last_member_single_user(places(seen, expected))


@detects("fusion_quantizer", "specs_mean_claimed", explains=("test_priority",))
def specs_mean_claimed(seen: Any, expected: Any) -> bool:
    found = places(seen, expected)
    return relabels_preclaimed(found) and skips_unclaimed_labels(found)


@detects("fusion_quantizer", "ignores_claimed")
def ignores_claimed(seen: Any, expected: Any) -> bool:
    found = places(seen, expected)
    return relabels_preclaimed(found) and not skips_unclaimed_labels(found) and first_members_relabelled(found)


@detects("fusion_quantizer", "checks_first_member_only", explains=("test_priority", "test_three_ops"))
def checks_first_member_only(seen: Any, expected: Any) -> bool:
    found = places(seen, expected)
    return relabels_preclaimed(found) and not skips_unclaimed_labels(found) and not first_members_relabelled(found)


@detects("fusion_quantizer", "labelled_means_claimed", explains=("test_priority",))
def labelled_means_claimed(seen: Any, expected: Any) -> bool:
    found = places(seen, expected)
    return skips_unclaimed_labels(found) and not relabels_preclaimed(found)


@detects("fusion_quantizer", "node_order_first", explains=("test_priority",))
def node_order_first(seen: Any, expected: Any) -> bool:
    """Wrong only where two patterns compete for the same nodes: a later pattern's chain takes nodes an earlier
    pattern's chain should have had."""
    found = wrong_places(seen, expected)
    return only_in(found, ("priority",)) and any(
        any(n not in p.want and label[0] for n, label in p.got.items()) for p in found
    )


@detects("fusion_quantizer", "marks_only_labelled", explains=("test_marks_members", "test_residual", "test_three_ops"))
def marks_only_labelled(seen: Any, expected: Any) -> bool:
    """A middle member (no label of its own) left unclaimed while the rest of its chain is claimed."""
    return any(
        len(g) > 2
        and any(m not in p.got and not p.want[m][1] and not p.want[m][2] for m in g[1:-1])
        and any(m in p.got and p.got[m][0] for m in g)
        for p in places(seen, expected)
        for g in p.groups()
    )


@detects("fusion_quantizer", "other_observer")
def other_observer(seen: Any, expected: Any) -> bool:
    return fusion.other_observer(specs(seen), specs(expected))

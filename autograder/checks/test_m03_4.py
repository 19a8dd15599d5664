"""Hidden checks of M03-4: AddQuantizer and CatQuantizer with shared qparams.

Each check compares three things the student's Quantizer decides: the labels it wrote (read from
the annotations, sharing resolved into groups, the observer class included), the observers
``prepare_pt2e`` put on every edge (how many, which instances are shared, of which class and range),
and where asked the q/dq parameters after ``convert_pt2e``.

The half-understandings these checks refute are the misconceptions of each exercise's record
(``selfcheck/public/m03_4.py``); their detectors are at the end of this module.
"""

from __future__ import annotations

from typing import Any

from autograder.checks.support import (
    Fail,
    check,
    compare_edges,
    compare_observers,
    compare_paths,
    constant_labelled,
    detects,
    expect,
    instance_text,
    label_pairs,
    labelled_nodes,
    marks_missing,
    node_groups,
    other_observer_class,
    output_labelled,
    path_text,
    raised,
    spec_field,
    value,
)
from autograder.checks.support import spec_text as _spec_text


def spec_text(spec: Any) -> str:
    return _spec_text(spec, none="（共用的位置沒有規格）")


# --- comparisons ----------------------------------------------------------------------------------


def compare_labels(
    got: dict[str, Any],
    want: dict[str, Any],
    where: str,
    nodes: list[str] | None = None,
    *,
    groups: bool = True,
) -> None:
    """The same labelled positions, the same spec (observer class included) and, with ``groups``, the same
    sharing groups.

    ``nodes``: only the labels carried by these nodes (all when None). ``groups=False`` is for the checks of
    another idea (constants, ``add(r, r)``, ``_annotated``): which positions share is the sharing checks' to judge.
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
        if groups and seen.get("group") != entry["group"]:
            raise Fail(
                f"{where}：{position} 應該{_partners_text(want_positions, position, entry['group'])}，"
                f"你的{_partners_text(got_positions, position, seen.get('group'), seen=True)}"
            )
    for position in sorted({p for p, e in got_positions.items() if wanted(e)} - set(want_positions)):
        raise Fail(f"{where}：{position} 不該有標籤，你的貼了（{spec_text(got_positions[position].get('spec'))}）")


def _partners_text(positions: dict[str, Any], position: str, group: Any, seen: bool = False) -> str:
    """How ``position`` shares, as a sentence: 和 a、b 共用同一個 observer / 自己用一個 observer."""
    partners = sorted(p for p, e in positions.items() if e.get("group") == group and p != position)
    if partners:
        return f"和 {'、'.join(partners)} 共用同一個 observer"
    return "沒有和任何位置共用，自己用一個 observer" if seen else "自己用一個 observer，不和別的位置共用"


def compare_marks(got: dict[str, Any], want: dict[str, Any], where: str, *, unclaimed_only: bool = False) -> None:
    """``_annotated`` right after the student's annotate, on every node either side labelled.

    ``unclaimed_only``: only the nodes the key leaves unmarked (claiming a node with nothing to label); whether
    the student marks what it labelled is ``test_add_pre_annotated``'s / ``test_cat_pool``'s to judge.
    """
    got_marks, want_marks = got.get("annotated", {}), want.get("annotated", {})
    for node in sorted(set(got_marks) | set(want_marks)):
        if unclaimed_only and want_marks.get(node):
            continue
        expect(
            bool(got_marks.get(node)) == bool(want_marks.get(node)),
            f"{where}：{node} 的 _annotated 應該是 {bool(want_marks.get(node))}，你的是 {bool(got_marks.get(node))}",
        )


def compare_prepared(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Observers on every edge, shared the same way, each instance of the same kind and class."""
    compare_observers(got, want, where)
    for index, want_record in enumerate(want["instances"]):
        got_class = got["instances"][index].get("class")
        expect(
            got_class == want_record.get("class"),
            f"{where}：observer 實例 #{index} 應該是 {want_record.get('class')}，你的是 {got_class}",
        )


def compare_observed(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    """Every input edge observed by as many observers as the key's, each of the same kind and class; which
    instances are shared is not compared (the sharing checks judge that)."""
    try:
        got_edges, want_edges = got["edges"], want["edges"]
        got_instances, want_instances = got["instances"], want["instances"]
        for consumer, inputs in want_edges.items():
            mine = {source: chain for source, chain in got_edges.get(consumer, [])}
            for source, chain in inputs:
                seen = mine.get(source)
                if seen is None:
                    raise Fail(f"{where}：圖上找不到邊 {source} → {consumer}")
                if len(seen) != len(chain):
                    raise Fail(
                        f"{where}：邊 {source} → {consumer} 應該經過 {len(chain)} 個 observer，你的經過 {len(seen)} 個"
                    )
                for index, instance in zip(seen, chain, strict=True):
                    got_record, want_record = got_instances[index], want_instances[instance]
                    got_kind, want_kind = instance_text(got_record), instance_text(want_record)
                    got_kind += f"（{got_record.get('class')}）"
                    want_kind += f"（{want_record.get('class')}）"
                    if got_kind != want_kind:
                        raise Fail(
                            f"{where}：邊 {source} → {consumer} 的 observer 應該是 {want_kind}，你的是 {got_kind}"
                        )
    except (KeyError, TypeError, IndexError, AttributeError):
        raise Fail(f"{where}：證據格式不對") from None


def compare_case(got: dict[str, Any], want: dict[str, Any], where: str, *, groups: bool = True) -> None:
    """Labels first (the clearer message), then the observers they gave. ``groups=False``: sharing is not
    compared, neither in the labels nor in the observers (``compare_observed``)."""
    compare_labels(got["labels"], want["labels"], where, groups=groups)
    if groups:
        compare_prepared(got["prepared"], want["prepared"], where)
    else:
        compare_observed(got["prepared"], want["prepared"], where)


def compare_steps(got: dict[str, Any], want: dict[str, Any], where: str, consumers: list[str]) -> None:
    """The same kinds of q / dq steps (and dtypes) on every input edge of ``consumers``; their scales and zero
    points (which follow from the sharing) are not compared."""
    try:
        got_paths, want_paths = got["paths"], want["paths"]
        for consumer in consumers:
            mine = {source: steps for source, steps in got_paths.get(consumer, [])}
            for source, steps in want_paths[consumer]:
                seen = mine.get(source)
                kinds = [(step[0], step[3]) for step in steps]
                if seen is None or [(step[0], step[3]) for step in seen] != kinds:
                    shown = path_text(seen) if seen is not None else "這條邊不見了"
                    raise Fail(f"{where}：{source} → {consumer} 應該{path_text(steps)}，你的{shown}")
    except (KeyError, TypeError, IndexError):
        raise Fail(f"{where}：證據格式不對") from None


def _converted_adds(got: dict[str, Any], want: dict[str, Any], where: str) -> None:
    paths = want["converted"]["paths"]
    consumers = [name for name in paths if name.startswith(("add", "relu"))]
    compare_paths(got["converted"], want["converted"], where, consumers)


# --- AddQuantizer ---------------------------------------------------------------------------------


def _two_operand_adds(labels: dict[str, Any]) -> list[str]:
    """The nodes the key labels with two input edges or more: adds of two activations."""
    inputs: dict[str, int] = {}
    for entry in labels["positions"].values():
        if not entry.get("output"):
            inputs[str(entry.get("node"))] = inputs.get(str(entry.get("node")), 0) + 1
    return sorted(node for node, count in inputs.items() if count >= 2)


def _shares_nothing(labels: dict[str, Any], where: str) -> None:
    """No two labelled positions share a group."""
    groups: dict[str, list[str]] = {}
    for position, entry in sorted(labels["positions"].items()):
        groups.setdefault(str(entry.get("group")), []).append(position)
    for members in groups.values():
        if len(members) > 1:
            raise Fail(f"{where}：share=False 時每個位置各用一個 observer，你的 {'、'.join(members)} 共用同一個")


@check("add_quantizer", 1, "AddQuantizer(share=False)：每個 add 的輸入與輸出各有自己的 observer 實例")
def test_add_separate(seen, expected):
    got, want = value(seen, "separate"), value(expected, "separate")
    compare_case(got["two_inputs"], want["two_inputs"], "a + b")
    # the mixed model's adds with a constant or a scalar operand are test_add_constants's to judge
    where = "有純量、常數、alpha 的幾個 add"
    _shares_nothing(got["mixed"]["labels"], where)
    adds = _two_operand_adds(want["mixed"]["labels"])
    compare_labels(got["mixed"]["labels"], want["mixed"]["labels"], where, adds)
    compare_edges(got["mixed"]["prepared"], want["mixed"]["prepared"], where, adds)


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
    # which positions share is the sharing checks' to judge, whether an add is marked _annotated
    # test_add_pre_annotated's: here the labels of activations and constants, and no claim on an add of
    # constants only
    got, want = value(seen, "constants"), value(expected, "constants")
    for case, where in (("constants", "有常數與純量的 add"), ("mixed", "有純量、常數、alpha 的幾個 add")):
        prepared = got[case]["prepared"]
        labelled = sorted({o["observes"] for o in prepared["observers"]} & set(prepared["constants"]))
        expect(
            not labelled, f"{where}：模型常數（get_attr）{labelled} 被貼了標籤：常數不是 activation，不該有 observer"
        )
        compare_case(got[case], want[case], where, groups=False)
        compare_marks(got[case]["labels"], want[case]["labels"], where, unclaimed_only=True)


@check("add_quantizer", 1, "add(r, r) 兩個輸入是同一個 node：只貼一條邊 r → add（不是兩條），輸出也貼")
def test_add_self(seen, expected):
    # the one edge r → add, labelled once (the output's sharing is the sharing checks' to judge)
    compare_case(
        value(seen, "self_add"), value(expected, "self_add"), "r + r 與 torch.add(r, r, alpha=2)", groups=False
    )


def _answered(evidence: Any, case: str) -> Any:
    """The value of ``case``, or None when it stopped with an error (its own check judges that)."""
    cases = evidence.get("cases") if isinstance(evidence, dict) else None
    result = cases.get(case) if isinstance(cases, dict) else None
    if isinstance(result, dict) and "error" in result and "value" not in result:
        return None
    return value(evidence, case)


def _first_step(steps: Any) -> tuple[Any, ...] | None:
    return tuple(steps[0][1:]) if isinstance(steps, list) and steps and isinstance(steps[0], list) else None


def _one_qparams(got: dict[str, Any], where: str) -> None:
    """On every add the student labelled: its activation input edges and its output edges are quantized with
    one scale / zero point (the first q of each path)."""
    try:
        paths, constants = got["converted"]["paths"], set(got["prepared"]["constants"])
        adds = {str(e.get("node")) for e in got["labels"]["positions"].values() if str(e.get("node")).startswith("add")}
        for node in sorted(adds):
            edges = [(f"{source} → {node}", steps) for source, steps in paths.get(node, []) if source not in constants]
            edges += [
                (f"{node} → {consumer}", steps)
                for consumer, inputs in paths.items()
                for source, steps in inputs
                if source == node
            ]
            params = {text: _first_step(steps) for text, steps in edges}
            kinds = {p for p in params.values()}
            if len(kinds) > 1 and not _close_params(kinds):
                shown = "；".join(f"{text} {path_text(steps)}" for text, steps in edges)
                raise Fail(
                    f"{where}（convert 之後）：{node} 的輸入與輸出應該經過同一組 scale / zero point，你的是 {shown}"
                )
    except (KeyError, TypeError, AttributeError):
        raise Fail(f"{where}：證據格式不對") from None


def _close_params(kinds: set[Any]) -> bool:
    """Every entry a (scale, zero point, dtype) within 1e-6 of the others (None: not quantized)."""
    if None in kinds:
        return False
    first = next(iter(kinds))
    return all(k[1:] == first[1:] and abs(float(k[0]) - float(first[0])) <= 1e-6 * abs(float(first[0])) for k in kinds)


@check("add_quantizer", 1, "convert 之後：add 的每個輸入與輸出都經過同一組 scale / zero point 的 q → dq")
def test_add_converted(seen, expected):
    _converted_adds(value(seen, "shared_residual"), value(expected, "shared_residual"), "residual")
    got, want = value(seen, "shared_branches"), value(expected, "shared_branches")
    _converted_adds(got["branches"], want["branches"], "三個分支相加的模型")
    constants = _answered(seen, "constants")  # stopped: test_add_constants says why
    if constants is not None:
        _one_qparams(constants["mixed"], "有純量、常數、alpha 的幾個 add")


@check(
    "add_quantizer",
    1,
    "尊重 _annotated：別人標過的 add 不改，沒人認領的標籤照規則重貼，自己標過的 add 設 _annotated = True",
)
def test_add_pre_annotated(seen, expected):
    got, want = value(seen, "pre_annotated"), value(expected, "pre_annotated")
    where = "((a + b) + c) + d：add 已被別人標過、add_1 有一張 _annotated=False 的標籤"
    # the labels each add carries, who marked it, and what a later Quantizer then finds; which positions
    # share is the sharing checks' to judge
    compare_labels(got["labels"], want["labels"], where, groups=False)
    compare_marks(got["labels"], want["labels"], where)
    compare_observed(got["prepared"], want["prepared"], where + "，之後再跑一個 Quantizer")


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
    where = "cat([r, 常數, r])、cat([常數, r * 2, r])、cat([r])、cat([r, 參數])、cat([常數, 參數])"
    # which entries are labelled, and how often; which positions share is the sharing checks' to judge,
    # whether a cat is marked _annotated test_cat_pool's
    compare_case(got["mix"], want["mix"], where, groups=False)
    compare_marks(got["mix"]["labels"], want["mix"]["labels"], where, unclaimed_only=True)
    compare_steps(
        got["mix"]["converted"], want["mix"]["converted"], "同一個模型 convert 之後", ["cat_1", "cat_2", "cat_3"]
    )
    compare_case(
        got["renamed"],
        want["renamed"],
        "node 名字被 pass 對調的圖（叫 stack_90 的是 cat、叫 cat_91 的是 stack）",
        groups=False,
    )


# --- misconceptions: what recognises each (the record, with its words, is selfcheck/public/m03_4.py) --------

ADD_SHARING = ("test_add_shared_residual", "test_add_shared_branches", "test_add_converted")
"""The checks of sharing (issue 50: a sharing mistake costs these, and the other checks of share=True cases
judge labels, constants and marks without looking at groups)."""

SHARE_TRUE_CASES = (
    "test_add_shared_residual",
    "test_add_shared_branches",
    "test_add_constants",
    "test_add_self",
    "test_add_converted",
    "test_add_pre_annotated",
)
"""Every check of a share=True case: where ``prepare_pt2e`` refuses the student's shared labels, none of those
cases has evidence to judge, so the one mistake costs them all."""


def _nodes_sharing(got: dict[str, Any], want: dict[str, Any], node: str) -> tuple[list[str], str | None, bool]:
    """``node``'s input groups and output group in the student's labels, and whether the key shares them all."""
    inputs, output = node_groups(got, node)
    want_inputs, want_output = node_groups(want, node)
    return inputs, output, len(set(want_inputs) | {want_output}) == 1 and len(want_inputs) >= 2


def _unshared(seen: Any, expected: Any, cases: tuple[str, ...], *, output_only: bool) -> bool:
    """On a node whose inputs and output the key shares: the student shares nothing (or, ``output_only``,
    shares the inputs but not the output)."""
    for _, got, want in label_pairs(seen, expected, cases=cases):
        for node in labelled_nodes(want) & labelled_nodes(got):
            inputs, output, shared = _nodes_sharing(got, want, node)
            if not shared or len(inputs) < 2 or output is None:
                continue
            if output_only and len(set(inputs)) == 1 and output != inputs[0]:
                return True
            if not output_only and len(set(inputs)) == len(inputs) and output not in inputs:
                return True
    return False


def _anchored_elsewhere(seen: Any, expected: Any) -> bool:
    """A position shares with the output of another node, which the key does not label."""
    for _, got, want in label_pairs(seen, expected):
        for position, entry in got["positions"].items():
            group = str(entry.get("group"))
            owner = group.removesuffix(" 的輸出")
            if (
                group.endswith(" 的輸出")
                and owner != entry.get("node")
                and group != want["positions"].get(position, {}).get("group")
            ):
                return True
    return False


def _found_by_name(seen: Any, expected: Any, cases: tuple[str, ...], places: tuple[str, ...]) -> bool:
    """Where names lie (look-alike names, names a pass swapped): an op's own output labelled that the key does
    not label, or one the key labels left without any label."""
    for place, got, want in label_pairs(seen, expected, cases=cases):
        if place[1:2] and place[1] not in places:
            continue
        extra = output_labelled(got) - labelled_nodes(want)
        missing = output_labelled(want) - labelled_nodes(got)
        if extra or missing:
            return True
    return False


def _user_edges(seen: Any, expected: Any) -> bool:
    """The op's output label written as input edges of its users (nodes the key leaves unlabelled)."""
    for _, got, want in label_pairs(seen, expected):
        strangers = labelled_nodes(got) - labelled_nodes(want)
        lost = output_labelled(want) - output_labelled(got)
        if (
            strangers
            and lost
            and any(e.get("node") in strangers and str(p).split(" → ")[0] in lost for p, e in got["positions"].items())
        ):
            return True
    return False


def _skipped_ops(seen: Any, expected: Any, cases: tuple[str, ...]) -> bool:
    """Ops the key labels carry no label at all (and nothing raised)."""
    return any(
        labelled_nodes(want) - labelled_nodes(got) and not labelled_nodes(got) - labelled_nodes(want)
        for _, got, want in label_pairs(seen, expected, cases=cases)
    )


def _claims(seen: Any, expected: Any, cases: tuple[str, ...], limit: int) -> bool:
    """A position whose key label has the int8 [-limit, limit] spec of a probe is labelled otherwise, or the
    other way round."""
    for _, got, want in label_pairs(seen, expected, cases=cases):
        for position, entry in want["positions"].items():
            mine = got["positions"].get(position)
            if spec_field(entry, "qmax") == limit and spec_field(mine, "qmax") != limit:
                return True
            if spec_field(entry, "qmax") != limit and spec_field(mine, "qmax") == limit:
                return True
    return False


@detects("add_quantizer", "self_add_twice", explains=("test_add_self",))
def add_self_twice(seen: Any, expected: Any) -> bool:
    return raised(seen, ("RecursionError",), cases=("self_add",))


@detects("add_quantizer", "anchor_on_add_output", explains=SHARE_TRUE_CASES)
def add_anchor_on_output(seen: Any, expected: Any) -> bool:
    """prepare_pt2e refuses the labels (an edge shares with an output that has no observer): no share=True
    case runs, and every check of one fails."""
    return raised(seen, ("AssertionError",), says="only refer to edge or node that has observer")


@detects("add_quantizer", "anchor_on_producer_output", explains=SHARE_TRUE_CASES)
def add_anchor_on_producer(seen: Any, expected: Any) -> bool:
    """Sharing with the producer's output: prepare_pt2e fails (KeyError) or every share=True case is labelled
    around another node, so every check of one fails."""
    keyed = any(
        raised(seen, ("KeyError",), cases=(case,)) and not message.startswith("(")
        for case, message in _messages(seen).items()
    )
    return keyed or _anchored_elsewhere(seen, expected)


def _messages(seen: Any) -> dict[str, str]:
    from selfcheck import diagnosis

    return {case: diagnosis.error_message(seen, case) for case in diagnosis.errors(seen)}


@detects("add_quantizer", "anchor_on_first_argument", explains=("test_add_constants",))
def add_anchor_on_first(seen: Any, expected: Any) -> bool:
    return any(
        raised(seen, ("KeyError",), cases=(case,)) and message.startswith("(")
        for case, message in _messages(seen).items()
    )


@detects("add_quantizer", "crash_without_activation", explains=("test_add_constants",))
def add_no_activation(seen: Any, expected: Any) -> bool:
    return raised(seen, ("IndexError",), cases=("constants",))


@detects("add_quantizer", "scalar_as_node", explains=("test_add_constants", "test_add_separate"))
def add_scalar_as_node(seen: Any, expected: Any) -> bool:
    return raised(seen, ("EvidenceError", "Exception"), says="Node")


@detects("add_quantizer", "constant_labelled", explains=("test_add_constants",))
def add_constant_labelled(seen: Any, expected: Any) -> bool:
    return any(constant_labelled(got, want) for _, got, want in label_pairs(seen, expected, cases=("constants",)))


@detects("add_quantizer", "constant_operand_skips_add", explains=("test_add_constants",))
def add_skips_constant_operand(seen: Any, expected: Any) -> bool:
    return _skipped_ops(seen, expected, ("constants",))


@detects("add_quantizer", "shares_without_share", explains=("test_add_separate",))
def add_shares_without_share(seen: Any, expected: Any) -> bool:
    return any(
        len({e.get("group") for e in got["positions"].values()}) < len(got["positions"])
        and len({e.get("group") for e in want["positions"].values()}) == len(want["positions"])
        for _, got, want in label_pairs(seen, expected, cases=("separate",))
    )


@detects("add_quantizer", "no_shared_spec", explains=ADD_SHARING)
def add_no_shared_spec(seen: Any, expected: Any) -> bool:
    return _unshared(seen, expected, ("shared_residual", "shared_branches"), output_only=False)


@detects("add_quantizer", "output_not_shared", explains=ADD_SHARING)
def add_output_not_shared(seen: Any, expected: Any) -> bool:
    return _unshared(seen, expected, ("shared_residual", "shared_branches"), output_only=True)


@detects("add_quantizer", "output_as_user_edges")
def add_user_edges(seen: Any, expected: Any) -> bool:
    return _user_edges(seen, expected)


@detects("add_quantizer", "found_by_name", explains=("test_add_shared_branches",))
def add_found_by_name(seen: Any, expected: Any) -> bool:
    return _found_by_name(seen, expected, ("shared_branches",), ("look_alikes", "renamed"))


@detects("add_quantizer", "overwrites_claimed", explains=("test_add_pre_annotated",))
def add_overwrites_claimed(seen: Any, expected: Any) -> bool:
    return _claims(seen, expected, ("pre_annotated",), 100)


@detects("add_quantizer", "skips_unclaimed_label", explains=("test_add_pre_annotated",))
def add_skips_unclaimed(seen: Any, expected: Any) -> bool:
    return _claims(seen, expected, ("pre_annotated",), 30)


@detects("add_quantizer", "forgets_annotated", explains=("test_add_pre_annotated",))
def add_forgets_annotated(seen: Any, expected: Any) -> bool:
    return any(marks_missing(got, want) for _, got, want in label_pairs(seen, expected))


def _claims_unlabelled(seen: Any, expected: Any, cases: tuple[str, ...]) -> bool:
    """A node without any label marked ``_annotated`` by the student, where the key leaves it unmarked."""
    for _, got, want in label_pairs(seen, expected, cases=cases):
        marks, want_marks = got.get("annotated") or {}, want.get("annotated") or {}
        if any(mark and not want_marks.get(node) and node not in labelled_nodes(got) for node, mark in marks.items()):
            return True
    return False


@detects("add_quantizer", "claims_unlabelled", explains=("test_add_constants",))
def add_claims_unlabelled(seen: Any, expected: Any) -> bool:
    return _claims_unlabelled(seen, expected, ("constants",))


@detects("add_quantizer", "other_observer")
def add_other_observer(seen: Any, expected: Any) -> bool:
    return other_observer_class(seen, expected)


CAT_SHARING = ("test_cat_pool", "test_cat_three_way")
"""The checks of the cat's sharing (``test_cat_constant_and_repeat`` judges labels without looking at groups)."""

CAT_CASES = ("test_cat_pool", "test_cat_three_way", "test_cat_constant_and_repeat")
"""Every check: where ``prepare_pt2e`` refuses the student's shared labels, no case has evidence to judge."""


@detects("cat_quantizer", "reads_args_like_add")
def cat_reads_args_like_add(seen: Any, expected: Any) -> bool:
    return any(
        not got["positions"] and want["positions"]
        for _, got, want in label_pairs(seen, expected, cases=("cat_pool", "three_way"))
    )


@detects("cat_quantizer", "first_two_only", explains=("test_cat_three_way", "test_cat_constant_and_repeat"))
def cat_first_two_only(seen: Any, expected: Any) -> bool:
    """The three-way cat labels two inputs. ``cat([常數, r * 2, r])`` of constant_and_repeat has three entries
    too: the same idea loses its third one there."""
    for _, got, want in label_pairs(seen, expected, cases=("three_way",)):
        for node in labelled_nodes(want) & labelled_nodes(got):
            inputs, _ = node_groups(got, node)
            want_inputs, _ = node_groups(want, node)
            if 2 == len(inputs) < len(want_inputs):
                return True
    return False


@detects("cat_quantizer", "repeated_input_twice", explains=("test_cat_constant_and_repeat",))
def cat_repeated_twice(seen: Any, expected: Any) -> bool:
    return raised(seen, ("RecursionError",), cases=("constant_and_repeat",))


@detects("cat_quantizer", "cat_anchor_on_output", explains=CAT_CASES)
def cat_anchor_on_output(seen: Any, expected: Any) -> bool:
    """prepare_pt2e refuses the labels: no case runs, and every check fails."""
    return raised(seen, ("AssertionError",), says="only refer to edge or node that has observer")


@detects("cat_quantizer", "labels_producer_outputs")
def cat_labels_producer_outputs(seen: Any, expected: Any) -> bool:
    for _, got, want in label_pairs(seen, expected, cases=("cat_pool", "three_way", "constant_and_repeat")):
        strangers = output_labelled(got) - labelled_nodes(want)
        lost = {p for p, e in want["positions"].items() if not e.get("output")} - set(got["positions"])
        if strangers & {p.split(" → ")[0] for p in lost}:  # the producers of the lost edges got the labels
            return True
    return False


@detects("cat_quantizer", "cat_anchor_on_first_entry", explains=("test_cat_constant_and_repeat",))
def cat_anchor_on_first_entry(seen: Any, expected: Any) -> bool:
    """In CatMix the constant is first in cat_2's list and in the middle of cat_1's: only the first is labelled."""
    for _, got, want in label_pairs(seen, expected, cases=("constant_and_repeat",)):
        constants = {p for p, e in got["positions"].items() if e.get("constant") and p not in want["positions"]}
        if constants == {"table → cat_2"}:
            return True
    return False


@detects("cat_quantizer", "cat_constant_labelled", explains=("test_cat_constant_and_repeat",))
def cat_constant_labelled(seen: Any, expected: Any) -> bool:
    return any(
        constant_labelled(got, want) for _, got, want in label_pairs(seen, expected, cases=("constant_and_repeat",))
    )


@detects("cat_quantizer", "cat_found_by_name", explains=("test_cat_constant_and_repeat",))
def cat_found_by_name(seen: Any, expected: Any) -> bool:
    if raised(seen, ("IndexError",), cases=("constant_and_repeat",), says="tuple index"):
        return True  # the placeholder called cat has no node.args[0]
    return _found_by_name(seen, expected, ("constant_and_repeat",), ("renamed",))


@detects("cat_quantizer", "cat_no_shared_spec", explains=CAT_SHARING)
def cat_no_shared_spec(seen: Any, expected: Any) -> bool:
    return _unshared(seen, expected, ("cat_pool", "three_way"), output_only=False)


@detects("cat_quantizer", "cat_output_not_shared", explains=CAT_SHARING)
def cat_output_not_shared(seen: Any, expected: Any) -> bool:
    return _unshared(seen, expected, ("cat_pool", "three_way"), output_only=True)


@detects("cat_quantizer", "cat_overwrites_claimed", explains=("test_cat_pool",))
def cat_overwrites_claimed(seen: Any, expected: Any) -> bool:
    return _claims(seen, expected, ("cat_pool",), 100)


@detects("cat_quantizer", "cat_skips_unclaimed_label", explains=("test_cat_pool",))
def cat_skips_unclaimed(seen: Any, expected: Any) -> bool:
    return _claims(seen, expected, ("cat_pool",), 30)


@detects("cat_quantizer", "cat_forgets_annotated", explains=("test_cat_pool",))
def cat_forgets_annotated(seen: Any, expected: Any) -> bool:
    return any(marks_missing(got, want) for _, got, want in label_pairs(seen, expected))


@detects("cat_quantizer", "cat_claims_unlabelled", explains=("test_cat_constant_and_repeat",))
def cat_claims_unlabelled(seen: Any, expected: Any) -> bool:
    return _claims_unlabelled(seen, expected, ("constant_and_repeat",))


@detects("cat_quantizer", "cat_other_observer")
def cat_other_observer(seen: Any, expected: Any) -> bool:
    return other_observer_class(seen, expected)

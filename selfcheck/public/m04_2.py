"""Public cases of M04-2 linear + BN，以及什麼時候不折 (bn_survives) on the chapter's own models.

The models are the ones section C of the chapter tabulates (conv → BN, conv → relu → BN,
input → BN, linear → BN on 2-D and 3-D inputs, conv → BN whose conv output also feeds an
add). The evidence is the student's prediction for every BN, by model and node name.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import nn

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice
from selfcheck.public.m04_1 import FOLDED_BIAS

TITLE = "bn_survives：預測哪些 BN 在 prepare_pt2e 之後還在"


class ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class ConvReluBn(ConvBn):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.conv(x)))


class InputBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn, self.conv = nn.BatchNorm2d(3), nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.bn(x))


class ConvBnPlusY(ConvBn):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.bn(y) + y


class LinearBn(nn.Module):
    def __init__(self, features: int = 8, out: int = 4) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(features, out), nn.BatchNorm1d(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class SeqLinearBn(nn.Module):
    def __init__(self, channels: int = 4, length: int = 4) -> None:
        super().__init__()
        self.fc, self.bn = nn.Linear(length, length), nn.BatchNorm1d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


def predictions(ns: Namespace, label: str, model: nn.Module, shape: tuple[int, ...], seed: int) -> dict[str, Any]:
    """``bn_survives(bn)`` for every batch_norm node of the exported ``model`` (keys ``label/node``)."""
    from common.pt2e import export_module

    gm = export_module(model.eval(), seeded_inputs(seed, shape))
    found: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and "batch_norm" in str(node.target):
            answer = ns["bn_survives"](node)
            if type(answer) is not bool:
                raise EvidenceError(f"bn_survives 應該回傳 True 或 False，收到 {type(answer).__name__}")
            found[f"{label}/{node.name}"] = answer
    return found


CONV_BN, CONV_RELU_BN, INPUT_BN, CONV_SHARED = (
    "conv → BN",
    "conv → relu → BN",
    "輸入 → BN → conv",
    "conv → BN，conv 的輸出另外給 add",
)
LINEAR_2D, LINEAR_3D = "linear → BN（2-D）", "linear → BN（3-D）"


def conv_models(ns: Namespace, seed: int) -> Any:
    image = (2, 3, 8, 8)
    return {
        **predictions(ns, CONV_BN, ConvBn(), image, seed),
        **predictions(ns, CONV_RELU_BN, ConvReluBn(), image, seed),
        **predictions(ns, INPUT_BN, InputBn(), image, seed),
        **predictions(ns, CONV_SHARED, ConvBnPlusY(), image, seed),
    }


def linear_models(ns: Namespace, seed: int) -> Any:
    return {
        **predictions(ns, LINEAR_2D, LinearBn(), (16, 8), seed),
        **predictions(ns, LINEAR_3D, SeqLinearBn(), (16, 4, 4), seed),
    }


class Branches(nn.Module):
    """Ten BNs in one graph (one export), each after an op the rules of section C must tell apart: conv1d with
    numeric and string padding, conv_transpose1d, a conv without a bias, a linear after flatten (the model's
    first input is 4-D), a linear on a 3-D input whose size differs from out_features, a matmul, a conv1d held in
    an attribute called ``linear``, and two BNs whose neighbours in graph order are not their inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1d, self.conv1d_bn = nn.Conv1d(4, 4, 3, padding=1), nn.BatchNorm1d(4)
        self.same, self.same_bn = nn.Conv1d(4, 4, 3, padding="same"), nn.BatchNorm1d(4)
        self.up, self.up_bn = nn.ConvTranspose1d(4, 4, 3), nn.BatchNorm1d(4)
        self.no_bias, self.no_bias_bn = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4)
        self.fc, self.fc_bn = nn.Linear(3 * 8 * 8, 5), nn.BatchNorm1d(5)
        self.seq, self.seq_bn = nn.Linear(6, 5), nn.BatchNorm1d(4)
        self.matrix, self.matrix_bn = nn.Parameter(torch.randn(3 * 8 * 8, 5) * 0.1), nn.BatchNorm1d(5)
        self.linear, self.linear_bn = nn.Conv1d(4, 4, 3), nn.BatchNorm1d(4)
        self.conv_p, self.conv_q = nn.Conv2d(3, 4, 3), nn.Conv2d(3, 4, 3)
        self.p_bn, self.q_bn = nn.BatchNorm2d(4), nn.BatchNorm2d(4)

    def forward(self, image: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, ...]:
        flat = torch.flatten(image, 1)
        out = (
            self.conv1d_bn(self.conv1d(seq)),
            self.same_bn(self.same(seq)),
            self.up_bn(self.up(seq)),
            self.no_bias_bn(self.no_bias(image)),
            self.fc_bn(self.fc(flat)),
            self.seq_bn(self.seq(seq)),
            self.matrix_bn(torch.matmul(flat, self.matrix)),
            self.linear_bn(self.linear(seq)),
        )
        p = torch.relu(self.conv_p(image))
        q = self.conv_q(image)
        return (*out, self.p_bn(p), self.q_bn(q))


BRANCHES = (
    "conv1d → BN",
    'conv1d（padding="same"）→ BN',
    "conv_transpose1d → BN",
    "沒有 bias 的 conv → BN",
    "flatten → linear → BN（模型輸入是 4-D）",
    "linear → BN（3-D，第 1 維不等於 out_features）",
    "matmul → BN",
    "名叫 linear 的 conv1d → BN",
    "conv → relu → BN（圖上緊接在另一個 conv 後面）",
    "conv → BN（圖上緊接在上一個 BN 後面）",
)
(
    CONV1D,
    CONV1D_SAME,
    TRANSPOSE,
    NO_BIAS,
    FLAT_LINEAR,
    SEQ_LINEAR,
    MATMUL,
    MISNAMED,
    AFTER_OTHER_CONV,
    AFTER_OTHER_BN,
) = BRANCHES


def branches(ns: Namespace, seed: int) -> Any:
    """``bn_survives`` for the ten BNs of ``Branches`` (by what each follows), and whether the graph the student was
    handed is still the same afterwards. The conv1d held in the attribute ``linear`` is renamed ``linear`` on the
    graph, as a pass that names ops after their modules would: a name tells nothing about the op."""
    from common.pt2e import export_module

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Branches().eval()
    gm = export_module(model, seeded_inputs(seed, (2, 3, 8, 8), (2, 4, 6)))
    for node in gm.graph.nodes:
        stack = node.meta.get("nn_module_stack") or {}
        if node.op == "call_function" and stack and list(stack.values())[-1][0] == "linear":
            node._rename("linear")
    bns = [n for n in gm.graph.nodes if n.op == "call_function" and "batch_norm" in str(n.target)]
    if len(bns) != len(BRANCHES):
        raise RuntimeError(f"Branches: expected {len(BRANCHES)} batch_norm nodes, found {len(bns)}")
    before = gm.graph.python_code("self").src
    found: dict[str, Any] = {}
    for label, bn in zip(BRANCHES, bns, strict=True):
        answer = ns["bn_survives"](bn)
        if type(answer) is not bool:
            raise EvidenceError(f"bn_survives 應該回傳 True 或 False，收到 {type(answer).__name__}")
        found[label] = answer
    return {"bns": found, "graph_unchanged": gm.graph.python_code("self").src == before}


# --- where the chapter teaches it ----------------------------------------------------------------

ONLY_THE_INPUT = Section("C. 規則只看 BN 的第一個輸入")
LINEAR_2D_FOLDS = Section("A. linear + BN（2-D 輸入）")
LINEAR_3D_STAYS = Section("B. 3-D 輸入：不折")
RULES = Section("練習 1：bn_survives（4 分）")
WHEN = Section("A. 什麼時候折", notebook="M04-1")
TARGET = Section("B. `node.target`：op 的身分", notebook="M01-1")
ARGS = Section("C. `node.args` 與 `node.users`：同一條邊的兩個方向", notebook="M01-1")


# --- what the public cases can show (the preview names it; the hidden detectors are the grader's) ------


def _answers(evidence: Any) -> dict[str, bool]:
    """Model label → the prediction for its BN (every public model has one BN)."""
    found: dict[str, bool] = {}
    for case in ("conv_models", "linear_models"):
        value = diagnosis.value(evidence, case)
        if isinstance(value, dict):
            found |= {str(key).rsplit("/", 1)[0]: answer for key, answer in value.items()}
    value = diagnosis.value(evidence, "branches", "bns")
    if isinstance(value, dict):
        found |= {str(key): answer for key, answer in value.items() if str(key) in BRANCHES}
    return found


def _says(seen: Any, **answers: bool) -> bool:
    got = _answers(seen)
    return all(label in got for label in answers) and all(got[label] is answer for label, answer in answers.items())


def _labels(**answers: bool) -> dict[str, bool]:
    names = {
        "conv": CONV_BN,
        "conv_relu": CONV_RELU_BN,
        "input": INPUT_BN,
        "shared": CONV_SHARED,
        "linear_2d": LINEAR_2D,
        "linear_3d": LINEAR_3D,
    }
    return {names[key]: answer for key, answer in answers.items()}


def _every_bn_folds(seen: Any, expected: Any) -> bool:
    got = _answers(seen)
    return bool(got) and not any(got.values()) and any(_answers(expected).values())


def _no_bn_folds(seen: Any, expected: Any) -> bool:
    got = _answers(seen)
    return bool(got) and all(got.values()) and not all(_answers(expected).values())


def _rank_rule_for_conv(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(conv=True, linear_2d=False))


def _linear_never_folds(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(conv=False, linear_2d=True))


def _linear_ignores_rank(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(input=True, linear_2d=False, linear_3d=False))


def _looks_past_input(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(input=True, conv_relu=False))


def _single_user(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(conv=False, shared=True))


def _graph_changed(seen: Any, expected: Any) -> bool:
    return diagnosis.value(seen, "branches", "graph_unchanged") is False


def _conv2d_only(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(conv=False), **{CONV1D: True})


def _transpose_missed(seen: Any, expected: Any) -> bool:
    return _says(seen, **{CONV1D: False, TRANSPOSE: True})


def _padding_missed(seen: Any, expected: Any) -> bool:
    return _says(seen, **{CONV1D: False, CONV1D_SAME: True})


def _needs_bias(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(conv=False), **{CONV1D: False, NO_BIAS: True})


def _linear_ignores_rank_too(seen: Any, expected: Any) -> bool:
    return _linear_ignores_rank(seen, expected) and _says(seen, **{SEQ_LINEAR: False})


def _linear_shape(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(linear_2d=False, linear_3d=False), **{SEQ_LINEAR: True})


def _matmul_as_linear(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(linear_2d=False, linear_3d=True), **{MATMUL: False, SEQ_LINEAR: True})


def _rank_of_model_input(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(linear_2d=False, linear_3d=True), **{FLAT_LINEAR: True})


def _by_name(seen: Any, expected: Any) -> bool:
    return _says(seen, **{CONV1D: False, MISNAMED: True})


def _previous_in_order(seen: Any, expected: Any) -> bool:
    return _says(seen, **_labels(conv_relu=True), **{AFTER_OTHER_CONV: False})


# --- practice after a mistake (issue 50): one idea each, checked on tiny graphs of its own ----------------

_CONV_OPS = {
    torch.ops.aten.conv1d.default,
    torch.ops.aten.conv1d.padding,
    torch.ops.aten.conv2d.default,
    torch.ops.aten.conv2d.padding,
    torch.ops.aten.conv3d.default,
    torch.ops.aten.conv3d.padding,
    torch.ops.aten.conv_transpose1d.default,
    torch.ops.aten.conv_transpose2d.input,
    torch.ops.aten.conv_transpose3d.input,
}
_LINEAR = torch.ops.aten.linear.default
_CONV_OPS_TEXT = (
    "import torch\n\n"
    "CONV_OPS = {\n"
    "    torch.ops.aten.conv1d.default,\n"
    "    torch.ops.aten.conv1d.padding,\n"
    "    torch.ops.aten.conv2d.default,\n"
    "    torch.ops.aten.conv2d.padding,\n"
    "    torch.ops.aten.conv3d.default,\n"
    "    torch.ops.aten.conv3d.padding,\n"
    "    torch.ops.aten.conv_transpose1d.default,\n"
    "    torch.ops.aten.conv_transpose2d.input,\n"
    "    torch.ops.aten.conv_transpose3d.input,\n"
    "}\n\n\n"
)


class _ConvKin(nn.Module):
    """An input called conv, a conv1d with padding="same", a conv_transpose1d, and a linear (renamed conv1d_9)."""

    def __init__(self) -> None:
        super().__init__()
        self.same = nn.Conv1d(2, 2, 3, padding="same")
        self.up = nn.ConvTranspose1d(2, 2, 2)
        self.fc = nn.Linear(5, 3)

    def forward(self, conv: torch.Tensor) -> torch.Tensor:
        return self.fc(self.up(self.same(conv)))


def _check_is_conv_like(is_conv_like: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_ConvKin().eval(), (torch.ones(1, 2, 4),))
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == _LINEAR:
            node.name = "conv1d_9"
    problems = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            continue
        want = node.op == "call_function" and node.target in _CONV_OPS
        got = is_conv_like(node)
        if bool(got) is not want:
            problems.append(
                f"名叫 {node.name} 的 node（op={node.op}，target={node.target}）：應該回傳 {want}，你的是 {got!r}"
            )
    return problems


IS_CONV_LIKE = Practice(
    "is_conv_like",
    "寫 is_conv_like(node)：node 是不是 torchao 折得掉 BN 的 conv（setup 格 CONV_OPS 裡的九種之一）？"
    '檢查用的圖裡有一個名叫 conv 的模型輸入、一個 padding="same" 的 conv1d、一個 conv_transpose1d，'
    "和一個被改名成 conv1d_9 的 linear。",
    _CONV_OPS_TEXT + "def is_conv_like(node):\n    raise NotImplementedError()\n",
    _check_is_conv_like,
    'op 的身分在 node.op（"call_function"）和 node.target；target 直接拿去 CONV_OPS 裡查（in），'
    "不要自己列，也不要看名字：字串 padding 是 .padding、conv_transpose 也是 conv。",
    _CONV_OPS_TEXT + 'def is_conv_like(node):\n    return node.op == "call_function" and node.target in CONV_OPS\n',
    "同一個 op 可能有好幾個 overload（conv1d.default 與 conv1d.padding），CONV_OPS 把九種都列好了。",
)


class _ThreeLinears(nn.Module):
    """A linear after flatten (the model's input is 4-D), one on a 3-D input whose dim 1 equals out_features, and one
    on the 4-D input itself."""

    def __init__(self) -> None:
        super().__init__()
        self.flat, self.seq, self.pixel = nn.Linear(12, 3), nn.Linear(4, 4), nn.Linear(2, 2)

    def forward(self, image: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.flat(torch.flatten(image, 1)), self.seq(seq), self.pixel(image)


def _check_linear_folds(linear_folds: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_ThreeLinears().eval(), (torch.ones(2, 3, 2, 2), torch.ones(2, 4, 4)))
    linears = [n for n in gm.graph.nodes if n.op == "call_function" and n.target == _LINEAR]
    problems = []
    for title, linear in zip(
        (
            "flatten(image) → linear（模型輸入是 4-D）",
            "seq（2, 4, 4）→ Linear(4, 4)",
            "image（2, 3, 2, 2）→ Linear(2, 2)",
        ),
        linears,
        strict=True,
    ):
        want = linear.args[0].meta["val"].ndim == 2
        got = linear_folds(linear)
        if bool(got) is not want:
            problems.append(f"{title}：應該回傳 {want}，你的是 {got!r}")
    return problems


LINEAR_FOLDS = Practice(
    "linear_folds",
    "寫 linear_folds(linear)：linear 是圖上的一個 linear node，接在它後面的 BN 會不會被折掉？回傳 True 或 False。"
    "檢查用三個 linear：flatten 之後的（模型輸入是 4-D）、3-D 輸入而且第 1 維剛好等於 out_features 的、直接吃 4-D 輸入的。",
    "def linear_folds(linear):\n    raise NotImplementedError()\n",
    _check_linear_folds,
    'linear 自己的輸入是 linear.args[0]，它的 .meta["val"] 是 export 時記下的 tensor；規則只看它的維度數（.ndim），'
    "不看各維的大小，也不看模型的輸入。",
    'def linear_folds(linear):\n    return linear.args[0].meta["val"].ndim == 2\n',
    "3-D 以上時 BN 正規化第 1 維、linear 作用在最後一維，兩者對不上，大小剛好相等也一樣不折。",
)


class _BnNeighbours(nn.Module):
    """Three BNs: after conv → relu, after a conv that is not the op right before it in graph order, and after a conv
    whose output also goes to an add."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2, self.c3, self.c4 = (nn.Conv2d(2, 2, 1) for _ in range(4))
        self.n1, self.n2, self.n3 = nn.BatchNorm2d(2), nn.BatchNorm2d(2), nn.BatchNorm2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.n1(torch.relu(self.c1(x)))
        p = self.c2(x)
        q = self.c3(x)
        b = self.n2(p)
        y = self.c4(x)
        return a + b + q + self.n3(y) + y


def _conv2d_before(bn: Any) -> Any:
    source = bn.args[0]
    is_conv = source.op == "call_function" and source.target == torch.ops.aten.conv2d.default
    return source if is_conv else None


def _check_folds_into(folds_into: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_BnNeighbours().eval(), (torch.ones(1, 2, 2, 2),))
    bns = [n for n in gm.graph.nodes if n.op == "call_function" and "batch_norm" in str(n.target)]
    problems = []
    for title, bn in zip(
        ("c1 → relu → BN", "c2 → BN（圖上緊接在 BN 前面的是 c3）", "c4 → BN，c4 的輸出也給 add"), bns, strict=True
    ):
        want, got = _conv2d_before(bn), folds_into(bn)
        if got is not want:
            shown = "None" if want is None else want.name
            mine = "None" if got is None else getattr(got, "name", repr(got))
            problems.append(f"{title}：應該回傳 {shown}，你的是 {mine}")
    return problems


FOLDS_INTO = Practice(
    "folds_into",
    "寫 folds_into(bn)：bn 是圖上的一個 batch_norm node，它會折進哪個 conv2d？回傳那個 conv2d node，折不了就回傳 None。"
    "只看 BN 的輸入這一步（這題只管 conv2d，不管 linear）。檢查用三個 BN：接在 conv → relu 後面、"
    "圖上緊接在另一個 conv 後面、接在輸出也給 add 的 conv 後面。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\n\n\ndef folds_into(bn):\n    raise NotImplementedError()\n",
    _check_folds_into,
    "BN 吃的 tensor 是 bn.args[0] 這條邊，不是圖上排在前面的 bn.prev；它是 conv2d 就折，不是就不折，"
    "不要再往上游找，也不用管 conv 還有幾個 users。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\n\n\n"
    "def folds_into(bn):\n"
    "    source = bn.args[0]\n"
    '    return source if source.op == "call_function" and source.target == CONV else None\n',
    "中間隔著 relu 的 BN 沒有 weight 可以直接吸收；conv 的輸出另有 consumer 時 torchao 0.18 照樣折（上游的 bug）。",
)


def _no_labels_prepare(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[list[str], list[str]]:
    """The modules of ``model``'s BN nodes before prepare_pt2e (no labels: only the folds happen), and after."""
    from common.pt2e import Quantizer, export_module, prepare_pt2e

    class NoLabels(Quantizer):
        def annotate(self, model: Any) -> Any:
            return model

        def validate(self, model: Any) -> None:
            pass

    def bn_modules(gm: Any) -> list[str]:
        return [
            list(n.meta["nn_module_stack"].values())[-1][0]
            for n in gm.graph.nodes
            if n.op == "call_function" and "batch_norm" in str(n.target)
        ]

    gm = export_module(model.eval(), inputs)
    before = bn_modules(gm)
    with warnings.catch_warnings():  # torchao warns about the BN it leaves after a 3-D linear
        warnings.simplefilter("ignore")
        return before, bn_modules(prepare_pt2e(gm, NoLabels()))


def _value_table(answer: Any, keys: tuple[str, ...], what: str) -> list[str]:
    """What is wrong with the shape of a table answer: a dict with exactly ``keys``, each True or False."""
    if not isinstance(answer, dict):
        return [f"{what} 應該是一個 dict，你的是 {type(answer).__name__}"]
    problems = []
    if set(answer) != set(keys):
        problems.append(f"{what} 的 key 應該正好是 {list(keys)}，你的是 {list(answer)}")
    problems += [
        f"{what}[{key!r}] 應該填 True 或 False，你的是 {answer[key]!r}"
        for key in keys
        if key in answer and type(answer[key]) is not bool
    ]
    return problems


class _FourBns(nn.Module):
    """x → bn_in → conv → bn_conv → relu → bn_relu → flatten → fc → bn_fc."""

    def __init__(self) -> None:
        super().__init__()
        self.bn_in, self.conv, self.bn_conv = nn.BatchNorm2d(3), nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.bn_relu, self.fc, self.bn_fc = nn.BatchNorm2d(4), nn.Linear(4 * 4 * 4, 5), nn.BatchNorm1d(5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn_relu(torch.relu(self.bn_conv(self.conv(self.bn_in(x)))))
        return self.bn_fc(self.fc(torch.flatten(y, 1)))


_FOUR_BNS = {"bn_in": "模型的輸入 x", "bn_conv": "conv", "bn_relu": "relu", "bn_fc": "2-D 輸入的 fc（linear）"}


def _check_stays_on_graph(stays_on_graph: Any) -> list[str]:
    problems = _value_table(stays_on_graph, tuple(_FOUR_BNS), "stays_on_graph")
    if problems:
        return problems
    before, after = _no_labels_prepare(_FourBns(), (torch.ones(2, 3, 4, 4),))
    for key, source in _FOUR_BNS.items():
        want = key in after
        if key in before and stays_on_graph[key] is not want:
            why = "前面沒有 weight 可以直接吸收它，BN 留在圖上" if want else "BN 折進它的 weight 與 bias，從圖上消失"
            problems.append(f"{key}（它的輸入是{source}）：應該是 {want}，你填 {stays_on_graph[key]}：{why}")
    return problems


STAYS_ON_GRAPH = Practice(
    "stays_on_graph",
    "先別寫程式，預測一個模型的四個 BN 在 prepare_pt2e 之後還在不在圖上：x → bn_in → conv → bn_conv → relu → bn_relu "
    "→ flatten → fc（linear）→ bn_fc。還在填 True，被折掉填 False；檢查會真的跑一次 prepare_pt2e 看。",
    'stays_on_graph = {\n    "bn_in": None,\n    "bn_conv": None,\n    "bn_relu": None,\n    "bn_fc": None,\n}\n',
    _check_stays_on_graph,
    "BN 只折得進直接在它前面、有 weight 的 op：每個 BN 只看它的輸入是什麼。是 conv 或 2-D 的 linear 就折掉；"
    "是模型輸入、relu 這種沒有 weight 的 op 就留下。不是全部折，也不是全部留。",
    'stays_on_graph = {\n    "bn_in": True,\n    "bn_conv": False,\n    "bn_relu": True,\n    "bn_fc": False,\n}\n',
    "bn_in 後面雖然接著 conv，但折疊是把 BN 併進它前面那個 op 的 weight；後面的 conv 吸收不了它。",
)


class _FiveRanks(nn.Module):
    """conv1d, conv2d and conv3d, each followed by a BN; a linear on a 2-D and on a 3-D input, each followed by a BN."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1d, self.conv1d_bn = nn.Conv1d(2, 2, 1), nn.BatchNorm1d(2)
        self.conv2d, self.conv2d_bn = nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2)
        self.conv3d, self.conv3d_bn = nn.Conv3d(2, 2, 1), nn.BatchNorm3d(2)
        self.linear_2d, self.linear_2d_bn = nn.Linear(3, 2), nn.BatchNorm1d(2)
        self.linear_3d, self.linear_3d_bn = nn.Linear(3, 3), nn.BatchNorm1d(2)

    def forward(self, seq: torch.Tensor, image: torch.Tensor, volume: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            self.conv1d_bn(self.conv1d(seq)),
            self.conv2d_bn(self.conv2d(image)),
            self.conv3d_bn(self.conv3d(volume)),
            self.linear_2d_bn(self.linear_2d(seq[:, 0])),
            self.linear_3d_bn(self.linear_3d(seq)),
        )


_FIVE_RANKS = {
    "conv1d": "conv1d，輸入 (N, C, L)",
    "conv2d": "conv2d，輸入 (N, C, H, W)",
    "conv3d": "conv3d，輸入 (N, C, D, H, W)",
    "linear_2d": "linear，輸入 (N, F)",
    "linear_3d": "linear，輸入 (N, C, F)",
}


def _check_folds_by_rank(folds_by_rank: Any) -> list[str]:
    problems = _value_table(folds_by_rank, tuple(_FIVE_RANKS), "folds_by_rank")
    if problems:
        return problems
    inputs = (torch.ones(2, 2, 3), torch.ones(2, 2, 2, 2), torch.ones(2, 2, 1, 2, 2))
    _, after = _no_labels_prepare(_FiveRanks(), inputs)
    for key, title in _FIVE_RANKS.items():
        want = f"{key}_bn" not in after
        if folds_by_rank[key] is not want:
            if key.startswith("conv"):
                why = "conv 的 output channel 在第 1 維，正好是 BN 的 channel，幾維的輸入都一樣折"
            elif want:
                why = "2-D 輸入的 linear，out_features 就是 BN 的 channel：折"
            else:
                why = "linear 作用在最後一維、BN 在第 1 維，兩者對不上：不折"
            problems.append(f"{title} → BN：應該是 {want}，你填 {folds_by_rank[key]}：{why}")
    return problems


FOLDS_BY_RANK = Practice(
    "folds_by_rank",
    "先別寫程式，預測五個 BN 會不會被 prepare_pt2e 折掉：分別接在 conv1d、conv2d、conv3d 後面，"
    "以及接在輸入 2-D 與 3-D 的 linear 後面。會折填 True，不折填 False；檢查會真的跑一次 prepare_pt2e 看。",
    'folds_by_rank = {\n    "conv1d": None,\n    "conv2d": None,\n    "conv3d": None,\n'
    '    "linear_2d": None,\n    "linear_3d": None,\n}\n',
    _check_folds_by_rank,
    "「輸入超過 2-D 就不折」只屬於 linear：linear 作用在最後一維，BN 作用在第 1 維。"
    "conv 的輸出 channel 本來就在第 1 維，所以 conv1d、conv2d、conv3d 的 BN 都折。",
    'folds_by_rank = {\n    "conv1d": True,\n    "conv2d": True,\n    "conv3d": True,\n'
    '    "linear_2d": True,\n    "linear_3d": False,\n}\n',
    "維度數只在 bn.args[0] 是 linear 時才要看；是 conv 時直接判成折。",
)


class _ThreeBnsToFold(nn.Module):
    """conv → BN; conv → relu → BN; the input → BN."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 3, 1), nn.Conv2d(3, 3, 1)
        self.n1, self.n2, self.n3 = nn.BatchNorm2d(3), nn.BatchNorm2d(3), nn.BatchNorm2d(3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.n1(self.c1(x)) + self.n2(torch.relu(self.c2(x))), self.n3(x)


def _check_folded_bns(folded_bns: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_ThreeBnsToFold().eval(), (torch.ones(1, 3, 2, 2),))
    bns = [n for n in gm.graph.nodes if n.op == "call_function" and "batch_norm" in str(n.target)]
    want = {
        bn.name for bn in bns if bn.args[0].op == "call_function" and bn.args[0].target == torch.ops.aten.conv2d.default
    }
    before = gm.graph.python_code("self").src
    got = folded_bns(gm)
    problems = []
    if gm.graph.python_code("self").src != before:
        problems.append(
            "你的程式改了傳進來的 gm（折掉或刪掉了 node、改了邊）：gm 是呼叫的人的圖，只能讀。"
            "要模擬折疊，先 copy.deepcopy(gm) 在複本上做，或只看每個 BN 的 args[0]"
        )
    try:
        names = {str(name) for name in got}
    except TypeError:
        return [*problems, f"應該回傳 BN node 名字的 list，你的是 {got!r}"]
    if names != want:
        problems.append(f"會被折掉的 BN 應該是 {sorted(want)}，你的是 {sorted(names)}")
    return problems


FOLDED_BNS = Practice(
    "folded_bns",
    "寫 folded_bns(gm)：回傳 gm 上會被 prepare_pt2e 折掉的 BN node 名字（這題只管 conv2d：BN 的輸入直接是 conv2d 就折），"
    "而且 gm 在你的程式跑完之後要和原本一模一樣：它是呼叫的人的圖。檢查用 conv → BN、conv → relu → BN、輸入 → BN 的小圖，"
    "跑完也會比對圖有沒有被改。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\n\n\ndef folded_bns(gm):\n    raise NotImplementedError()\n",
    _check_folded_bns,
    "預測只要讀：走過 gm.graph.nodes，找 target 裡有 batch_norm 的 node，看它的 args[0] 是不是 conv2d。"
    "replace_all_uses_with、erase_node、torchao 的 _fuse_conv_bn_ 都會改圖，不要用在傳進來的 gm 上。",
    "import torch\n\nCONV = torch.ops.aten.conv2d.default\n\n\n"
    "def folded_bns(gm):\n"
    "    names = []\n"
    "    for node in gm.graph.nodes:\n"
    '        if "batch_norm" in str(node.target) and node.args[0].target == CONV:\n'
    "            names.append(node.name)\n"
    "    return names\n",
    "真的想讓 torchao 折一次來看，也要先 copy.deepcopy(gm)，在複本上折。",
)


class _Products(nn.Module):
    """Every way of multiplying by a weight: nn.Linear, F.linear, mm, addmm, matmul and @."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.w, self.b = nn.Parameter(torch.ones(4, 3)), nn.Parameter(torch.zeros(3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            self.fc(x),
            torch.nn.functional.linear(x, self.w.t()),
            torch.mm(x, self.w),
            torch.addmm(self.b, x, self.w),
            torch.matmul(x, self.w),
        )


def _check_is_linear(is_linear: Any) -> list[str]:
    from common.pt2e import export_module

    gm = export_module(_Products().eval(), (torch.ones(2, 4),))
    problems = []
    for node in gm.graph.nodes:
        want = node.op == "call_function" and node.target == _LINEAR
        got = is_linear(node)
        if bool(got) is not want:
            problems.append(f"{node.name}（op={node.op}，target={node.target}）：應該回傳 {want}，你的是 {got!r}")
    return problems


IS_LINEAR = Practice(
    "is_linear",
    "寫 is_linear(node)：torchao 只把 BN 折進一種矩陣乘法，就是 aten.linear（setup 格的 LINEAR）。node 是它時回傳 True，否則 False。"
    "檢查的圖裡有 nn.Linear、F.linear、torch.mm、torch.addmm、torch.matmul。",
    "import torch\n\nLINEAR = torch.ops.aten.linear.default\n\n\ndef is_linear(node):\n    raise NotImplementedError()\n",
    _check_is_linear,
    "mm、addmm、matmul 雖然也是乘上一個 weight，target 卻各是不同的 op；_fuse_linear_bn_ 只比對 LINEAR 一個 target。"
    'node.op == "call_function" 而且 node.target == LINEAR 才算。',
    "import torch\n\nLINEAR = torch.ops.aten.linear.default\n\n\n"
    "def is_linear(node):\n"
    '    return node.op == "call_function" and node.target == LINEAR\n',
    "nn.Linear 和 F.linear 都 export 成 aten.linear；自己寫的 x @ w 是 matmul，它後面的 BN 不折。",
)


MISCONCEPTIONS = (
    Misconception(
        "mutates_graph",
        "在傳進來的圖上真的折了一次",
        "bn_survives 只是預測，圖是呼叫的人的，要原封不動還給他。你的程式在傳進來的圖上跑了折疊或改了 node，"
        "之後要 prepare 的那張圖就被改掉了。只讀 bn.args[0] 的 op、target 與 meta，照 C 段的表判斷。",
        RULES,
        public=_graph_changed,
        practice=FOLDED_BNS,
    ),
    Misconception(
        "every_bn_folds",
        "以為每個 BN 都會被折掉",
        "prepare_pt2e 只折得掉前面有 weight 可以吸收它的 BN：輸入是 conv，或是輸入 2-D 的 linear。"
        "接在模型輸入、relu、pool、add 後面的 BN 沒有 weight 可以併，會留在圖上。照 C 段的表，看 bn.args[0] 是什麼再回答。",
        ONLY_THE_INPUT,
        public=_every_bn_folds,
        practice=STAYS_ON_GRAPH,
    ),
    Misconception(
        "no_bn_folds",
        "以為 prepare_pt2e 不動 BN",
        "prepare_pt2e 的第一步就是折 BN：接在 conv 或 2-D linear 後面的 BN 會換算進它們的 weight 與 bias，從圖上消失。"
        "只有前面沒有 weight 可以吸收的 BN 才會留下來，要看 bn.args[0] 是什麼再決定。",
        WHEN,
        public=_no_bn_folds,
        practice=STAYS_ON_GRAPH,
    ),
    Misconception(
        "rank_rule_for_conv",
        "把 linear 的維度規則套到 conv 上",
        "輸入超過 2-D 就不折，是 linear 專屬的規則：linear 作用在最後一維，BN 作用在第 1 維，兩者對不上。"
        "conv 的 output channel 就在第 1 維，正好是 BN 的 channel，所以 conv1d、conv2d、conv3d 後面的 BN 不管幾維都折。",
        LINEAR_3D_STAYS,
        public=_rank_rule_for_conv,
        practice=FOLDS_BY_RANK,
    ),
    Misconception(
        "conv2d_only",
        "只認得 conv2d",
        "torchao 折的是整個 conv 家族：conv1d、conv2d、conv3d（數字與字串 padding 各是一個 overload），"
        "還有 conv_transpose1d／2d／3d。只比對 conv2d，其他 conv 後面的 BN 就被你判成不折了。"
        "拿 bn.args[0].target 和 setup 格的 CONV_OPS 比對。",
        ONLY_THE_INPUT,
        public=_conv2d_only,
        practice=IS_CONV_LIKE,
    ),
    Misconception(
        "transpose_missed",
        "漏了 conv_transpose",
        "conv_transpose 也是 conv：它的 weight 一樣吸收得了 BN 的 s，torchao 把 conv_transpose1d／2d／3d 後面的 BN 都折掉。"
        "你的判斷漏了其中幾種。用 setup 格的 CONV_OPS，不要自己列。",
        ONLY_THE_INPUT,
        public=_transpose_missed,
        practice=IS_CONV_LIKE,
    ),
    Misconception(
        "padding_overload_missed",
        "漏了 padding 的 overload",
        'padding="same" 這種字串 padding 的 conv，export 出來是 aten.conv1d.padding 這類 overload，'
        "和 .default 是同一個 op 的兩種寫法，torchao 一樣折。你自己列的 op 少了其中幾個 .padding；"
        "用 setup 格的 CONV_OPS，九種都在裡面。",
        ONLY_THE_INPUT,
        public=_padding_missed,
        practice=IS_CONV_LIKE,
    ),
    Misconception(
        "fold_needs_bias",
        "以為要有 bias 才折得進去",
        "你可能以為 BN 的平移 (β − s·μ) 得放進 conv 原本的 bias，conv 沒有 bias 就折不了。"
        "torchao 遇到沒有 bias 的 conv（或 linear）會替它新增一個 bias 常數（M04-1 的 conv1_weight_bias），照樣折。"
        "有沒有 bias 不影響結果，只看 bn.args[0] 的 target。",
        WHEN,
        public=_needs_bias,
        practice=FOLDED_BIAS,
    ),
    Misconception(
        "linear_never_folds",
        "以為 linear 後面的 BN 不會折",
        "linear + BN 也會折，公式和 conv 一樣（weight 的第 0 維乘 s），前提是 linear 的輸入是 2-D 的 (N, C)。"
        "你把 linear 後面的 BN 都判成留下；bn.args[0] 是 LINEAR 時，還要看 linear 輸入的維度。",
        LINEAR_2D_FOLDS,
        public=_linear_never_folds,
        practice=LINEAR_FOLDS,
    ),
    Misconception(
        "linear_ignores_rank",
        "沒看 linear 輸入的維度",
        "linear 的輸入是 3-D 以上時，BN 正規化的是第 1 維，linear 卻作用在最後一維，兩者對不上："
        "torchao 發出 warning、把 BN 留在圖上。你把 linear 後面的 BN 一律判成折掉；"
        '要看 linear 自己的輸入（linear node 的 args[0]）的 .meta["val"].ndim，大於 2 就不折。',
        LINEAR_3D_STAYS,
        public=_linear_ignores_rank_too,
        practice=LINEAR_FOLDS,
    ),
    Misconception(
        "linear_shape_not_rank",
        "比較各維的大小，而不是看維度數",
        "你用形狀判斷 linear 和 BN 對不對得上（例如第 1 維是不是等於 out_features），可是 3-D 輸入時 BN 正規化第 1 維、"
        "linear 作用在最後一維，兩者本來就是不同的維度，大小剛好相等也一樣不折（B 段 C = L = 4 的例子）。"
        '規則只看 linear 輸入（args[0]）的 .meta["val"].ndim：大於 2 就不折。',
        LINEAR_3D_STAYS,
        public=_linear_shape,
        practice=LINEAR_FOLDS,
    ),
    Misconception(
        "matmul_as_linear",
        "把 mm、addmm、matmul 當成 linear",
        "mm、addmm、matmul 也是乘上一個 weight，但 torchao 只認得 aten.linear：_fuse_linear_bn_ 只比對 LINEAR 這一個 target，"
        "其他乘法後面的 BN 不折，也沒有 warning。bn.args[0].target 要正好是 LINEAR 才套用 2-D 的規則。",
        ONLY_THE_INPUT,
        public=_matmul_as_linear,
        practice=IS_LINEAR,
    ),
    Misconception(
        "rank_of_model_input",
        "看的是模型輸入的維度",
        "規則看的是 linear 自己的輸入：模型輸入是 4-D 的圖片，flatten 之後進 linear 的卻是 2-D，這時 BN 照樣折。"
        "你看的是模型的輸入或別的 node，不是 linear node 的 args[0]。",
        RULES,
        public=_rank_of_model_input,
        practice=LINEAR_FOLDS,
    ),
    Misconception(
        "found_by_name",
        "用 node 的名字認 conv 與 linear",
        "node 的名字只是標記：叫 conv2d 的可能是模型輸入；pass 依 module 改名之後，叫 conv 的可能是 linear，"
        "叫 linear 的可能是 conv。op 的身分在 node.op 與 node.target：先確認是 call_function，再拿 target 和 CONV_OPS、LINEAR 比對。",
        TARGET,
        public=_by_name,
        practice=IS_CONV_LIKE,
    ),
    Misconception(
        "previous_in_graph_order",
        "看的是圖上排在 BN 前面的 node",
        "bn.prev 只是圖的順序上排在 BN 前一個的 node，不一定是 BN 的輸入：conv 算完可能先算別的東西，"
        "緊鄰在 BN 前面的 conv 也可能和它無關。BN 吃的是哪個 tensor，要看 bn.args[0] 這條邊，不看排列順序。",
        ARGS,
        public=_previous_in_order,
        practice=FOLDS_INTO,
    ),
    Misconception(
        "looks_past_input",
        "穿過中間的 op 往上游找 conv",
        "torchao 只看 BN 的第一個輸入：中間隔著 relu、pool、add、cat 或加純量，BN 就沒有 weight 可以直接吸收，會留在圖上。"
        "你往上游找到 conv 或 linear 就判成會折；只看 bn.args[0] 這一步，不要再往上走。",
        ONLY_THE_INPUT,
        public=_looks_past_input,
        practice=FOLDS_INTO,
    ),
    Misconception(
        "single_user_required",
        "以為輸出有別的 consumer 就不折",
        "torchao 0.18 折之前不檢查 conv 或 linear 的輸出還有沒有別的 consumer，照樣折（這是上游的 bug，不是設計）。"
        "練習預測的是 torchao 實際怎麼做，所以這種 BN 也算折掉；只看 bn.args[0] 是什麼，不看它有幾個 users。",
        ONLY_THE_INPUT,
        public=_single_user,
        practice=FOLDS_INTO,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "bn_survives",
        TITLE,
        ("bn_survives",),
        {"conv_models": conv_models, "linear_models": linear_models, "branches": branches},
        misconceptions=MISCONCEPTIONS,
    ),
)

"""Public cases of M07-1 prepare_qat_pt2e (fake_quant_roles, fake_quant_instances) on the chapter's models.

Also what the hidden cases share: a small QAT Quantizer (fake-quantize modules for the
activations, weights and outputs of every conv2d / linear; an add shares one instance for
its inputs and output), the QAT graph of a model, and how the student's answers are read.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "fake_quant_roles 與 fake_quant_instances：QAT 圖上的 fake-quant 量化的是什麼"

WEIGHTED = (torch.ops.aten.conv2d.default, torch.ops.aten.linear.default)
QAT_CASE_SECONDS = 60
"""Time limit of a case that prepares a QAT graph with conv → BN: prepare_qat_pt2e traces its conv → BN
patterns with torch.export (a second or two alone, several times that on a shared, loaded machine)."""
ADD = torch.ops.aten.add.Tensor


def qat_quantizer() -> Any:
    """Fake-quantize every conv2d / linear (input, per-channel weight, output); an add of two
    activations shares one fake-quantize instance between its inputs and its output."""
    from torchao.quantization.pt2e import (
        FakeQuantize,
        FusedMovingAvgObsFakeQuantize,
        MovingAveragePerChannelMinMaxObserver,
    )

    from common.pt2e import (
        ANNOTATION_KEY,
        QuantizationAnnotation,
        QuantizationSpec,
        Quantizer,
        SharedQuantizationSpec,
    )

    def act() -> Any:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-128,
            quant_max=127,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=FusedMovingAvgObsFakeQuantize,
        )

    def weight() -> Any:
        return QuantizationSpec(
            dtype=torch.int8,
            quant_min=-127,
            quant_max=127,
            qscheme=torch.per_channel_symmetric,
            ch_axis=0,
            observer_or_fake_quant_ctr=FakeQuantize.with_args(
                observer=MovingAveragePerChannelMinMaxObserver,
                dtype=torch.int8,
                quant_min=-127,
                quant_max=127,
                qscheme=torch.per_channel_symmetric,
                ch_axis=0,
            ),
        )

    class QatQuantizer(Quantizer):
        def annotate(self, model: GraphModule) -> GraphModule:
            for node in model.graph.nodes:
                if node.op != "call_function":
                    continue
                if node.target in WEIGHTED:
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={node.args[0]: act(), node.args[1]: weight()},
                        output_qspec=act(),
                        _annotated=True,
                    )
                elif node.target == ADD and all(isinstance(a, Node) for a in node.args[:2]):
                    first, second = node.args[:2]
                    shared = SharedQuantizationSpec((first, node))
                    node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                        input_qspec_map={first: act(), second: shared}, output_qspec=shared, _annotated=True
                    )
            return model

        def validate(self, model: GraphModule) -> None:
            pass

    return QatQuantizer()


def qat_graph(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``model`` exported in train mode and prepared with ``qat_quantizer()``, annotations removed.

    prepare leaves each node's ``quantization_annotation`` in ``node.meta``; nothing here reads
    it, and the grader's recorder cannot write down a per-channel fake-quant spec (its
    constructor holds an observer *class*), so the leftover labels are dropped before the
    graph reaches the student's code.
    """
    from common.pt2e import ANNOTATION_KEY, export_module, prepare_qat_pt2e

    gm = prepare_qat_pt2e(export_module(model.train(), inputs), qat_quantizer())
    for node in gm.graph.nodes:
        node.meta.pop(ANNOTATION_KEY, None)
    return gm


def module_kinds(gm: GraphModule) -> dict[str, str]:
    """Every call_module node of ``gm`` and the class of its module (for messages)."""
    return {n.name: type(gm.get_submodule(str(n.target))).__name__ for n in gm.graph.nodes if n.op == "call_module"}


def structure(gm: GraphModule) -> list[tuple[str, str]]:
    """Every node of ``gm``: its name and ``op target (args) {kwargs}`` as text (changes when the graph does)."""
    out = []
    for node in gm.graph.nodes:
        args = torch.fx.node.map_arg(node.args, lambda n: f"%{n.name}")
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: f"%{n.name}")
        out.append((node.name, f"{node.op} {node.target} {args} {kwargs}"))
    return out


def graph_change(before: list[tuple[str, str]], after: list[tuple[str, str]]) -> str | None:
    """What changed between two ``structure`` readings, in a few words (``None``: nothing)."""
    if before == after:
        return None
    old, new = dict(before), dict(after)
    edited = [name for name in old if name in new and old[name] != new[name]]
    removed = [name for name in old if name not in new]
    added = [name for name in new if name not in old]
    parts = []
    if edited:
        parts.append(f"{'、'.join(edited[:3])} 的 target 或引數變了")
    if removed:
        parts.append(f"少了 {'、'.join(removed[:3])}")
    if added:
        parts.append(f"多了 {'、'.join(added[:3])}")
    return "，".join(parts) or "node 的順序變了"


def describe_answers(ns: Namespace, gm: GraphModule) -> dict[str, Any]:
    """``fake_quant_roles(gm)`` and ``fake_quant_instances(gm)`` as plain data, and whether they left
    ``gm`` as it was (both only read the graph; the notebook goes on using it)."""
    kinds = module_kinds(gm)
    before = structure(gm)
    roles = ns["fake_quant_roles"](gm)
    if type(roles) is not dict:
        raise EvidenceError(f"fake_quant_roles 應該回傳 dict，看到 {type(roles).__name__}")
    table = {}
    for key, role in roles.items():
        name = key.name if type(key) is Node else key
        if type(name) is not str:
            raise EvidenceError(f"fake_quant_roles 的 key 應該是 node 的名字，看到 {type(key).__name__}")
        if type(role) is not str:
            raise EvidenceError(f'fake_quant_roles 的值應該是 "weight" 或 "activation"，看到 {type(role).__name__}')
        table[safe_text(name, 80)] = safe_text(role, 40)
    count = ns["fake_quant_instances"](gm)
    if type(count) is not int:
        raise EvidenceError(f"fake_quant_instances 應該回傳 int，看到 {type(count).__name__}")
    return {"roles": table, "instances": count, "modules": kinds, "changed": graph_change(before, structure(gm))}


# --- public cases -------------------------------------------------------------------------------


def public_conv_bn(ns: Namespace, seed: int) -> Any:
    """conv_bn_relu: BN stays in the QAT graph, the conv's weight is scaled by it before its fake-quant."""
    from common.models import example_inputs, get_model

    return describe_answers(ns, qat_graph(get_model("conv_bn_relu"), example_inputs(2)))


def public_mlp(ns: Namespace, seed: int) -> Any:
    """mlp: two linears, fake-quants on inputs, weights and outputs."""
    from common.models import get_model

    return describe_answers(ns, qat_graph(get_model("mlp"), seeded_inputs(seed, (2, 16))))


class Blend(nn.Module):
    """Two inputs, and operands where the digits graph does not have them: an activation that is the second
    operand of ``minimum`` (a parameter first), an activation that reaches ``maximum`` only as the keyword
    ``other`` (``public_operands`` moves it there), weights through a transpose and a ``stack``, a linear whose
    weight position holds the second input, an add of two activations (one shared fake-quant) and an
    activation plus a buffer."""

    def __init__(self, features: int = 4) -> None:
        super().__init__()
        self.ceiling = nn.Parameter(torch.rand(features) + 1.0)
        self.proj = nn.Parameter(torch.randn(features, features))
        self.floor = nn.Parameter(-torch.rand(features))
        self.rows = nn.Parameter(torch.randn(features))
        self.cols = nn.Parameter(torch.randn(features))
        self.register_buffer("bias", torch.randn(2))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        h = torch.minimum(self.ceiling, x)  # the activation is the second operand
        h = nn.functional.linear(h, self.proj.t())  # a weight through a transpose
        g = torch.maximum(self.floor, h)  # public_operands passes h as the keyword ``other``
        out = nn.functional.linear(g, torch.stack([self.rows, self.cols]))  # a weight through stack
        out = out + nn.functional.linear(x, y)  # y sits where a weight goes, and is an activation
        return out + self.bias


def public_operands(ns: Namespace, seed: int) -> Any:
    """Blend: roles that only a walk over every input of every op (args and kwargs) up to the model's inputs
    gets right, and an add whose inputs and output share one fake-quant instance."""
    torch.manual_seed(seed)
    gm = qat_graph(Blend(), seeded_inputs(seed, (2, 4), (2, 4)))
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.maximum.default:
            node.kwargs = {"other": node.args[1]}  # maximum(floor, other=h): h is no positional argument
            node.args = (node.args[0],)
    gm.graph.lint()
    gm.recompile()
    return describe_answers(ns, gm)


def public_inserted(ns: Namespace, seed: int) -> Any:
    """mlp's QAT graph with call_module nodes inserted by hand: an ``nn.Identity`` named like prepare's
    fake-quants, an observer (no fake-quant) on a weight, a fake-quant with another name on the input, a
    ``LearnableFakeQuantize`` (a FakeQuantizeBase that is no FakeQuantize) on a weight, and a fake-quant
    that is registered but never called."""
    from torchao.quantization.pt2e import (
        FakeQuantize,
        LearnableFakeQuantize,
        MinMaxObserver,
        MovingAverageMinMaxObserver,
    )

    from common.models import get_model

    gm = qat_graph(get_model("mlp"), seeded_inputs(seed, (2, 16)))
    inserted = [
        ("activation_post_process_40", nn.Identity(), "relu"),
        ("activation_post_process_41", MinMaxObserver(), "fc2_weight"),
        ("input_range", FakeQuantize(), "x"),
        ("activation_post_process_42", LearnableFakeQuantize(observer=MovingAverageMinMaxObserver), "fc1_weight"),
    ]
    for name, module, after in inserted:
        gm.add_submodule(name, module)
        source = next(n for n in gm.graph.nodes if n.name == after)
        with gm.graph.inserting_after(source):
            node = gm.graph.call_module(name, (source,))
        for user in list(source.users):
            if user is not node:
                user.replace_input_with(source, node)
    gm.add_submodule("unused_fake_quant", FakeQuantize())  # registered, but no node calls it
    gm.graph.lint()
    gm.recompile()
    return describe_answers(ns, gm)


# --- where the chapter teaches it ----------------------------------------------------------------

READING = Section("D. 讀懂 QAT 圖上的 fake-quant")
BN_KEPT = Section("B. BN 留到 convert")
FAKE_QUANT = Section("A. observer 與 fake-quant")
TRAIN_EVAL = Section("C. train / eval")
RULES = Section("練習：fake_quant_roles 與 fake_quant_instances（5 分）")


# --- reading the evidence (the public detectors here, the hidden ones in autograder/checks/test_m07_1.py) ---


def answers(evidence: Any, case: str) -> dict[str, Any]:
    """One case's recorded answers (empty when the case raised)."""
    found = diagnosis.value(evidence, case)
    return found if isinstance(found, dict) and isinstance(found.get("roles"), dict) else {}


def role_flips(seen: Any, expected: Any, *cases: str) -> list[tuple[str, str, str, str]]:
    """``(case, node, want, got)`` for every fake-quant both answers list whose role differs (all cases when none
    named)."""
    found = []
    for case in cases or tuple(diagnosis.cases(expected)):
        got, want = answers(seen, case).get("roles", {}), answers(expected, case).get("roles", {})
        found += [(case, name, role, got[name]) for name, role in want.items() if name in got and got[name] != role]
    return found


def flipped(seen: Any, expected: Any, want: str, *cases: str) -> int:
    """How many fake-quants whose role is ``want`` the student gave the other role."""
    return sum(1 for _, _, role, _ in role_flips(seen, expected, *cases) if role == want)


def graph_changed(seen: Any, expected: Any) -> bool:
    return any(answers(seen, case).get("changed") for case in diagnosis.cases(seen))


def _public_weights_as_activations(seen: Any, expected: Any) -> bool:
    return flipped(seen, expected, "weight", "conv_bn_relu") > 0 and flipped(seen, expected, "activation") == 0


def _public_activations_as_weights(seen: Any, expected: Any) -> bool:
    return flipped(seen, expected, "activation", "conv_bn_relu", "mlp") > 0 and flipped(seen, expected, "weight") == 0


def _listed(seen: Any, expected: Any, case: str) -> tuple[list[str], list[str], dict[str, str]]:
    """The fake-quants the student lists and the key does not, those the key lists and the student does not,
    and every call_module node's module class."""
    got, want = answers(seen, case).get("roles", {}), answers(expected, case).get("roles", {})
    modules = answers(expected, case).get("modules", {})
    return [n for n in got if n not in want], [n for n in want if n not in got], modules


def _public_found_by_name(seen: Any, expected: Any) -> bool:
    """A module that is no fake-quant nor observer listed (the Identity named like one), or a fake-quant with
    another kind of name left out (the student answered on that graph)."""
    if not answers(seen, "inserted"):
        return False
    extra, missing, modules = _listed(seen, expected, "inserted")
    lookalike = any("Observer" not in modules.get(name, "Observer") for name in extra)
    renamed = any(not name.startswith("activation_post_process") for name in missing)
    return lookalike or renamed


def _public_fake_quantize_class(seen: Any, expected: Any) -> bool:
    """Only the LearnableFakeQuantize (a FakeQuantizeBase that is no FakeQuantize) left out, nothing extra."""
    extra, missing, modules = _listed(seen, expected, "inserted")
    return bool(missing) and not extra and all(modules.get(name) == "LearnableFakeQuantize" for name in missing)


def _public_observers_too(seen: Any, expected: Any) -> bool:
    extra, missing, modules = _listed(seen, expected, "inserted")
    return bool(extra) and not missing and all("Observer" in modules.get(name, "") for name in extra)


def _public_by_class(seen: Any, expected: Any) -> bool:
    """Every answer is "weight" exactly for the fake-quants of the weight's class, and some answer is wrong."""
    if not role_flips(seen, expected):
        return False
    for case in diagnosis.cases(expected):
        got, modules = answers(seen, case).get("roles", {}), answers(expected, case).get("modules", {})
        if any((role == "weight") != (modules.get(name) == "FakeQuantize") for name, role in got.items()):
            return False
    return True


def _public_digits_shapes(seen: Any, expected: Any) -> bool:
    """The weights scaled by BN's γ/σ right; weights through a transpose, a stack or an inserted module answered
    as activations; no activation as a weight."""
    return (
        flipped(seen, expected, "weight", "conv_bn_relu") == 0
        and flipped(seen, expected, "weight") > 0
        and flipped(seen, expected, "activation") == 0
    )


def _operand_activations(evidence: Any) -> int:
    return sum(1 for role in answers(evidence, "operands").get("roles", {}).values() if role == "activation")


def _operand_activations_lost(seen: Any, expected: Any) -> int:
    """Activations of Blend answered as weights, when the other cases and every weight are right."""
    if role_flips(seen, expected, "conv_bn_relu", "mlp", "inserted") or flipped(seen, expected, "weight", "operands"):
        return 0
    return flipped(seen, expected, "activation", "operands")


def _public_args0_only(seen: Any, expected: Any) -> bool:
    """Following args[0] crashes on stack's list, or loses the activation behind minimum(ceiling, x) and all
    the way downstream: most of Blend's activations."""
    crashed = diagnosis.error(seen, "operands") in ("AttributeError", "TypeError") and "list" in (
        diagnosis.error_message(seen, "operands")
    )
    return crashed or 2 * _operand_activations_lost(seen, expected) > _operand_activations(expected)


def _public_positional_only(seen: Any, expected: Any) -> bool:
    """Only the activation reached through the keyword argument (and what follows it) lost: a few of Blend's
    activations."""
    lost = _operand_activations_lost(seen, expected)
    return 0 < lost and 2 * lost <= _operand_activations(expected)


def _public_by_consumer_position(seen: Any, expected: Any) -> bool:
    """Wrong both ways (the buffer added to an activation as an activation, the input y in a weight's position as
    a weight), while conv_bn_relu's roles are right."""
    return (
        not role_flips(seen, expected, "conv_bn_relu")
        and flipped(seen, expected, "weight") > 0
        and flipped(seen, expected, "activation") > 0
    )


def _instances(evidence: Any, case: str) -> Any:
    return answers(evidence, case).get("instances")


def _public_counts_nodes(seen: Any, expected: Any) -> bool:
    """Where fake-quant nodes share an instance (Blend's add), the count is the number of nodes."""
    for case in diagnosis.cases(expected):
        nodes = len(answers(expected, case).get("roles", {}))
        want = _instances(expected, case)
        if isinstance(want, int) and want < nodes and _instances(seen, case) == nodes:
            return True
    return False


def _public_counts_registered(seen: Any, expected: Any) -> bool:
    """Only the graph with a registered fake-quant no node calls is off (by more), with every fake-quant listed."""
    got, want = _instances(seen, "inserted"), _instances(expected, "inserted")
    others = ("conv_bn_relu", "mlp", "operands")
    others_right = all(_instances(seen, case) == _instances(expected, case) for case in others)
    extra, missing, _ = _listed(seen, expected, "inserted")
    return isinstance(got, int) and isinstance(want, int) and got > want and others_right and not extra and not missing


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------


class _Mixer(nn.Module):
    """Weights reached through ops (w * 2, a transpose, a stack), an activation that is addcmul's third operand,
    one that reaches sub only as the keyword ``other``, and a second input y in a linear's weight position."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3, 3))
        self.gain = nn.Parameter(torch.ones(3))
        self.shift = nn.Parameter(torch.zeros(3))
        self.register_buffer("offset", torch.zeros(3))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        doubled = self.w * 2
        turned = doubled.t()
        stacked = torch.stack([self.gain, self.shift])
        h = torch.addcmul(self.shift, self.gain, x)
        g = torch.sub(self.offset, other=h)
        return nn.functional.linear(g, turned), nn.functional.linear(x, y), stacked


def _call_text(node: Node) -> str:
    """``node`` as a call: ``sub(offset, other=addcmul)``, ``w``, ``x``."""
    if node.op in ("placeholder", "get_attr"):
        return f"{node.name}（{node.op}）"

    def shown(value: Any) -> str:
        if isinstance(value, Node):
            return value.name
        if isinstance(value, list | tuple):
            return "[" + ", ".join(shown(v) for v in value) + "]"
        return repr(value)

    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    parts = [shown(a) for a in node.args] + [f"{k}={shown(v)}" for k, v in node.kwargs.items()]
    return f"{node.name} = {target}({', '.join(parts)})"


def _check_reads_model_input(reads_model_input: Any) -> list[str]:
    gm = torch.fx.symbolic_trace(_Mixer())
    computed: set[Node] = set()  # nodes computed from a model input, in graph order
    problems = []
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        if node.op == "placeholder" or any(source in computed for source in node.all_input_nodes):
            computed.add(node)
        want = node in computed
        got = reads_model_input(node)
        if bool(got) is not want or not isinstance(got, bool):
            problems.append(f"{_call_text(node)}：應該回傳 {want}，你的是 {got!r}")
    return problems


READS_MODEL_INPUT = Practice(
    "reads_model_input",
    "寫 reads_model_input(node)：node 的值是不是（直接或間接）由模型的輸入算出來的？是就回傳 True（activation），"
    "只由模型的常數（get_attr）算出來就回傳 False（weight）。"
    "檢查用一張小圖：weight 先乘 2、轉置、stack 才用到；x 是 addcmul 的第三個運算元；sub 的 activation 寫在 keyword 引數 other；"
    "linear(x, y) 的 y 是模型的第二個輸入。",
    "def reads_model_input(node):\n    raise NotImplementedError()\n",
    _check_reads_model_input,
    "node 讀到模型的輸入只有兩種情況：它自己就是 placeholder，或它的某一個輸入讀到模型的輸入。"
    "node.all_input_nodes 列出 args 與 kwargs 裡的每一個 node（串列裡的也算），對每一個問同一個問題（遞迴）。",
    "def reads_model_input(node):\n"
    '    if node.op == "placeholder":\n'
    "        return True\n"
    "    return any(reads_model_input(source) for source in node.all_input_nodes)\n",
    "fake-quant node 的 args[0] 讀得到模型的輸入就是 activation，讀不到就是 weight：看上游，不看它接到誰、也不看它是什麼類別。",
)


def _fake_quant_graph() -> tuple[GraphModule, dict[str, bool]]:
    """A graph of call_module nodes, each module's name against what it is; name → whether it is a fake-quant."""
    from torchao.quantization.pt2e import (
        FakeQuantize,
        FusedMovingAvgObsFakeQuantize,
        LearnableFakeQuantize,
        MinMaxObserver,
        MovingAverageMinMaxObserver,
    )

    modules = {
        "activation_post_process_0": (nn.Identity(), False),
        "input_range": (FakeQuantize(), True),
        "activation_post_process_1": (MinMaxObserver(), False),
        "activation_post_process_2": (LearnableFakeQuantize(observer=MovingAverageMinMaxObserver), True),
        "weight_fq": (FusedMovingAvgObsFakeQuantize(), True),
    }
    root = nn.Module()
    graph = torch.fx.Graph()
    value = graph.placeholder("fake_quant")
    for name, (module, _) in modules.items():
        root.add_module(name, module)
        value = graph.call_module(name, (value,))
    graph.output(value)
    gm = GraphModule(root, graph)
    wanted = {node.name: modules.get(str(node.target), (None, False))[1] for node in gm.graph.nodes}
    return gm, wanted


def _check_is_fake_quant(is_fake_quant: Any) -> list[str]:
    gm, wanted = _fake_quant_graph()
    problems = []
    for node in gm.graph.nodes:
        got, want = is_fake_quant(gm, node), wanted[node.name]
        if bool(got) is not want:
            what = type(gm.get_submodule(str(node.target))).__name__ if node.op == "call_module" else node.op
            problems.append(f"{node.name}（{what}）：應該回傳 {want}，你的是 {got!r}")
    return problems


IS_FAKE_QUANT = Practice(
    "is_fake_quant",
    "寫 is_fake_quant(gm, node)：node 是不是呼叫一個 fake-quant 的 node？observer 不算，名字也不算數。"
    "檢查用的圖上有名叫 activation_post_process_N 的 nn.Identity 與 MinMaxObserver、叫別的名字的 FakeQuantize，"
    "一個 LearnableFakeQuantize，和一個名叫 fake_quant 的輸入。",
    "from torchao.quantization.pt2e import FakeQuantizeBase\n\n\ndef is_fake_quant(gm, node):\n"
    "    raise NotImplementedError()\n",
    _check_is_fake_quant,
    '先確定 node.op == "call_module"，再用 gm.get_submodule(node.target) 拿到它呼叫的 module，'
    "看 module 是不是 FakeQuantizeBase（每一種 fake-quant 共同的父類別）。",
    "from torchao.quantization.pt2e import FakeQuantizeBase\n\n\n"
    "def is_fake_quant(gm, node):\n"
    '    if node.op != "call_module":\n'
    "        return False\n"
    "    module = gm.get_submodule(node.target)\n"
    "    return isinstance(module, FakeQuantizeBase)\n",
    "名字是 prepare 取的，別人也能取；FakeQuantize 只是 fake-quant 的一種。認 module 的父類別，一次就都認得。",
)


MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "讀圖的時候改了圖",
        "fake_quant_roles 與 fake_quant_instances 只該讀圖，notebook 之後還要用同一張 QAT 圖訓練。"
        "你在讀之前做了會改圖的事（例如 move_exported_model_to_eval 把 BN 換成 eval 版本），傳進來的圖就不再是 train 模式。"
        "只走訪 gm.graph.nodes、讀 node 與 module，不要呼叫會改圖的函式。",
        TRAIN_EVAL,
        public=graph_changed,
    ),
    Misconception(
        "found_by_name",
        "用名字找 fake-quant",
        "activation_post_process_N 只是 prepare 取的名字：別人插進來的 nn.Identity 也可以叫這個名字，"
        "fake-quant 也可以叫別的名字。要看 node 呼叫的 module 是不是 fake-quant："
        "isinstance(gm.get_submodule(node.target), FakeQuantizeBase)。",
        FAKE_QUANT,
        public=_public_found_by_name,
        practice=IS_FAKE_QUANT,
    ),
    Misconception(
        "fake_quantize_class",
        "用 FakeQuantize 認 fake-quant，漏了其他子類別",
        "FakeQuantize 只是 fake-quant 的一種：LearnableFakeQuantize（scale 也跟著訓練的 LSQ）這類 fake-quant "
        "直接繼承 FakeQuantizeBase，不是 FakeQuantize 的子類別。你用 isinstance(..., FakeQuantize) 判斷，它就被漏掉了，"
        "實例也少算。題目要的是所有 FakeQuantizeBase。",
        RULES,
        public=_public_fake_quantize_class,
        practice=IS_FAKE_QUANT,
    ),
    Misconception(
        "observers_too",
        "observer 也當成 fake-quant",
        "observer 只看資料、記下範圍，不改數值；fake-quant 會把數值量化再反量化，訓練時模型看得見誤差。"
        "common.graph_utils.is_observer 兩種都認，這裡只要 fake-quant：用 isinstance(module, FakeQuantizeBase) 判斷。",
        FAKE_QUANT,
        public=_public_observers_too,
        practice=IS_FAKE_QUANT,
    ),
    Misconception(
        "by_class",
        "用 fake-quant 的類別判斷角色",
        "fake-quant 的類別是 Quantizer 的規格決定的，不代表它量化的是什麼：weight 的規格可以用在 activation 上，"
        "activation 的規格也可以用在常數上。角色要從圖上看：往上游追，碰得到模型的輸入（placeholder）就是 activation，"
        "碰不到就是 weight。",
        READING,
        public=_public_by_class,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "direct_get_attr_only",
        "以為 weight 的 fake-quant 直接讀 parameter",
        "QAT 圖裡 conv 的 weight 先乘上 BN 的 γ/σ 才進 fake-quant，forward 裡也可能先把 parameter 乘 2、轉置再用，"
        "所以 weight 的 fake-quant 讀的常常是一個 op，不是 get_attr。"
        "判斷要往上游追到底：整條路上碰不到模型的輸入（placeholder）就是 weight。",
        BN_KEPT,
        public=_public_weights_as_activations,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "only_inputs_are_activations",
        "以為 activation 的 fake-quant 直接讀模型的輸入",
        "只有第一層的 fake-quant 直接讀 placeholder；relu、linear 的輸出也是 activation，它們的 fake-quant 讀的是上一個 op。"
        "要往上游一路追：任何一條路碰得到模型的輸入，就是 activation。",
        READING,
        public=_public_activations_as_weights,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "digits_shapes",
        "照 digits 的圖認 weight 的樣子",
        "digits 的 QAT 圖裡，weight 進 fake-quant 前只會是 get_attr 或 get_attr 乘上 γ/σ；別的模型的 weight 可以經過轉置、"
        "cat、乘上常數，或中間夾著別人插的 module。列舉看過的樣子總會漏；規則是往上游追到底，碰不到模型的輸入就是 weight。",
        READING,
        public=_public_digits_shapes,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "args0_only",
        "往上游只追 args[0]",
        "activation 不一定是 op 的第一個運算元：addcmul(shift, gain, x) 的 x 在第三個，cat 的 args[0] 是一個串列。"
        "只追 args[0]，會走到常數而把 activation 當成 weight（或在串列上出錯）。"
        "每個 op 的所有輸入都要追：node.all_input_nodes。",
        READING,
        public=_public_args0_only,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "positional_only",
        "往上游只追 node.args，沒看 kwargs",
        "node 的輸入也可能在 keyword 引數裡：sub(offset, other=h) 的 h 只出現在 node.kwargs。"
        "只看 node.args，就追不到這條路上的模型輸入，把 activation 當成 weight。"
        "用 node.all_input_nodes，args 與 kwargs 裡的 node 都包含在內。",
        READING,
        public=_public_positional_only,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "by_consumer_position",
        "看 fake-quant 接到 op 的哪個位置",
        "接到 linear 或 conv 第二個引數的不一定是 weight：linear(x, y) 的 y 可以是模型的另一個輸入；"
        "weight 也可能先經過別的 op（乘 2、加法）才用到。角色要往上游看它讀的是什麼，不是往下游看誰用它："
        "碰得到模型的輸入就是 activation。",
        READING,
        public=_public_by_consumer_position,
        practice=READS_MODEL_INPUT,
    ),
    Misconception(
        "counts_nodes",
        "實例數數成了 fake-quant node 的個數",
        "共用 qparams 的位置（例如 add 的輸入與輸出）用的是同一個 fake-quant 實例，圖上卻有好幾個 node 呼叫它。"
        "實例要數不同的 module 物件：每個 fake-quant node 找到它的 module，同一個物件只算一次。",
        RULES,
        public=_public_counts_nodes,
    ),
    Misconception(
        "counts_registered_modules",
        "實例數把沒有 node 呼叫的 module 也算進來",
        "gm.modules() 列出的是註冊在模型上的每個 module，包括沒有任何 node 呼叫的。"
        "圖上用到的 fake-quant 才算：從 call_module node 的 target 找 module，再數不同的實例。",
        RULES,
        public=_public_counts_registered,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "fake_quant_roles",
        TITLE,
        ("fake_quant_roles", "fake_quant_instances"),
        {
            "conv_bn_relu": public_conv_bn,
            "mlp": public_mlp,
            "operands": public_operands,
            "inserted": public_inserted,
        },
        case_seconds=QAT_CASE_SECONDS,
        misconceptions=MISCONCEPTIONS,
    ),
)

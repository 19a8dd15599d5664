"""Public cases of M08-2 x86：X86InductorQuantizer 與 oneDNN (predict_kernels) on the chapter's own models.

Also the helpers the hidden cases share: quantizing a model with an ``X86InductorQuantizer``
(``converted_graph``), and reading what the student's ``predict_kernels`` returned as plain
data (``describe_predictions``). A case hands the student's function a converted (q/dq)
graph, before any lowering, and keeps its table; it also keeps what every node of the graph
is (read before the call), so that a check can name a node it talks about, and whether the
call left the graph as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, returned_dict, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "predict_kernels：從 convert 之後的圖預測 oneDNN 的 int8 kernel 與它吃掉的 node"

KINDS = ("int8", "dequantize", "fp32")
"""What a conv / linear becomes after ``lower_x86``: a oneDNN int8 kernel, an fp32 conv / matmul on a weight
dequantized on every call, or an fp32 kernel on an fp32 weight."""


def converted_graph(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], quantizer: Any, seed: int, calibrate: int = 2
) -> GraphModule:
    """export → prepare_pt2e → calibrate on seeded batches → convert_pt2e."""
    from common.pt2e import convert_pt2e, export_module, prepare_pt2e

    prepared = prepare_pt2e(export_module(model.eval(), inputs), quantizer)
    shapes = [tuple(t.shape) for t in inputs]
    with torch.no_grad():
        for step in range(calibrate):
            prepared(*seeded_inputs(seed * 1000 + step, *shapes))
    return convert_pt2e(prepared)


def target_text(node: Any) -> str:
    """What a node is, in a few words: ``aten.relu.default``, ``placeholder``, ``get_attr``…"""
    if node.op != "call_function":
        return str(node.op)
    target = node.target
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(target)
    return safe_text(getattr(target, "__name__", target), 80)


def structure(gm: GraphModule) -> list[str]:
    """The graph without its metadata: one line per node (name, op, target, arguments)."""
    return [f"{n.name} {n.op} {n.target} {n.args!r} {n.kwargs!r}" for n in gm.graph.nodes]


def _record(name: Any, record: Any) -> dict[str, Any]:
    where = safe_text(name, 40)
    if type(record) is not dict:
        raise EvidenceError(f"predict_kernels 回傳的 dict 裡，{where} 的值應該是 dict，看到 {type(record).__name__}")
    kernel, fuses = record.get("kernel"), record.get("fuses")
    if type(kernel) is not str:
        raise EvidenceError(f'{where} 的 "kernel" 應該是 {list(KINDS)} 其中一個字串，看到 {type(kernel).__name__}')
    if type(fuses) not in (list, tuple) or not all(type(item) is str for item in fuses) or len(fuses) > 50:
        raise EvidenceError(f'{where} 的 "fuses" 應該是 node 名稱（str）的 list')
    extra = sorted(set(record) - {"kernel", "fuses"})
    if extra:
        raise EvidenceError(f'{where} 的 dict 只該有 "kernel" 與 "fuses" 兩個 key，看到多了 {extra[:3]}')
    return {"kernel": safe_text(kernel, 20), "fuses": [safe_text(item, 80) for item in fuses]}


def describe_predictions(ns: Namespace, gm: GraphModule, nodes: bool = True) -> dict[str, Any]:
    """``predict_kernels(gm)`` as ``{"table": {node name: {"kernel": ..., "fuses": [...]}}, "unchanged": bool}``.

    With ``nodes``, also ``"nodes"``: what every node of ``gm`` is (read before the call), so
    that a check can say what a node in the table is.
    """
    before = structure(gm)
    described: dict[str, Any] = {"nodes": {n.name: target_text(n) for n in gm.graph.nodes}} if nodes else {}
    result = returned_dict(ns["predict_kernels"](gm), "predict_kernels", "node 名稱 → 預測")
    table = {}
    for name, record in result.items():
        if type(name) is not str:
            raise EvidenceError(
                f"predict_kernels 回傳的 dict，key 應該是 node 的名稱（str），看到 {type(name).__name__}"
            )
        table[safe_text(name, 80)] = _record(name, record)
    return {"table": table, "unchanged": structure(gm) == before, **described}


# --- the chapter's models --------------------------------------------------------------------------


class Net(nn.Module):
    """conv → ReLU → MaxPool2d → conv → ReLU → flatten → linear (relu and pool as modules), input 3×16×16."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


class Block(nn.Module):
    """conv → relu → conv, + x, relu; then a linear on the last dimension of the (batch, 8, 16) flattened map."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.proj = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv2(F.relu(self.conv1(x))) + x)
        return self.proj(torch.flatten(y, 2))


def _net_graph(seed: int, skip: str | None) -> GraphModule:
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    quantizer = x86_quantizer()
    if skip is not None:
        quantizer.set_module_name_qconfig(skip, None)
    return converted_graph(Net(), seeded_inputs(seed, (4, 3, 16, 16)), quantizer, seed)


def kernels_net(ns: Namespace, seed: int) -> Any:
    """Net, every conv / linear quantized."""
    return describe_predictions(ns, _net_graph(seed, None), nodes=False)


def kernels_net_skip(ns: Namespace, seed: int) -> Any:
    """Net with ``set_module_name_qconfig("conv2", None)``: conv2 stays fp32."""
    return describe_predictions(ns, _net_graph(seed, "conv2"), nodes=False)


def kernels_block(ns: Namespace, seed: int) -> Any:
    """Block: conv + x → relu becomes one kernel; the linear on a 3-D input too."""
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    graph = converted_graph(Block(), seeded_inputs(seed, (2, 8, 4, 4)), x86_quantizer(), seed)
    return describe_predictions(ns, graph, nodes=False)


class ConvSums(nn.Module):
    """x + conv_a(x) (the conv written second); conv_b(y) plus a (N, C, 1, 1) mean of y (a broadcast);
    c = conv_c(z) read twice, by a relu and by a mul; a ConvTranspose2d at the end (input 4×6×6)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_a = nn.Conv2d(4, 4, 3, padding=1)
        self.conv_b = nn.Conv2d(4, 4, 1)
        self.conv_c = nn.Conv2d(4, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.conv_a(x)
        z = self.conv_b(y) + y.mean((2, 3), keepdim=True)
        c = self.conv_c(z)
        return self.up(c * torch.relu(c))


class LinearSums(nn.Module):
    """t = tanh(x) (fp32); fc_a(t) + t; flatten (a quantized value: the next add reads a dequantize);
    fc_b(f) + f; fc_c(·) plus a (3,) buffer (a broadcast). Input (batch, 6)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc_a = nn.Linear(6, 6)
        self.fc_b = nn.Linear(6, 6)
        self.fc_c = nn.Linear(6, 3)
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.tanh(x)
        f = torch.flatten(self.fc_a(t) + t, 1)
        return self.fc_c(self.fc_b(f) + f) + self.shift


def per_tensor_weight_config() -> Any:
    """X86's default config with int8 weights quantized per tensor (symmetric, MinMaxObserver)."""
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        QuantizationConfig,
        get_default_x86_inductor_quantization_config,
    )

    from common.pt2e import MinMaxObserver, QuantizationSpec

    base = get_default_x86_inductor_quantization_config()
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=-128,
        quant_max=127,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    return QuantizationConfig(base.input_activation, base.output_activation, weight, None, False)


def kernels_net_dynamic(ns: Namespace, seed: int) -> Any:
    """Net with the dynamic config: the convs have no int8 kernel ('dequantize'), the linear has one."""
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    torch.manual_seed(seed)
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_dynamic=True))
    return describe_predictions(ns, converted_graph(Net(), seeded_inputs(seed, (4, 3, 16, 16)), quantizer, seed), False)


def kernels_net_per_tensor(ns: Namespace, seed: int) -> Any:
    """Net with conv2's weight quantized per tensor (``set_module_name_qconfig``): 'dequantize', not int8."""
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    quantizer = x86_quantizer().set_module_name_qconfig("conv2", per_tensor_weight_config())
    return describe_predictions(ns, converted_graph(Net(), seeded_inputs(seed, (4, 3, 16, 16)), quantizer, seed), False)


def kernels_conv_sums(ns: Namespace, seed: int) -> Any:
    """ConvSums: an add with the conv second (taken), a broadcast add (not taken), a conv read twice
    (nothing taken), a ConvTranspose2d (fp32)."""
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    graph = converted_graph(ConvSums(), seeded_inputs(seed, (2, 4, 6, 6)), x86_quantizer(), seed)
    return describe_predictions(ns, graph, nodes=False)


def kernels_linear_sums(ns: Namespace, seed: int) -> Any:
    """LinearSums: adds of an fp32 value and of a dequantize (both taken), of a broadcast buffer (not taken)."""
    from common.backends import x86_quantizer

    torch.manual_seed(seed)
    graph = converted_graph(LinearSums(), seeded_inputs(seed, (2, 6)), x86_quantizer(), seed)
    return describe_predictions(ns, graph, nodes=False)


# --- where the chapter teaches it ----------------------------------------------------------------

WHICH_LAYERS = Section("C. 哪些 conv / linear 變成 int8 kernel")
FROM_THE_GRAPH = Section("從 convert 之後的圖就看得出來")
RULES = Section("練習：predict_kernels（10 分）")
BY_TARGET = Section("A. 依 `node.target` 找 op", notebook="M03-3")


# --- reading the evidence (the public detectors here; the hidden ones in autograder/checks/test_m08_2.py) ----

PARTS = {
    "aten.add.Tensor": "add",
    "aten.relu.default": "relu",
    "quantized_decomposed.quantize_per_tensor.default": "quantize",
}


def tables(seen: Any, expected: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(case, got, want)`` for every case both evidences answered: ``table``, ``unchanged`` and, on the
    hidden cases, ``nodes`` (what each node of the graph is)."""
    return [
        (str(place[0]), got, want)
        for place, got, want in diagnosis.aligned(seen, expected, "table")
        if len(place) == 1 and isinstance(got.get("table"), dict) and isinstance(want.get("table"), dict)
    ]


def kind(name: str, want: dict[str, Any]) -> str:
    """What a node is: ``add``, ``relu``, ``quantize``, ``dequantize``, ``conv``, ``linear``, ``get_attr``,
    ``placeholder`` or ``other``; from what the case recorded of the graph, else from the node's name (names
    of exported nodes come from their targets)."""
    nodes = want.get("nodes")
    target = str(nodes.get(name, "")) if isinstance(nodes, dict) else ""
    if target:
        if target in PARTS:
            return PARTS[target]
        if target.startswith("quantized_decomposed.dequantize"):
            return "dequantize"
        if target in ("get_attr", "placeholder"):
            return target
        if target == "aten.linear.default":
            return "linear"
        return "conv" if target.startswith("aten.conv") else "other"
    for prefix, found in (
        ("dequantize", "dequantize"),
        ("quantize_per_tensor", "quantize"),
        ("relu", "relu"),
        ("add", "add"),
        ("linear", "linear"),
        ("conv", "conv"),
    ):
        if name.startswith(prefix):
            return "get_attr" if name.endswith(("_weight", "_bias")) else found
    return "other"


def rows(
    seen: Any, expected: Any, cases: tuple[str, ...] = ()
) -> list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """``(case, node, got record, key record, the case's key evidence)`` for every node both tables have."""
    found = []
    for case, got, want in tables(seen, expected):
        if cases and case not in cases:
            continue
        for name, record in want["table"].items():
            mine = got["table"].get(name)
            if isinstance(mine, dict) and isinstance(record, dict):
                found.append((case, name, mine, record, want))
    return found


def fuses_of(record: dict[str, Any]) -> list[str]:
    fuses = record.get("fuses")
    return [str(item) for item in fuses] if isinstance(fuses, list) else []


def extra_fuses(mine: dict[str, Any], key: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The kinds of the nodes the student's kernel takes in and the key's does not, in the student's order."""
    return [kind(name, want) for name in fuses_of(mine) if name not in fuses_of(key)]


def missing_fuses(mine: dict[str, Any], key: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [kind(name, want) for name in fuses_of(key) if name not in fuses_of(mine)]


def int8_rows(seen: Any, expected: Any, cases: tuple[str, ...] = ()) -> list[tuple[str, str, Any, Any, Any]]:
    """The rows where both say ``int8`` (where what is taken in can be compared)."""
    return [row for row in rows(seen, expected, cases) if row[2].get("kernel") == row[3].get("kernel") == "int8"]


def changes_graph(seen: Any, expected: Any) -> bool:
    return any(got.get("unchanged") is False for _, got, _ in tables(seen, expected))


def extra_keys(seen: Any, expected: Any, kinds: tuple[str, ...]) -> bool:
    """The table has a node of one of ``kinds`` that the key's table does not have."""
    return any(
        kind(name, want) in kinds
        for _, got, want in tables(seen, expected)
        for name in got["table"]
        if name not in want["table"]
    )


def constants_listed(seen: Any, expected: Any) -> bool:
    return extra_keys(seen, expected, ("get_attr", "placeholder"))


def lists_inputs(seen: Any, expected: Any) -> bool:
    """``fuses`` names the kernel itself, a dequantize or a constant: what goes into the kernel, not after it."""
    return any(
        name == node or kind(name, want) in ("dequantize", "get_attr", "placeholder")
        for _, node, mine, _, want in rows(seen, expected)
        for name in fuses_of(mine)
    )


def kernel_changes(seen: Any, expected: Any, key: str, got: str, cases: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """``(case, node kind)`` of the nodes the key calls ``key`` and the student ``got``."""
    return [
        (case, kind(node, want))
        for case, node, mine, record, want in rows(seen, expected, cases)
        if record.get("kernel") == key and mine.get("kernel") == got
    ]


def fp32_weight_as_int8(seen: Any, expected: Any) -> bool:
    return bool(kernel_changes(seen, expected, "fp32", "int8"))


def fuses_without_int8(seen: Any, expected: Any) -> bool:
    """A layer that is not an int8 kernel (both say so) takes in a node."""
    return any(
        mine.get("kernel") == record.get("kernel") != "int8" and fuses_of(mine)
        for _, _, mine, record, _ in rows(seen, expected)
    )


def fused(seen: Any, expected: Any, layer: str, test: Callable[[list[str], list[str]], bool]) -> bool:
    """``test(extra kinds, missing kinds)`` holds on some ``layer`` (conv / linear) both call an int8 kernel."""
    return any(
        kind(node, want) == layer and test(extra_fuses(mine, key, want), missing_fuses(mine, key, want))
        for _, node, mine, key, want in int8_rows(seen, expected)
    )


def other_nodes_listed(seen: Any, expected: Any) -> bool:
    """The table has an add, relu, q / dq or another op that is not a conv / linear of the key's table."""
    return extra_keys(seen, expected, ("add", "relu", "quantize", "dequantize", "other"))


OTHER_LAYERS = ("conv1d", "conv_transpose")
"""How the names of the layers besides conv2d and linear begin (names of exported nodes come from their targets)."""


def other_layers_missed(seen: Any, expected: Any) -> bool:
    """A conv1d / conv_transpose2d of the key's table is missing while the table has the key's conv2d / linear."""
    return any(
        any(name.startswith(OTHER_LAYERS) and name not in got["table"] for name in want["table"])
        and any(kind(name, want) in ("conv", "linear") for name in want["table"] if name in got["table"])
        for _, got, want in tables(seen, expected)
    )


def per_tensor_weight_as_int8(seen: Any, expected: Any) -> bool:
    return bool(kernel_changes(seen, expected, "dequantize", "int8", ("net_conv2_per_tensor",)))


def dynamic_conv_as_int8(seen: Any, expected: Any) -> bool:
    return ("net_dynamic", "conv") in kernel_changes(seen, expected, "dequantize", "int8", ("net_dynamic",))


def per_tensor_weight_as_fp32(seen: Any, expected: Any) -> bool:
    return bool(kernel_changes(seen, expected, "dequantize", "fp32"))


def dynamic_linear_not_int8(seen: Any, expected: Any) -> bool:
    return any(
        layer == "linear"
        for got in ("dequantize", "fp32")
        for _, layer in kernel_changes(seen, expected, "int8", got, ("net_dynamic",))
    )


def conv_takes_extra_add(seen: Any, expected: Any) -> bool:
    return fused(seen, expected, "conv", lambda extra, missing: "add" in extra)


def linear_takes_broadcast_add(seen: Any, expected: Any) -> bool:
    """A linear takes an add the key's does not (a broadcast operand), while no conv takes an extra add."""
    return fused(seen, expected, "linear", lambda extra, missing: "add" in extra) and not conv_takes_extra_add(
        seen, expected
    )


def fuses_past_shared_value(seen: Any, expected: Any) -> bool:
    """A kernel takes a relu the key's does not (its output is read twice), with no extra add."""
    return any(
        fused(seen, expected, layer, lambda extra, missing: "relu" in extra and "add" not in extra)
        for layer in ("conv", "linear")
    )


def quantize_always_taken(seen: Any, expected: Any) -> bool:
    """Kernels take a quantize the key's do not, and nothing else extra."""
    layers = ("conv", "linear")
    only = any(fused(seen, expected, layer, lambda extra, missing: set(extra) == {"quantize"}) for layer in layers)
    other = any(
        fused(seen, expected, layer, lambda extra, missing: bool(set(extra) - {"quantize"})) for layer in layers
    )
    return only and not other


def conv_second_operand_missed(seen: Any, expected: Any) -> bool:
    return fused(seen, expected, "conv", lambda extra, missing: "add" in missing)


def linear_add_missed(seen: Any, expected: Any) -> bool:
    """A linear leaves an add the key's takes, while every conv takes its adds."""
    return fused(seen, expected, "linear", lambda extra, missing: "add" in missing) and not conv_second_operand_missed(
        seen, expected
    )


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------


def _qdq() -> Any:
    import common.pt2e  # noqa: F401  (registers torch.ops.quantized_decomposed)

    return torch.ops.quantized_decomposed


def _layers_graph() -> list[tuple[Any, str, bool]]:
    """Conv2d / linear nodes of a hand-made converted graph: (layer, its inputs in words, whether oneDNN gives it an
    int8 kernel)."""
    qd, aten = _qdq(), torch.ops.aten
    graph = torch.fx.Graph()
    x, x_scale, x_zp = graph.placeholder("x"), graph.placeholder("x_scale"), graph.placeholder("x_zp")
    static = graph.call_function(qd.dequantize_per_tensor.default, (x, 0.05, 0, 0, 255, torch.uint8))
    dynamic = graph.call_function(qd.dequantize_per_tensor.tensor, (x, x_scale, x_zp, 0, 255, torch.uint8))
    w, scales, zero_points = graph.get_attr("w"), graph.get_attr("w_scales"), graph.get_attr("w_zero_points")
    per_channel = graph.call_function(
        qd.dequantize_per_channel.default, (w, scales, zero_points, 0, -128, 127, torch.int8)
    )
    per_tensor = graph.call_function(qd.dequantize_per_tensor.default, (w, 0.01, 0, -128, 127, torch.int8))
    fp32 = graph.get_attr("w_fp32")
    words = {
        static: "dequantize_per_tensor.default",
        dynamic: "dequantize_per_tensor.tensor（dynamic）",
        per_channel: "dequantize_per_channel(常數)",
        per_tensor: "dequantize_per_tensor(常數)",
        fp32: "fp32 常數（get_attr）",
        x: "沒有反量化的 x",
    }
    layers = []
    for name, target, act, weight, want in (
        ("conv_static", aten.conv2d.default, static, per_channel, True),
        ("conv_per_tensor_weight", aten.conv2d.default, static, per_tensor, False),
        ("conv_dynamic", aten.conv2d.default, dynamic, per_channel, False),
        ("conv_fp32_input", aten.conv2d.default, x, per_channel, False),
        ("linear_static", aten.linear.default, static, per_channel, True),
        ("linear_dynamic", aten.linear.default, dynamic, per_channel, True),
        ("linear_per_tensor_weight", aten.linear.default, static, per_tensor, False),
        ("linear_fp32_weight", aten.linear.default, static, fp32, False),
    ):
        node = graph.call_function(target, (act, weight))
        node._rename(name)
        layers.append((node, f"activation：{words[act]}，weight：{words[weight]}", want))
    graph.output(tuple(node for node, _, _ in layers))
    return layers


def _check_int8_kernel(int8_kernel: Any) -> list[str]:
    problems = []
    for node, words, want in _layers_graph():
        got = int8_kernel(node)
        if bool(got) is not want:
            problems.append(f"{node.name}（{words}）：應該回傳 {want}，你的是 {got!r}")
    return problems


INT8_KERNEL = Practice(
    "int8_kernel",
    "寫 int8_kernel(node)：node 是 convert 之後圖上的一個 conv2d 或 linear（args[0] 是 activation，args[1] 是 weight）。"
    "lower_x86 會不會把它換成 oneDNN 的 int8 kernel？回傳 True 或 False。"
    "檢查用一張手寫的小圖：static 與 dynamic 的 activation、per-channel 與 per-tensor 反量化的 weight、fp32 的 weight，配上 conv 與 linear。",
    "import torch\n\nimport common.pt2e  # 載入 torchao 的 PT2E：torch.ops.quantized_decomposed 才存在\n\n"
    "qd = torch.ops.quantized_decomposed\n\n\ndef int8_kernel(node):\n    raise NotImplementedError()\n",
    _check_int8_kernel,
    "兩個條件都要成立。weight：target 是 qd.dequantize_per_channel.default（per-tensor 反量化的 weight 不行）。"
    "activation：qd.dequantize_per_tensor.default；只有 linear 另外也收 dynamic 的 qd.dequantize_per_tensor.tensor，conv 不收。",
    "import torch\n\nimport common.pt2e  # 載入 torchao 的 PT2E：torch.ops.quantized_decomposed 才存在\n\n"
    "qd = torch.ops.quantized_decomposed\n\n\n"
    "def int8_kernel(node):\n"
    "    activation, weight = node.args[0], node.args[1]\n"
    "    accepted = [qd.dequantize_per_tensor.default]\n"
    "    if node.target == torch.ops.aten.linear.default:\n"
    "        accepted.append(qd.dequantize_per_tensor.tensor)\n"
    "    weight_ok = getattr(weight, 'target', None) == qd.dequantize_per_channel.default\n"
    "    return weight_ok and getattr(activation, 'target', None) in accepted\n",
    "weight 反量化了不代表有 int8 kernel：per-tensor 的 weight、dynamic 的 conv 都留成 fp32 的運算，weight 每次反量化（dequantize）。",
)


def _sums_graph() -> tuple[list[tuple[Any, Any, str, bool]], dict[Any, tuple[int, ...]]]:
    """Adds after conv2d nodes of a hand-made converted graph: (add, conv, the other operand in words, whether
    oneDNN's conv takes the add in), and every node's shape."""
    qd, aten = _qdq(), torch.ops.aten
    graph = torch.fx.Graph()
    x, y, b = graph.placeholder("x"), graph.placeholder("y"), graph.placeholder("b")
    shift = graph.get_attr("shift")
    dq_x = graph.call_function(qd.dequantize_per_tensor.default, (x, 0.05, 0, 0, 255, torch.uint8))
    dq_y = graph.call_function(qd.dequantize_per_tensor.default, (y, 0.05, 0, 0, 255, torch.uint8))
    dq_b = graph.call_function(qd.dequantize_per_tensor.default, (b, 0.05, 0, 0, 255, torch.uint8))
    relu_y = graph.call_function(aten.relu.default, (dq_y,))
    w = graph.call_function(
        qd.dequantize_per_channel.default,
        (graph.get_attr("w"), graph.get_attr("s"), graph.get_attr("z"), 0, -128, 127, torch.int8),
    )
    for node, name in ((dq_x, "dequantize_x"), (dq_y, "dequantize_y"), (dq_b, "dequantize_b"), (relu_y, "relu_y")):
        node._rename(name)
    full, channel = (2, 4, 5, 5), (1, 4, 1, 1)
    shapes = {x: full, y: full, dq_x: full, dq_y: full, relu_y: full, b: channel, dq_b: channel, shift: (4, 1, 1)}
    cases = []
    for name, other, conv_first, words, want in (
        ("conv_plus_y", dq_y, True, "同樣 shape 的 dequantize_per_tensor", True),
        ("y_plus_conv", dq_y, False, "同樣 shape 的 dequantize_per_tensor，conv 寫在後面", True),
        ("conv_plus_shift", shift, True, "(4, 1, 1) 的常數", False),
        ("conv_plus_b", dq_b, True, "(1, 4, 1, 1) 的 dequantize_per_tensor（broadcast）", False),
        ("conv_plus_relu", relu_y, True, "同樣 shape、fp32 的 relu 輸出", False),
    ):
        conv = graph.call_function(aten.conv2d.default, (dq_x, w))
        conv._rename(f"conv_{len(cases)}")
        add = graph.call_function(aten.add.Tensor, (conv, other) if conv_first else (other, conv))
        add._rename(name)
        shapes[conv] = shapes[add] = full
        cases.append((add, conv, words, want))
    graph.output(tuple(add for add, _, _, _ in cases))
    return cases, shapes


def _check_conv_sum_fuses(conv_sum_fuses: Any) -> list[str]:
    cases, shapes = _sums_graph()

    def shape_of(node: Any) -> tuple[int, ...] | None:
        return shapes.get(node)

    problems = []
    for add, conv, words, want in cases:
        got = conv_sum_fuses(add, conv, shape_of)
        if bool(got) is not want:
            args = ", ".join(a.name for a in add.args)
            problems.append(f"{add.name} = add({args})（另一個運算元：{words}）：應該回傳 {want}，你的是 {got!r}")
    return problems


CONV_SUM_FUSES = Practice(
    "conv_sum_fuses",
    "寫 conv_sum_fuses(add, conv, shape_of)：add 是 conv（一個 conv2d）唯一的 consumer。oneDNN 的 int8 conv 會不會把這個 add 吃進 kernel？"
    "shape_of(node) 回傳一個 node 的 shape（就是 value_shape(gm, node)）。"
    "檢查用一張手寫的小圖：add 的另一個運算元有 dequantize、常數、broadcast 的值和 fp32 的值，conv 有時寫在 add 的後面。",
    "import torch\n\nimport common.pt2e  # 載入 torchao 的 PT2E：torch.ops.quantized_decomposed 才存在\n\n"
    "qd = torch.ops.quantized_decomposed\n\n\ndef conv_sum_fuses(add, conv, shape_of):\n    raise NotImplementedError()\n",
    _check_conv_sum_fuses,
    "先找出 add 的另一個運算元：conv 可能是 args[0]，也可能是 args[1]。oneDNN 的 sum 把 conv 的結果原地加進它的記憶體，"
    "所以它要是 qd.dequantize_per_tensor.default（量化過的值），而且 shape_of(它) == shape_of(conv)。",
    "import torch\n\nimport common.pt2e  # 載入 torchao 的 PT2E：torch.ops.quantized_decomposed 才存在\n\n"
    "qd = torch.ops.quantized_decomposed\n\n\n"
    "def conv_sum_fuses(add, conv, shape_of):\n"
    "    others = [a for a in add.args if a is not conv]\n"
    "    if len(others) != 1 or not isinstance(others[0], torch.fx.Node):\n"
    "        return False\n"
    "    other = others[0]\n"
    "    same_shape = shape_of(other) == shape_of(conv)\n"
    "    return same_shape and other.target == qd.dequantize_per_tensor.default\n",
    "加上一個 (C, 1, 1) 的值是 broadcast：形狀不同，記憶體對不上，add 留在 kernel 外面。",
)


MISCONCEPTIONS = (
    Misconception(
        "changes_graph",
        "在傳進來的圖上動手",
        "predict_kernels 只要預測 lowering 會做什麼，不必真的去做：拿掉或改接 node，呼叫的人手上的圖就被改了，"
        "之後再 lower 或執行都會不一樣。只讀 node.args、node.users 這些資訊，圖原封不動還回去。",
        RULES,
        public=changes_graph,
    ),
    Misconception(
        "found_by_name",
        "用名字找 conv / linear",
        "node 的名字只是標記：conv1_bias、conv2_weight 這些常數（get_attr）名字裡也有 conv，它們不是層。"
        "要看 node.op 是 call_function，而且 node.target 是題目列出的四個 op 之一。",
        BY_TARGET,
        public=constants_listed,
    ),
    Misconception(
        "table_lists_other_nodes",
        "表裡放了 conv / linear 以外的 node",
        "表的 key 只有 conv / linear 的 node：kernel 吃掉的 add、relu、quantize，以及 q/dq 的 node，都不是表裡的一列。"
        "它們被吃掉時，寫在那個 conv / linear 的 fuses 裡。",
        RULES,
        public=other_nodes_listed,
    ),
    Misconception(
        "misses_layer_kinds",
        "只找 conv2d 與 linear",
        "lower_x86 處理的層不只 conv2d 與 linear：aten.conv1d 和 aten.conv_transpose2d 也是，它們一樣要列進表裡"
        "（量化了就依規則判斷，沒有量化就是 fp32）。找層時要用題目列出的四個 target。",
        RULES,
        public=other_layers_missed,
    ),
    Misconception(
        "fuses_lists_inputs",
        "fuses 列了 kernel 的輸入或它自己",
        "lowering 確實也把 activation 與 weight 的 dequantize 換掉了，但 fuses 只記 kernel 後面被吃掉的 node：add、relu、quantize。"
        "kernel 自己、它的輸入和 dequantize 都不列。",
        RULES,
        public=lists_inputs,
    ),
    Misconception(
        "input_decides_kernel",
        "只看輸入是不是 dequantize",
        "activation 來自 dequantize，只代表前面有量化過的值；weight 如果是 fp32 常數（這一層沒有標籤），"
        "lowering 用的是 fp32 的 kernel。int8 kernel 要 weight 與 activation 都符合第一張表的第一列，先看 weight。",
        FROM_THE_GRAPH,
        public=fp32_weight_as_int8,
        practice=INT8_KERNEL,
    ),
    Misconception(
        "dequantized_weight_means_int8",
        "weight 是 int8 常數就是 int8 kernel",
        "oneDNN 的 int8 kernel 對 weight 與 activation 的量化方式有要求：weight 要 per-channel（dequantize_per_channel），"
        "activation 要 per-tensor 的 static 量化（linear 也可以是 dynamic）。per-tensor 的 weight 不符合，"
        "lowering 留下 fp32 的 matmul，weight 每次反量化，是 dequantize。",
        FROM_THE_GRAPH,
        public=per_tensor_weight_as_int8,
        practice=INT8_KERNEL,
    ),
    Misconception(
        "dynamic_conv_as_linear",
        "dynamic 的 conv 也當成 int8 kernel",
        "dynamic 量化的 activation（dequantize_per_tensor.tensor）只有 linear 有 int8 kernel（qlinear_pointwise.tensor）；"
        "conv 沒有對應的 oneDNN kernel，留成 fp32 的 convolution，weight 每次反量化。conv 與 linear 在這一點上規則不同。",
        WHICH_LAYERS,
        public=dynamic_conv_as_int8,
        practice=INT8_KERNEL,
    ),
    Misconception(
        "per_channel_only_weight",
        "只把 dequantize_per_channel 當成量化的 weight",
        "per-tensor 量化的 weight 一樣是 int8 常數，只是經過 dequantize_per_tensor 反量化。"
        "它不符合 int8 kernel 的條件，但也不是 fp32 的 weight：lowering 每次呼叫都反量化它，是 dequantize。",
        FROM_THE_GRAPH,
        public=per_tensor_weight_as_fp32,
    ),
    Misconception(
        "dynamic_never_int8",
        "以為 dynamic 量化都沒有 int8 kernel",
        "dynamic 的 linear 有 int8 kernel：qlinear_pointwise.tensor 的 scale 與 zero point 是執行時算出來的 tensor。"
        "只有 dynamic 的 conv 沒有對應的 kernel。activation 是 dequantize_per_tensor.tensor 的 linear，照樣可以是 int8。",
        WHICH_LAYERS,
        public=dynamic_linear_not_int8,
        practice=INT8_KERNEL,
    ),
    Misconception(
        "non_int8_fuses",
        "fp32 的 kernel 也吃掉後面的 relu",
        "你可能以為 lowering 像 torch.compile 一樣，把每個 conv / linear 後面的 relu 都融進去。"
        "lower_x86 只跑 freezing pass，它只替 int8 kernel 融合；fp32 與 dequantize 的層後面的 relu 都留在圖上，fuses 是空的。",
        WHICH_LAYERS,
        public=fuses_without_int8,
    ),
    Misconception(
        "conv_add_any_operand",
        "conv 後面的 add 不看另一個運算元",
        "oneDNN 的 sum 把 conv 的結果原地加進另一個運算元的記憶體，所以另一個運算元要是同樣 shape、量化過的值（dequantize_per_tensor）。"
        "加上一個 (C, 1, 1) 的常數是 broadcast，形狀不同，add 不會被吃掉；用 value_shape 比兩邊的 shape。",
        FROM_THE_GRAPH,
        public=conv_takes_extra_add,
        practice=CONV_SUM_FUSES,
    ),
    Misconception(
        "linear_add_any_shape",
        "linear 後面的 add 不看 shape",
        "「linear 不挑」說的是另一個運算元的來源（dequantize 或 fp32 都可以），不是它的形狀。"
        "oneDNN 的 linear 把 add 做在 kernel 裡，兩邊要是同樣 shape 的 tensor；加上一個會 broadcast 的值（像 (batch, 1)）形狀不同，"
        "add 不會被吃掉。linear 也要用 value_shape 比兩邊的 shape。",
        FROM_THE_GRAPH,
        public=linear_takes_broadcast_add,
    ),
    Misconception(
        "any_consumer_fuses",
        "consumer 裡有 relu 就吃掉，不管是不是唯一的",
        "kernel 要把後面的 node 吃進去，那個 node 必須是前一個 node 唯一的 consumer：conv 的輸出還有別人要讀時，"
        "它得留在記憶體裡，relu 不能直接做在 kernel 裡。每一步都先確認 len(node.users) == 1。",
        FROM_THE_GRAPH,
        public=fuses_past_shared_value,
    ),
    Misconception(
        "always_uint8_output",
        "以為 int8 kernel 一定輸出 uint8",
        "kernel 只有在最後吃掉的 node 唯一的 consumer 是 quantize_per_tensor.default 時，才直接輸出 uint8。"
        "relu 被讀兩次、或輸出是模型的結果時，kernel 輸出 fp32，後面的 quantize（如果有）不算它吃掉的。",
        FROM_THE_GRAPH,
        public=quantize_always_taken,
    ),
    Misconception(
        "kernel_first_operand",
        "以為 kernel 一定是 add 的第一個運算元",
        "a + conv(…) 把 conv 寫在後面，add 的 args[0] 是 a，args[1] 才是 conv 的輸出，lowering 一樣把這個 add 吃掉。"
        "判斷 add 時，看 kernel 的輸出是兩個運算元中的哪一個，另一個才是要檢查的運算元。",
        FROM_THE_GRAPH,
        public=conv_second_operand_missed,
        practice=CONV_SUM_FUSES,
    ),
    Misconception(
        "linear_add_rule",
        "linear 吃 add 時挑了另一個運算元",
        "你可能以為 linear 的 add 另一邊要是某一種值（fp32，或像 conv 一樣要是 dequantize）。"
        "linear 不挑：只要 add 是唯一的 consumer、另一邊是同樣 shape 的 tensor，dequantize 的值或 fp32 的值都吃得進去；"
        "只有 conv 要求另一個運算元是 dequantize_per_tensor.default。",
        FROM_THE_GRAPH,
        public=linear_add_missed,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "predict_kernels",
        TITLE,
        ("predict_kernels",),
        {
            "net": kernels_net,
            "net_skip_conv2": kernels_net_skip,
            "block": kernels_block,
            "net_dynamic": kernels_net_dynamic,
            "net_conv2_per_tensor": kernels_net_per_tensor,
            "conv_sums": kernels_conv_sums,
            "linear_sums": kernels_linear_sums,
        },
        misconceptions=MISCONCEPTIONS,
    ),
)

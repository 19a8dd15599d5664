"""M03-3 規則式 Quantizer: RuleQuantizer.annotate and CheckedRuleQuantizer.validate on hidden models.

RuleQuantizer cases return, per model, the student's labels (sharing resolved, read right after
``annotate``) and the observers ``prepare_pt2e`` inserted. validate cases label graphs without
any student code (torchao's XNNPACKQuantizer, or a table of labels per model), spoil one label,
and return what the student's ``validate`` did. Every model is the same on every seed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.fx import GraphModule, Node

from autograder.sandboxed.cases.base import Namespace, seed_size, seeded_inputs, with_hidden_cases
from autograder.sandboxed.cases.m01_3 import swap_names
from autograder.sandboxed.cases.probes import (
    ADD,
    CONV,
    LINEAR,
    MAX_POOL,
    RELU,
    Claimer,
    Label,
    Shared,
    TableLabels,
    by_name,
    put_labels,
    run_quantizer,
    symmetric_spec,
    xnnpack_labels,
)
from common.pt2e import (
    ANNOTATION_KEY,
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    export_module,
)
from common.qspecs import act_spec, weight_spec
from selfcheck.evidence import describe_annotations, safe_text
from selfcheck.public.m03_3 import PUBLIC

# --- hidden models (numeric padding only: padding="same" exports to aten.conv2d.padding) ----------


class ConvReluPool(nn.Module):
    """conv → relu → max_pool2d → conv (no bias)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(channels, 2, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.max_pool2d(torch.relu(self.a(x)), 2))


class LinearAdd(nn.Module):
    """Two linears added, then a third linear without a bias (``linear(x, weight)``: no ``args[2]``)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.a = nn.Linear(features, features)
        self.b = nn.Linear(features, features)
        self.c = nn.Linear(features, 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.a(x) + self.b(x))


class ConvTwoUsers(nn.Module):
    """A conv whose output is read by relu and by a mul: nothing to fuse."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return torch.relu(y), y * 2


class FarRelu(nn.Module):
    """``conv2d``'s only user is ``relu_1``, far from it in graph order; ``conv2d_1`` (no bias) is
    followed in graph order by ``relu``, which is not its user (``conv2d_1`` → ``mul``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        z = self.b(x)
        t = torch.relu(x)
        m = z * t[:, :1]
        return torch.relu(y) + m


class LookAlikes(nn.Module):
    """Inputs called ``relu`` and ``conv2d``, a get_attr called ``linear_table``, and ops whose names
    look like a rule's op without being it: leaky_relu and relu6 after a conv, conv_transpose2d,
    max_pool2d_with_indices, addmm."""

    def __init__(self, channels: int, features: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.up = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.weight = nn.Parameter(torch.randn(features, features))
        self.bias = nn.Parameter(torch.randn(features))
        self.register_buffer("linear_table", torch.randn(features))

    def forward(self, relu: torch.Tensor, conv2d: torch.Tensor) -> tuple[torch.Tensor, ...]:
        c = F.leaky_relu(self.conv(relu))
        d = F.relu6(self.conv2(relu))
        e = self.up(c)
        p = F.max_pool2d(d, 2, return_indices=True)[0]
        m = torch.addmm(self.bias, conv2d, self.weight)
        return e, p, m + self.linear_table


class ConstantAdds(nn.Module):
    """Adds with a model constant (second and first operand), a Python scalar, and add(w, w)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.register_buffer("offset", torch.randn(features))
        self.register_buffer("scale", torch.rand(features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x) + self.offset
        z = torch.relu(y) + 0.5
        w = self.scale + z
        return w + w


class Claimed(nn.Module):
    """conv → relu twice, added, max-pooled, averaged, then a linear (the one carrying an unclaimed label)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.fc = nn.Linear(channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.a(x)) + torch.relu(self.b(x))
        return self.fc(torch.max_pool2d(s, 2).mean((2, 3)))


class TableNet(nn.Module):
    """A model for hand-written labels: a conv with two users, a conv into leaky_relu, a conv whose
    weight is computed by an op, a four-way cat, linear → relu, and an add with a constant."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, channels, 3, padding=1)
        self.b = nn.Conv2d(3, channels, 1, bias=False)
        self.kernel = nn.Parameter(torch.randn(channels, 3, 3, 3))
        self.lin = nn.Linear(4 * channels, 4)
        self.register_buffer("offset", torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        u = torch.relu(y)
        v = y * 2
        w = F.leaky_relu(self.b(x))
        k = F.conv2d(x, self.kernel * 0.5, padding=1)
        c = torch.cat([u, v, w, k], 1)
        q = c.mean((2, 3))
        return torch.relu(self.lin(q)) + self.offset


class Swapped(nn.Module):
    """conv → relu → max_pool2d → flatten → linear, plus an add: ``build`` then swaps the names of conv and
    linear, and of max_pool2d and add (``RENAMED``), so every name tells another op of the rules."""

    def __init__(self, channels: int, features: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.fc = nn.Linear(channels * 4 * 4, features)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p = torch.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(torch.flatten(p, 1)) + y


RENAMED = {"conv2d": "linear", "linear": "conv2d", "max_pool2d": "add", "add": "max_pool2d"}
"""The names ``build("renamed")`` swaps: the conv is then ``linear_90``, the linear ``conv2d_91``, the
max_pool2d ``add_92`` and the add ``max_pool2d_93``."""


HIDDEN = (
    "renamed",
    "unrenamed",
    "conv_two_users",
    "conv_relu_pool",
    "linear_add",
    "far_relu",
    "look_alikes",
    "constant_adds",
    "claimed",
    "table_net",
)
"""The hidden models ``build`` knows by name (the others come from common.models)."""


def build(name: str, seed: int) -> GraphModule:
    """Export a named model (from common.models, or one of the hidden ones here).

    The weights come from ``seed`` alone, not from what the case drew before: the same name gives the
    same model (and the warmed export) whatever the student's code did first.
    """
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return _build(name, seed)


def _build(name: str, seed: int) -> GraphModule:
    from common.models import example_inputs, get_model

    if name not in HIDDEN:
        return export_module(get_model(name).eval(), example_inputs(2, name))
    size = seed_size(seed, 3, 7)
    image = seeded_inputs(seed, (2, 3, 8, 8))
    inputs = {"linear_add": seeded_inputs(seed, (2, size + 2)), "constant_adds": seeded_inputs(seed, (3, size + 1))}
    models = {
        "conv_two_users": lambda: ConvTwoUsers(size),
        "conv_relu_pool": lambda: ConvReluPool(size),
        "linear_add": lambda: LinearAdd(size + 2),
        "far_relu": lambda: FarRelu(size),
        "look_alikes": lambda: LookAlikes(size, size + 1),
        "constant_adds": lambda: ConstantAdds(size + 1),
        "claimed": lambda: Claimed(size),
        "table_net": lambda: TableNet(size),
    }
    if name == "look_alikes":
        inputs[name] = (image[0], seeded_inputs(seed + 1, (2, size + 1))[0])
    if name in ("renamed", "unrenamed"):  # the same graph, its names swapped or not
        gm = export_module(Swapped(size, 4).eval(), (image[0], seeded_inputs(seed + 1, (2, 4))[0]))
        if name == "renamed":
            swap_names(gm, RENAMED)
        return gm
    return export_module(models[name]().eval(), inputs.get(name, image))


# --- RuleQuantizer ----------------------------------------------------------------------------------

RULE_TARGETS = (CONV, LINEAR, ADD, MAX_POOL, RELU)


def _rules(ns: Namespace, seed: int, models: tuple[str, ...]) -> dict[str, Any]:
    return {name: run_quantizer([ns["RuleQuantizer"]()], 0, build(name, seed), (), seed) for name in models}


def _over(models: tuple[str, ...]) -> Callable[[Namespace, int], Any]:
    return lambda ns, seed: _rules(ns, seed, models)


def rule_claimed(ns: Namespace, seed: int) -> Any:
    """conv2d is claimed before the student; linear carries a label nobody claimed; ``late`` then runs
    a Quantizer that claims every conv / linear / add / max_pool2d / relu the student left unmarked."""
    unclaimed = TableLabels({"linear": Label({"mean": symmetric_spec(30)}, symmetric_spec(30), annotated=False)})
    first = Claimer((CONV,), 100, first=True)
    early = run_quantizer([first, unclaimed, ns["RuleQuantizer"]()], 2, build("claimed", seed), (), seed)
    late = [first, unclaimed, ns["RuleQuantizer"](), Claimer(RULE_TARGETS, 50, late=True)]
    late = run_quantizer(late, 2, build("claimed", seed), (), seed)
    return {"early": early, "late": late}


# --- validate ---------------------------------------------------------------------------------------

WORD = "A-Za-z0-9_"


def names(text: str, node: str) -> bool:
    """``node`` appears in ``text`` as a whole name (``conv2d`` is not found in ``conv2d_1``)."""
    return re.search(rf"(?<![{WORD}]){re.escape(node)}(?![{WORD}])", text) is not None


def _verdict(ns: Namespace, gm: GraphModule, node: str) -> dict[str, Any]:
    """What the student's validate did on ``gm``; ``node`` is the name the message should give."""
    before = describe_annotations(gm)
    try:
        ns["CheckedRuleQuantizer"]().validate(gm)
    except ValueError as exc:
        return {"raised": "ValueError", "value_error": True, "names_node": names(safe_text(exc), node)}
    except Exception as exc:  # the wrong kind of error is evidence too
        text = safe_text(exc)
        return {"raised": type(exc).__name__, "value_error": False, "names_node": names(text, node), "message": text}
    return {"raised": None, "value_error": False, "names_node": False, "unchanged": describe_annotations(gm) == before}


def _positions(gm: GraphModule, node: str) -> tuple[dict[str, int], int | None]:
    """The spec objects of ``node``'s label: input edge (by producer) → id, and the output's id."""
    ann = by_name(gm)[node].meta.get(ANNOTATION_KEY)
    if ann is None:
        return {}, None
    return {p.name: id(spec) for p, spec in ann.input_qspec_map.items()}, id(ann.output_qspec)


def _alone(gm: GraphModule, node: str, before: tuple[dict[str, int], int | None]) -> GraphModule:
    """``gm`` with every label removed but the positions of ``node``'s label that differ from ``before`` (what a
    spoil changed), in place."""
    inputs, output = before
    for other in gm.graph.nodes:
        if other.name != node:
            other.meta.pop(ANNOTATION_KEY, None)
            continue
        ann = other.meta.get(ANNOTATION_KEY)
        if ann is None:
            continue
        ann.input_qspec_map = {p: s for p, s in ann.input_qspec_map.items() if inputs.get(p.name) != id(s)}
        if id(ann.output_qspec) == output:
            ann.output_qspec = None
    return gm


def _plain(gm: GraphModule, node: str) -> GraphModule:
    """``gm`` with one correct label only: ``act_spec()`` on ``node``'s first input edge (its output when it has
    no input), claimed as ``node``'s label was; in place."""
    target = by_name(gm)[node]
    claimed = getattr(target.meta.get(ANNOTATION_KEY), "_annotated", True)
    for other in gm.graph.nodes:
        other.meta.pop(ANNOTATION_KEY, None)
    inputs = target.all_input_nodes
    target.meta[ANNOTATION_KEY] = QuantizationAnnotation(
        input_qspec_map={inputs[0]: act_spec()} if inputs else {},
        output_qspec=None if inputs else act_spec(),
        _annotated=claimed,
    )
    return gm


def _rejects(
    ns: Namespace, base: Callable[[], GraphModule], spoil: Callable[[dict[str, Node]], None], node: str
) -> dict[str, Any]:
    """What the student's validate did on ``base()`` with one label spoiled by ``spoil``; ``node`` carries it.

    When it did not raise a ValueError naming ``node``, also what it did on the same graph unspoiled
    (``control``: its ``raised`` and ``message``). When it rejects that correct graph too (a mistake
    ``test_validate_accepts`` judges), also what it did on the spoiled positions alone (``alone``: every other
    label removed) and on one plain correct label of ``node`` alone (``alone_control``: what ``raised``): the
    rule is then judged apart from the false alarm (issue 50: one mistake costs once).
    """
    gm = base()
    before = _positions(gm, node)
    spoil(by_name(gm))
    verdict = _verdict(ns, gm, node)
    if verdict["value_error"] and verdict["names_node"]:
        return verdict
    control = _verdict(ns, base(), "")
    verdict["control"] = {"raised": control["raised"], "message": control.get("message", "")}
    if control["raised"] is None:
        return verdict
    alone = base()
    spoil(by_name(alone))
    verdict["alone"] = _verdict(ns, _alone(alone, node, before), node)
    verdict["alone_control"] = _verdict(ns, _plain(base(), node), "")["raised"]
    return verdict


def spec(dtype: torch.dtype = torch.int8, qmin: int = -128, qmax: int = 127, qscheme: Any = None, **kw: Any) -> Any:
    """A QuantizationSpec with MinMaxObserver (per-channel observer for per-channel schemes)."""
    from common.pt2e import PerChannelMinMaxObserver

    qscheme = qscheme or torch.per_tensor_affine
    channel = qscheme in (torch.per_channel_affine, torch.per_channel_symmetric)
    return QuantizationSpec(
        dtype=dtype,
        quant_min=qmin,
        quant_max=qmax,
        qscheme=qscheme,
        ch_axis=0 if channel else None,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver if channel else MinMaxObserver,
        **kw,
    )


def table_labels(gm: GraphModule) -> dict[str, Label]:
    """Correct labels for TableNet, of every kind validate must accept (none breaks a rule)."""
    uint8 = spec(torch.uint8, 0, 255)
    return {
        "x": Label(output=act_spec()),
        "conv2d": Label({"x": act_spec(), "a_weight": weight_spec(), "a_bias": None}, act_spec()),
        "conv2d_1": Label({"x": uint8, "b_weight": weight_spec(per_channel=False)}, act_spec(), annotated=False),
        "conv2d_2": Label({"x": act_spec(), "mul_1": weight_spec()}, spec(torch.int16, -32768, 32767)),
        "relu": Label(output=act_spec()),
        "mul": Label({"conv2d": act_spec()}, act_spec(), annotated=False),
        "cat": Label(
            {
                "relu": act_spec(),
                "mul": Shared(("relu", "cat")),
                "leaky_relu": Shared(("relu", "cat")),
                "conv2d_2": Shared(("relu", "cat")),
            },
            Shared(("relu", "cat")),
        ),
        "linear": Label({"mean": act_spec(), "lin_weight": weight_spec(), "lin_bias": None}, act_spec()),
        "relu_1": Label(output=uint8),
        "add": Label(
            {"relu_1": act_spec()},
            FixedQParamsQuantizationSpec(
                dtype=torch.uint8,
                scale=1.0 / 256,
                zero_point=0,
                quant_min=0,
                quant_max=255,
                qscheme=torch.per_tensor_affine,
            ),
        ),
    }


def _with_bias(gm: GraphModule) -> None:
    """Give linear's bias a DerivedQuantizationSpec (int32, from the activation and weight observers)."""
    nodes = by_name(gm)
    linear = nodes["linear"]

    def derive(observers: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        act, weight = observers[0].calculate_qparams(), observers[1].calculate_qparams()
        return act[0] * weight[0], torch.zeros_like(weight[0], dtype=torch.int32)

    linear.meta[ANNOTATION_KEY].input_qspec_map[nodes["lin_bias"]] = DerivedQuantizationSpec(
        derived_from=[(nodes["mean"], linear), (nodes["lin_weight"], linear)],
        derive_qparams_fn=derive,
        dtype=torch.int32,
        quant_min=-(2**31),
        quant_max=2**31 - 1,
        qscheme=torch.per_channel_symmetric,
        ch_axis=0,
    )


def table_net(seed: int, spoil: Callable[[dict[str, Node]], None] | None = None) -> GraphModule:
    gm = build("table_net", seed)
    put_labels(gm, table_labels(gm))
    _with_bias(gm)
    if spoil is not None:
        spoil(by_name(gm))
    return gm


def xnnpack(
    name: str, seed: int, spoil: Callable[[dict[str, Node]], None] | None = None, per_channel: bool = True
) -> GraphModule:
    gm = xnnpack_labels(build(name, seed), per_channel)
    if spoil is not None:
        spoil(by_name(gm))
    return gm


def _ann(node: Node) -> Any:
    return node.meta[ANNOTATION_KEY]


def validate_accepts(ns: Namespace, seed: int) -> Any:
    graphs = {name: xnnpack(name, seed) for name in ("small_cnn", "residual", "cat_pool", "mlp", "far_relu")}
    graphs["conv_relu_pool（per-tensor weight）"] = xnnpack("conv_relu_pool", seed, per_channel=False)
    graphs["table_net"] = table_net(seed)
    return {name: _verdict(ns, gm, "") for name, gm in graphs.items()}


def validate_not_an_input(ns: Namespace, seed: int) -> Any:
    def ancestor(nodes: dict[str, Node]) -> None:  # x feeds conv2d, not conv2d_1
        _ann(nodes["conv2d_1"]).input_qspec_map[nodes["x"]] = act_spec()

    def user(nodes: dict[str, Node]) -> None:  # relu reads conv2d; it is not conv2d's input
        _ann(nodes["conv2d"]).input_qspec_map[nodes["relu"]] = act_spec()

    def sibling(nodes: dict[str, Node]) -> None:  # conv2d_1 feeds leaky_relu, which feeds cat
        _ann(nodes["cat"]).input_qspec_map[nodes["conv2d_1"]] = act_spec()

    def none_spec(nodes: dict[str, Node]) -> None:  # x feeds conv2d, not relu; a None spec is still a key
        _ann(nodes["relu"]).input_qspec_map[nodes["x"]] = None

    return {
        "none_spec": _rejects(ns, lambda: xnnpack("conv_relu", seed), none_spec, "relu"),
        "ancestor": _rejects(ns, lambda: xnnpack("small_cnn", seed), ancestor, "conv2d_1"),
        "user": _rejects(ns, lambda: table_net(seed), user, "conv2d"),
        "not_in_list": _rejects(ns, lambda: table_net(seed), sibling, "cat"),
    }


def validate_asymmetric_weight(ns: Namespace, seed: int) -> Any:
    def linear_affine(nodes: dict[str, Node]) -> None:
        _ann(nodes["linear"]).input_qspec_map[nodes["linear"].args[1]] = act_spec()

    def channel_affine(nodes: dict[str, Node]) -> None:  # the weight is computed by an op (mul_1)
        _ann(nodes["conv2d_2"]).input_qspec_map[nodes["mul_1"]] = spec(
            qmin=-127, qmax=127, qscheme=torch.per_channel_affine
        )

    def unclaimed(nodes: dict[str, Node]) -> None:  # conv2d_1's label has _annotated=False
        _ann(nodes["conv2d_1"]).input_qspec_map[nodes["b_weight"]] = spec(qmin=-127, qmax=127)

    return {
        "linear": _rejects(ns, lambda: xnnpack("linear_add", seed), linear_affine, "linear"),
        "computed_weight": _rejects(ns, lambda: table_net(seed), channel_affine, "conv2d_2"),
        "unclaimed": _rejects(ns, lambda: table_net(seed), unclaimed, "conv2d_1"),
    }


def validate_inside_fused(ns: Namespace, seed: int) -> Any:
    def adjacent(nodes: dict[str, Node]) -> None:
        _ann(nodes["conv2d"]).output_qspec = act_spec()

    def far(nodes: dict[str, Node]) -> None:  # conv2d's only user, relu_1, is not the next node
        ann = _ann(nodes["conv2d"])
        ann.output_qspec = act_spec()
        ann._annotated = False

    def renamed(nodes: dict[str, Node]) -> None:  # the conv is called linear_90 (RENAMED)
        _ann(nodes["linear_90"]).output_qspec = act_spec()

    def relu_unlabelled(nodes: dict[str, Node]) -> None:  # the output label moved from relu back to conv2d
        del nodes["relu"].meta[ANNOTATION_KEY]
        _ann(nodes["conv2d"]).output_qspec = act_spec()

    return {
        "relu_unlabelled": _rejects(ns, lambda: xnnpack("conv_relu", seed), relu_unlabelled, "conv2d"),
        "adjacent": _rejects(ns, lambda: xnnpack("conv_relu_pool", seed), adjacent, "conv2d"),
        "far": _rejects(ns, lambda: xnnpack("far_relu", seed), far, "conv2d"),
        "renamed": _rejects(ns, lambda: xnnpack("renamed", seed), renamed, "linear_90"),
    }


def validate_bad_range(ns: Namespace, seed: int) -> Any:
    def too_wide(nodes: dict[str, Node]) -> None:  # int8 cannot hold 255
        _ann(nodes["add"]).output_qspec = spec(qmin=0, qmax=255)

    def empty(nodes: dict[str, Node]) -> None:  # quant_min not below quant_max
        _ann(nodes["conv2d"]).input_qspec_map[nodes["x"]] = spec(qmin=10, qmax=10)

    def uint8_negative(nodes: dict[str, Node]) -> None:  # uint8 starts at 0
        _ann(nodes["conv2d_1"]).input_qspec_map[nodes["x"]] = spec(torch.uint8, -1, 255)

    def placeholder(nodes: dict[str, Node]) -> None:  # a label on the model input
        _ann(nodes["x"]).output_qspec = spec(qmin=-129, qmax=127)

    def shared_base(nodes: dict[str, Node]) -> None:  # the spec the other cat inputs share
        _ann(nodes["cat"]).input_qspec_map[nodes["relu"]] = spec(qmin=-128, qmax=128)

    def channel_weight(nodes: dict[str, Node]) -> None:  # a per-channel weight spec up to 128
        _ann(nodes["conv2d"]).input_qspec_map[nodes["conv_weight"]] = spec(
            qmin=-127, qmax=128, qscheme=torch.per_channel_symmetric
        )

    return {
        "channel_weight": _rejects(ns, lambda: xnnpack("conv_relu", seed), channel_weight, "conv2d"),
        "too_wide": _rejects(ns, lambda: xnnpack("linear_add", seed), too_wide, "add"),
        "empty": _rejects(ns, lambda: xnnpack("conv_relu", seed), empty, "conv2d"),
        "uint8_negative": _rejects(ns, lambda: table_net(seed), uint8_negative, "conv2d_1"),
        "placeholder": _rejects(ns, lambda: table_net(seed), placeholder, "x"),
        "shared_base": _rejects(ns, lambda: table_net(seed), shared_base, "cat"),
    }


EXERCISES = with_hidden_cases(
    PUBLIC,
    rule_quantizer={
        "conv_relu": _over(("conv_relu", "conv_bn_relu", "far_relu", "renamed", "unrenamed")),
        "conv_alone": _over(("conv_two_users", "cat_pool", "far_relu", "look_alikes")),
        "weights": _over(("conv_relu", "mlp", "conv_relu_pool", "look_alikes", "linear_add")),
        "linear_add": _over(("mlp", "linear_add", "residual", "constant_adds", "look_alikes")),
        "max_pool": _over(("conv_relu_pool", "cat_pool", "look_alikes")),
        "claimed": rule_claimed,
    },
    validate={
        "accepts": validate_accepts,
        "not_an_input": validate_not_an_input,
        "asymmetric_weight": validate_asymmetric_weight,
        "inside_fused": validate_inside_fused,
        "bad_range": validate_bad_range,
    },
)

"""Public cases of M07-2 訓練、凍結、convert (freeze_bn_stats) on the chapter's own models.

Also what the hidden cases share: what a graph looks like after the student's
``freeze_bn_stats``, read by the case itself: every ``batch_norm`` node's ``training`` flag,
whether the running statistics still change when the graph runs on training batches, and a
fingerprint of every other node (so a change elsewhere shows). ``freeze_bn_stats`` works on
the graph it is handed (the training loop calls ``freeze_bn_stats(qat)`` and goes on with
``qat``): a module other than that graph coming back (an edited copy) is refused with a
sentence that says so. The graphs are handed over without export's ``_guards_fn`` module,
so that such a copy can be told apart in the grader's replay too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from selfcheck import diagnosis
from selfcheck.casekit import Exercise, Namespace, declare, seeded_inputs
from selfcheck.evidence import EvidenceError, safe_text
from selfcheck.misconceptions import Misconception, Section
from selfcheck.practice import Practice

TITLE = "freeze_bn_stats：QAT 後段凍結 BN 的統計"

BATCH_NORM = torch.ops.aten.batch_norm.default


def without_guards(gm: GraphModule) -> GraphModule:
    """``gm`` without export's ``_guards_fn`` call (a shape check of the inputs; nothing reads its result)."""
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn" and not node.users:
            gm.graph.erase_node(node)
    if hasattr(gm, "_guards_fn"):
        delattr(gm, "_guards_fn")
    gm.recompile()
    return gm


def export_train(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> GraphModule:
    """``model`` exported as it is (``.train()`` it first; a submodule may be left in eval mode), without ``_guards_fn``."""
    from common.pt2e import export_module

    return without_guards(export_module(model, inputs))


def freeze(ns: Namespace, gm: GraphModule) -> None:
    """``freeze_bn_stats(gm)``; an nn.Module other than ``gm`` coming back is refused (``gm`` itself or anything else is fine)."""
    returned = ns["freeze_bn_stats"](gm)
    if isinstance(returned, torch.nn.Module) and returned is not gm:
        raise EvidenceError(
            f"freeze_bn_stats 要直接改傳進來的 gm（in place），不需要回傳值：你回傳了另一個 {type(returned).__name__}"
            "（例如改過的複本），但呼叫的地方不看回傳值，之後訓練與評分用的都是傳進來的那個 gm"
        )


def _fingerprint(gm: GraphModule) -> list[str]:
    """Every node that is not a batch_norm, as ``op target args`` text (names only for nodes)."""
    out = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target == BATCH_NORM:
            continue
        args = [a.name if isinstance(a, torch.fx.Node) else repr(a) for a in node.args]
        out.append(f"{node.op} {node.target} ({', '.join(args)})")
    return out


def _statistics(gm: GraphModule) -> list[torch.Tensor]:
    return [b.detach().clone() for name, b in gm.named_buffers() if name.endswith(("running_mean", "running_var"))]


def run_on_batches(
    gm: GraphModule, batches: list[tuple[torch.Tensor, ...]]
) -> tuple[int, list[int] | None, str | None]:
    """Run ``gm`` on ``batches`` (grad off): how many running_mean / running_var buffers changed, the shape of the
    last output, and the error when the graph does not run (``None`` when it does)."""
    before = _statistics(gm)
    shape, problem = None, None
    try:
        with torch.no_grad():
            for batch in batches:
                shape = list(gm(*batch).shape)
    except Exception as exc:  # the graph the answer left does not run (e.g. a shape changed elsewhere)
        problem = f"{type(exc).__name__}: {safe_text(exc, 160)}"
    after = _statistics(gm)
    return sum(not torch.equal(a, b) for a, b in zip(before, after, strict=True)), shape, problem


def describe_frozen(ns: Namespace, gm: GraphModule, batches: list[tuple[torch.Tensor, ...]]) -> dict[str, Any]:
    """Call ``freeze_bn_stats(gm)``, then read the graph and run it on ``batches`` (grad off)."""
    freeze(ns, gm)
    flags = [
        bool(node.args[5]) if len(node.args) > 5 else "（沒有 training 引數）"
        for node in gm.graph.nodes
        if node.op == "call_function" and node.target == BATCH_NORM
    ]
    changed, shape, problem = run_on_batches(gm, batches)
    return {
        "training_flags": flags,
        "statistics_changed": changed,
        "output_shape": shape,
        "run_error": problem,
        "others": _fingerprint(gm),
    }


# --- public cases -------------------------------------------------------------------------------


def public_conv_bn_relu(ns: Namespace, seed: int) -> Any:
    """conv_bn_relu exported in training mode: one BN."""
    from common.models import get_model

    inputs = seeded_inputs(seed, (4, 3, 16, 16))
    gm = export_train(get_model("conv_bn_relu").train(), inputs)
    return describe_frozen(ns, gm, [seeded_inputs(seed + 1, (4, 3, 16, 16))])


def public_residual(ns: Namespace, seed: int) -> Any:
    """residual exported in training mode: two BNs, an add."""
    from common.models import get_model

    inputs = seeded_inputs(seed, (4, 3, 16, 16))
    gm = export_train(get_model("residual").train(), inputs)
    return describe_frozen(ns, gm, [seeded_inputs(seed + 1, (4, 3, 16, 16))])


class Head(nn.Module):
    """A BN on the input, linear → BN1d with its own eps and momentum → relu → max_pool1d(ceil_mode) → a BN
    that is left in eval mode, scaled by a second input named like a BN."""

    def __init__(self) -> None:
        super().__init__()
        self.norm_in = nn.BatchNorm1d(4)  # reads the model's input, no conv before it
        self.fc = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6, eps=1e-3, momentum=0.25)  # its own eps / momentum: freezing keeps them
        self.fixed = nn.BatchNorm1d(3)  # public_head exports it in eval mode: already frozen

    def forward(self, x: torch.Tensor, batch_norm_scale: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.fc(self.norm_in(x))))
        y = nn.functional.max_pool1d(y.unsqueeze(1), 2, ceil_mode=True).squeeze(1)  # ceil_mode is its args[5]
        return self.fixed(y[:, :3]) * batch_norm_scale


def bn_flags(gm: GraphModule) -> list[Any]:
    """Every batch_norm node's training flag (args[5]), in graph order."""
    return [
        bool(n.args[5]) if len(n.args) > 5 else None for n in gm.graph.find_nodes(op="call_function", target=BATCH_NORM)
    ]


def bn_arguments(gm: GraphModule) -> list[str]:
    """Every batch_norm's arguments but the training flag (args[5]), as text: eps and momentum stay the model's."""
    return [
        ", ".join(a.name if isinstance(a, torch.fx.Node) else repr(a) for i, a in enumerate(node.args) if i != 5)
        for node in gm.graph.find_nodes(op="call_function", target=BATCH_NORM)
    ]


def public_head(ns: Namespace, seed: int) -> Any:
    """Head: BNs that do not follow a conv (one on the input, one after a linear), a BN already frozen at export,
    a BN with its own eps / momentum, a max_pool1d whose args[5] (ceil_mode) is True, an input named like a BN."""
    torch.manual_seed(seed)
    model = Head().train()
    model.fixed.eval()  # exported with training=False
    shapes = ((4, 4), (4, 3))
    gm = export_train(model, seeded_inputs(seed, *shapes))
    before = bn_flags(gm)
    result = describe_frozen(ns, gm, [seeded_inputs(seed + 1, *shapes)])
    result["flags_before"] = before
    result["bn_arguments"] = bn_arguments(gm)
    return result


# --- where the chapter teaches it ----------------------------------------------------------------

FREEZE = Section("A. 凍結 BN 的統計")
RULES = Section("練習：freeze_bn_stats（4 分）")
BY_TARGET = Section("A. 依 `node.target` 找 op", notebook="M03-3")
RECOMPILE = Section("B. 忘了 `recompile` 會怎樣", notebook="M01-3")
QAT_BN = Section("B. BN 留到 convert", notebook="M07-1")


# --- reading the evidence (the public detectors here, the hidden ones in autograder/checks/test_m07_2.py) ---


def frozen(evidence: Any, case: str) -> dict[str, Any]:
    """What one case read after the call (empty when the case raised)."""
    found = diagnosis.value(evidence, case)
    return found if isinstance(found, dict) and isinstance(found.get("training_flags"), list) else {}


def flags(evidence: Any, case: str) -> list[Any] | None:
    found = frozen(evidence, case).get("training_flags")
    return found if isinstance(found, list) else None


def returned_a_copy(seen: Any, expected: Any) -> bool:
    """Some case refused an nn.Module that came back instead of the graph handed over."""
    return any("in place" in diagnosis.error_message(seen, case) for case in diagnosis.errors(seen)) or (
        "in place" in str(seen.get("refused", "")) if isinstance(seen, dict) else False
    )


def froze_none(seen: Any, expected: Any, *cases: str) -> bool:
    """In each of these cases, most of the BNs the key leaves frozen are still in training mode (a BN exported in
    eval mode was False before the call and stays so)."""
    for case in cases:
        got, want = flags(seen, case), flags(expected, case)
        if got is None or want is None or len(got) != len(want) or not got:
            return False
        if 2 * sum(1 for g, w in zip(got, want, strict=True) if w is False and g is True) <= len(want):
            return False
    return True


def flags_right_stats_move(seen: Any, expected: Any, *cases: str) -> bool:
    """Every flag False as the key's, yet the running statistics still move: the code was not regenerated."""
    return any(
        flags(seen, case) == flags(expected, case) and frozen(seen, case).get("statistics_changed") for case in cases
    )


def _public_bn_replaced(seen: Any, expected: Any) -> bool:
    """Flags right, statistics frozen, but other nodes now read renamed batch_norm nodes: the BNs were replaced
    (what move_exported_model_to_eval does)."""
    for case in ("conv_bn_relu", "residual"):
        got, want = frozen(seen, case), frozen(expected, case)
        if not got or not want or got.get("others") == want.get("others"):
            continue
        if got.get("training_flags") == want.get("training_flags") and len(got["others"]) == len(want["others"]):
            differing = [(g, w) for g, w in zip(got["others"], want["others"], strict=True) if g != w]
            if all("batch_norm" in g and "batch_norm" in w for g, w in differing):
                return True
    return False


PUBLIC_CASES = ("conv_bn_relu", "residual")


def _head_flags(seen: Any, expected: Any) -> list[tuple[Any, Any, Any]]:
    """Head's BNs as ``(before the call, the student's flag after, the key's flag after)``; empty when a list is
    missing or the lengths differ."""
    before = frozen(expected, "head").get("flags_before")
    got, want = flags(seen, "head"), flags(expected, "head")
    if not isinstance(before, list) or got is None or want is None or not len(before) == len(got) == len(want):
        return []
    return list(zip(before, got, want, strict=True))


def _public_found_by_name(seen: Any, expected: Any) -> bool:
    """Head, whose second input is named batch_norm_scale, raised (an input has no args[5]); conv_bn_relu, whose
    nodes called batch_norm are BNs, went through."""
    return diagnosis.error(seen, "head") in ("IndexError", "TypeError", "AttributeError") and bool(
        frozen(seen, "conv_bn_relu")
    )


def _public_after_conv_only(seen: Any, expected: Any) -> bool:
    """conv_bn_relu's BN frozen; in Head (no conv) a BN in training mode left so, and none switched on."""
    found = _head_flags(seen, expected)
    return (
        flags(seen, "conv_bn_relu") == flags(expected, "conv_bn_relu")
        and any(b is True and g is True and w is False for b, g, w in found)
        and not any(b is False and g is True for b, g, _ in found)
    )


def _public_toggles_flag(seen: Any, expected: Any) -> bool:
    """Head's BN exported in eval mode (False before the call) is True after it."""
    return any(b is False and g is True and w is False for b, g, w in _head_flags(seen, expected))


def _public_any_sixth_argument(seen: Any, expected: Any) -> bool:
    """A node other than a batch_norm (Head's max_pool1d, ceil_mode) had a True argument turned False."""
    for case in diagnosis.cases(expected):
        got, want = frozen(seen, case).get("others"), frozen(expected, case).get("others")
        if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
            for mine, theirs in zip(got, want, strict=True):
                if mine != theirs and "True" in str(theirs) and mine == str(theirs).replace("True", "False"):
                    return True
    return False


def _public_rebuilds_defaults(seen: Any, expected: Any) -> bool:
    """Every flag of Head as the key's, yet some batch_norm's other arguments (eps, momentum) changed."""
    got, want = frozen(seen, "head"), frozen(expected, "head")
    return (
        flags(seen, "head") == flags(expected, "head")
        and isinstance(got.get("bn_arguments"), list)
        and got.get("bn_arguments") != want.get("bn_arguments")
    )


# --- practice (issue 50): a short exercise of its own for one misconception ----------------------------------

DROPOUT = torch.ops.aten.dropout.default


class _Dropouts(nn.Module):
    """Two dropouts (one with train=True, one already off), and a sum whose third argument is keepdim=True; the
    input is called dropout."""

    def forward(self, dropout: torch.Tensor) -> torch.Tensor:
        h = torch.ops.aten.dropout.default(dropout, 0.5, True)
        total = torch.ops.aten.sum.dim_IntList(h, [1], True)
        kept = torch.ops.aten.dropout.default(torch.relu(h), 0.3, False)
        return kept * total


def _dropout_graph() -> GraphModule:
    return torch.fx.symbolic_trace(_Dropouts())


def _no_dropout(x: torch.Tensor) -> torch.Tensor:
    """What _Dropouts computes with both dropouts off."""
    return torch.relu(x) * x.sum(1, keepdim=True)


def _check_dropout_off(dropout_off: Any) -> list[str]:
    gm = _dropout_graph()
    before = {n.name: (n.op, n.target, n.args) for n in gm.graph.nodes}
    returned = dropout_off(gm)
    if isinstance(returned, nn.Module) and returned is not gm:
        return [
            f"你回傳了另一個 {type(returned).__name__}（例如改過的複本）：呼叫的地方不看回傳值，要直接改傳進來的 gm"
        ]
    problems = []
    after = {n.name: (n.op, n.target, n.args) for n in gm.graph.nodes}
    if after == before:
        return [
            "圖一個 node 都沒變：gm.eval() 只改 module 的 training 屬性，圖上的 dropout 把 train=True 寫死在引數裡；"
            "要找到 target 是 torch.ops.aten.dropout.default 的 node，改它的 args[2]"
        ]
    for name, (op, target, args) in before.items():
        now = after.get(name)
        if now is None:
            problems.append(f"{name} 不見了：只改 dropout 的 train 引數，不要拿掉 node")
        elif target == DROPOUT:
            flag = now[2][2] if len(now[2]) > 2 else "（沒有）"
            if flag is not False and args[2] is False:
                problems.append(
                    f"{name} 的 train（args[2]）本來就是 False，現在卻是 {flag}：一律設成 False，不是反過來"
                )
            elif flag is not False:
                problems.append(f"{name} 的 train（args[2]）應該是 False，現在是 {flag}")
            elif now[2][:2] != args[:2]:
                problems.append(f"{name} 的其他引數變了：{list(args[:2])} → {list(now[2][:2])}")
        elif now != (op, target, args):
            problems.append(f"{name} 不是 dropout，應該原封不動：{list(args)} → {list(now[2])}")
    if problems:
        return problems
    x = torch.linspace(-1.0, 1.0, 8).reshape(2, 4)
    with torch.random.fork_rng(), torch.no_grad():
        ran = gm(x)
    if not torch.allclose(ran, _no_dropout(x)):
        problems.append(
            "圖上每個 dropout 的 train 都是 False 了，執行 gm 卻還在 dropout：GraphModule 跑的是 recompile 時產生的程式碼，"
            "改完圖要 gm.recompile()"
        )
    return problems


DROPOUT_OFF = Practice(
    "dropout_off",
    "寫 dropout_off(gm)：gm 是 export 出來的圖，dropout 在圖上是 torch.ops.aten.dropout.default(input, p, train)。"
    "把每個 dropout 關掉（train 設成 False），直接改傳進來的 gm，其他 node 一個都不動。"
    "檢查用的小圖有兩個 dropout（一個本來就關了）、一個第三個引數也是 True 的 sum，輸入的名字叫 dropout；改完會執行 gm 看結果。",
    "import torch\n\nDROPOUT = torch.ops.aten.dropout.default\n\n\ndef dropout_off(gm):\n    raise NotImplementedError()\n",
    _check_dropout_off,
    "export 出來的圖把 train / training 寫死在 node 的引數裡，gm.eval() 改不到。"
    "用 node.target == DROPOUT 認出 dropout，node.update_arg(2, False) 換掉第三個引數（一律 False，不是反過來），"
    "最後 gm.recompile()，執行的程式碼才會跟著圖改。",
    "import torch\n\nDROPOUT = torch.ops.aten.dropout.default\n\n\n"
    "def dropout_off(gm):\n"
    '    for node in gm.graph.find_nodes(op="call_function", target=DROPOUT):\n'
    "        node.update_arg(2, False)\n"
    "    gm.recompile()\n",
    "batch_norm 也一樣：training 是它的 args[5]，改的是圖上的引數，改完要 recompile。",
)


MISCONCEPTIONS = (
    Misconception(
        "returns_copy",
        "在複本上凍結，再回傳複本",
        "訓練迴圈呼叫 freeze_bn_stats(qat) 之後，繼續用的是它手上的 qat，不看回傳值。"
        "你在 copy.deepcopy 出來的複本上改，傳進來的圖一點都沒變，BN 就沒有凍結。直接改傳進來的 gm（in place），不用回傳。",
        RULES,
        public=returned_a_copy,
        practice=DROPOUT_OFF,
    ),
    Misconception(
        "found_by_name",
        "用名字找 BN",
        "node 的名字只是標記：模型的輸入也可以叫 batch_norm，它沒有 args[5]，改它就出錯（或改到不是 BN 的 node）。"
        '要用 node.op == "call_function" 而且 node.target == torch.ops.aten.batch_norm.default 認 BN。',
        BY_TARGET,
        public=_public_found_by_name,
        practice=DROPOUT_OFF,
    ),
    Misconception(
        "wrong_bn_target",
        "一個 BN 都沒有改到",
        "torch 2.x export 出來的 BN 是 aten.batch_norm.default，舊教學找的 aten._native_batch_norm_legit 在圖上不存在；"
        "gm.eval() 也不會改 export 出來的圖。所以你的程式什麼都沒改，也不會出錯，BN 照樣更新統計。"
        "找 node.target == torch.ops.aten.batch_norm.default，把它的 args[5] 設成 False。",
        FREEZE,
        public=lambda seen, expected: froze_none(seen, expected, *PUBLIC_CASES),
        practice=DROPOUT_OFF,
    ),
    Misconception(
        "after_conv_only",
        "以為 BN 一定接在 conv 後面",
        "BN 不一定接在 conv2d 後面：linear 後面可以接 BatchNorm1d，QAT 圖裡 BN 讀的是模擬折疊的 div / add，不是 conv。"
        "只凍結 conv → BN 這個樣子，其他的 BN 都還在更新統計。每個 target 是 aten.batch_norm.default 的 node 都要凍結，不看它前面是什麼。",
        QAT_BN,
        public=_public_after_conv_only,
    ),
    Misconception(
        "toggles_flag",
        "把 training 反過來，而不是設成 False",
        "凍結是把 training 設成 False，不是切換：本來就是 False（export 時就在 eval 模式）的 BN，用 not 反過來就被打開了，"
        "又開始更新統計。一律寫 False。",
        RULES,
        public=_public_toggles_flag,
        practice=DROPOUT_OFF,
    ),
    Misconception(
        "any_sixth_argument",
        "不看 target，改了每個 args[5] 是 True 的 node",
        "args[5] 只有在 batch_norm 上才是 training；別的 op 的第 6 個引數是別的意思，例如 max_pool2d 的 ceil_mode。"
        "你把它們也改成 False，輸出的形狀就變了。先用 node.target 確定是 batch_norm，再改 args[5]。",
        BY_TARGET,
        public=_public_any_sixth_argument,
        practice=DROPOUT_OFF,
    ),
    Misconception(
        "moves_to_eval",
        "以為凍結 BN 就是切到 eval 模式",
        "move_exported_model_to_eval 會把整張圖切到 eval：BN 凍結了，dropout 也一起關掉，訓練後段就少了 dropout。"
        "凍結 BN 只改每個 batch_norm 的 training 引數，其他 node 一個都不動。",
        FREEZE,
        public=_public_bn_replaced,
    ),
    Misconception(
        "no_recompile",
        "改了 node 的引數卻沒有 recompile",
        "GraphModule 執行的是 recompile 時從圖產生的 Python 程式碼：改了 node.args，圖變了，執行的程式碼還是舊的，"
        "BN 照樣用 training=True 更新統計。改完圖要呼叫 gm.recompile()。",
        RECOMPILE,
        public=lambda seen, expected: flags_right_stats_move(seen, expected, *PUBLIC_CASES),
        practice=DROPOUT_OFF,
    ),
    Misconception(
        "rebuilds_defaults",
        "重建引數時換掉了模型自己的 eps、momentum",
        "batch_norm 的 args[5] 之後還有 momentum 和 eps，它們是模型自己設的，不一定是 F.batch_norm 的預設值 0.1 和 1e-5。"
        "你重建整組引數時把它們換成了預設值，凍結之後的輸出就和原本的模型不一樣。只換掉 args[5]，其他引數原樣留著。",
        FREEZE,
        public=_public_rebuilds_defaults,
    ),
)


PUBLIC = declare(
    __name__,
    Exercise(
        "freeze_bn_stats",
        TITLE,
        ("freeze_bn_stats",),
        {"conv_bn_relu": public_conv_bn_relu, "residual": public_residual, "head": public_head},
        misconceptions=MISCONCEPTIONS,
    ),
)

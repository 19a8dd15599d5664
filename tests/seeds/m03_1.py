# Code of the seed chapter M03-1 (../shared/seeds/000_0325add3711d0e84.txt), transcribed unchanged
# except that the value a notebook cell displays is printed.
import copy

import torch

from common.graph_utils import observer_nodes
from common.models import example_inputs, get_model
from common.pt2e import (
    ANNOTATION_KEY,
    MinMaxObserver,
    QuantizationAnnotation,
    QuantizationSpec,
    Quantizer,
    export_module,
    prepare_pt2e,
    quiet,
)
from common.viz import draw, draw_stages, table

quiet()
_ = torch.manual_seed(0)

SPEC = QuantizationSpec(
    dtype=torch.int8,
    quant_min=-128,
    quant_max=127,
    qscheme=torch.per_tensor_affine,
    observer_or_fake_quant_ctr=MinMaxObserver,
)

gm = export_module(get_model("conv_relu").eval(), example_inputs(4))
nodes = {n.name: n for n in gm.graph.nodes}  # 用名字找 node：x、conv_weight、conv2d、relu…
nodes["conv2d"].meta[ANNOTATION_KEY] = QuantizationAnnotation(input_qspec_map={nodes["x"]: SPEC})  # pyright: ignore[reportCallIssue]
nodes["relu"].meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=SPEC)  # pyright: ignore[reportCallIssue]
print(draw(gm, notes={"conv2d": "標籤：input_qspec_map = {x: SPEC}", "relu": "標籤：output_qspec = SPEC"},
     title="貼了兩張標籤的 conv → relu"))

print(f"貼了 2 張標籤，圖上的 observer 數量 = {len(observer_nodes(gm))}")
assert len(observer_nodes(gm)) == 0

calls = []


class LabelQuantizer(Quantizer):
    def __init__(self, labels):
        self.labels = labels  # ("out", node 名稱) 或 ("edge", 上游名稱, consumer 名稱)

    def annotate(self, model):
        calls.append("annotate")
        nodes = {n.name: n for n in model.graph.nodes}
        for label in self.labels:
            if label[0] == "out":
                ann = nodes[label[1]].meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
                ann.output_qspec = SPEC
            else:
                _, producer, consumer = label
                ann = nodes[consumer].meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
                ann.input_qspec_map[nodes[producer]] = SPEC
        return model

    def validate(self, model):
        calls.append("validate")


gm = export_module(get_model("conv_relu").eval(), example_inputs(4))
steps = [
    ("不貼標籤", []),
    ("+ relu 的輸出", [("out", "relu")]),
    ("+ 邊 x → conv2d", [("out", "relu"), ("edge", "x", "conv2d")]),
    ("+ 邊 conv_weight → conv2d", [("out", "relu"), ("edge", "x", "conv2d"), ("edge", "conv_weight", "conv2d")]),
]
prepared, rows = [], []
for title, labels in steps:
    calls.clear()
    p = prepare_pt2e(copy.deepcopy(gm), LabelQuantizer(labels))
    prepared.append((p, title))
    rows.append([title, len(labels), len(observer_nodes(p)), " → ".join(calls)])
print(table(rows, ["步驟", "標籤數", "observer 數", "prepare_pt2e 呼叫了"]))

assert [r[2] for r in rows] == [0, 1, 2, 3]
assert all(r[3] == "annotate → validate" for r in rows)

print(draw_stages(prepared, title="標籤一張一張加"))

C_FOCUS = ["x", "activation_post_process_0", "conv2d", "conv2d_1"]  # x、observer、兩個 conv
gm_cat = export_module(get_model("cat_pool").eval(), example_inputs(4))
edge_only = prepare_pt2e(copy.deepcopy(gm_cat), LabelQuantizer([("edge", "x", "conv2d")]))
print(draw(edge_only, focus=C_FOCUS, hops=0, title="1. 邊標籤：只有 x → conv2d"))

out_label = prepare_pt2e(copy.deepcopy(gm_cat), LabelQuantizer([("out", "x")]))
print(draw(out_label, focus=C_FOCUS, hops=0, title="2. 輸出標籤：x 的輸出"))


def first_input(gm, name):
    return next(n for n in gm.graph.nodes if n.name == name).args[0]


obs_names = {n.name for n, _ in observer_nodes(edge_only)} | {n.name for n, _ in observer_nodes(out_label)}
rows = []
for label, p in [("1. 邊標籤", edge_only), ("2. 輸出標籤", out_label)]:
    for consumer in ("conv2d", "conv2d_1"):
        src = first_input(p, consumer).name
        rows.append([label, consumer, src, "量化後的 x" if src in obs_names else "原本的 x"])
print(table(rows, ["標籤", "consumer", "吃到的輸入", "意思"]))

assert [r[3] for r in rows] == ["量化後的 x", "原本的 x", "量化後的 x", "量化後的 x"]
assert first_input(out_label, "conv2d") is first_input(out_label, "conv2d_1")  # 兩個 conv 共用同一個 observer

# Code of the seed chapter M03-2 (../shared/seeds/002_091dbc77e5045edb.txt), transcribed unchanged
# except that the value a notebook cell displays is printed.
import copy

import torch

from common.graph_utils import qspec_summary, unannotated_ops
from common.models import example_inputs, get_model
from common.pt2e import ANNOTATION_KEY, Quantizer, export_module, get_xnnpack_quantizer, prepare_pt2e, quiet
from common.viz import annotation_notes, draw

quiet()
_ = torch.manual_seed(0)


class CaptureLabels(Quantizer):
    def __init__(self, inner: Quantizer):
        self.inner = inner
        self.annotated: torch.fx.GraphModule | None = None

    def transform_for_annotation(self, model):
        return self.inner.transform_for_annotation(model)

    def annotate(self, model):
        self.inner.annotate(model)
        self.annotated = copy.deepcopy(model)  # 標完、還沒插 observer 的圖
        return model

    def validate(self, model):
        self.inner.validate(model)


def read_labels(model_name):
    """對指定模型跑一次 prepare_pt2e，回傳 XNNPACKQuantizer 標完的圖。"""
    gm = export_module(get_model(model_name).eval(), example_inputs(4))
    xnnpack, _ = get_xnnpack_quantizer(is_per_channel=True)
    capture = CaptureLabels(xnnpack)
    prepare_pt2e(gm, capture)
    assert capture.annotated is not None
    return capture.annotated


labeled = read_labels("conv_relu")
print(draw(labeled, notes=annotation_notes(labeled), title="XNNPACKQuantizer 在 conv → relu 上貼的標籤"))

conv = next(n for n in labeled.graph.nodes if n.name == "conv2d")
ann = conv.meta[ANNOTATION_KEY]
# 複製出來的圖，標籤裡的 key 仍是原圖的 node 物件，所以改用名字查
specs = {producer.name: spec for producer, spec in ann.input_qspec_map.items()}
x, weight, bias = (a.name for a in conv.args[:3])
print("activation：", qspec_summary(specs[x]).replace("\n", "，"))
print("weight：    ", qspec_summary(specs[weight]).replace("\n", "，"))

relu = next(n for n in labeled.graph.nodes if n.name == "relu")
assert ann.output_qspec is None and specs[bias] is None
assert relu.meta[ANNOTATION_KEY].output_qspec is not None

labeled = read_labels("residual")
print(draw(labeled, notes=annotation_notes(labeled), title="XNNPACKQuantizer 在 residual 上貼的標籤（BN 已折進 conv）"))

anns = {n.name: n.meta.get(ANNOTATION_KEY) for n in labeled.graph.nodes}
assert "batch_norm" not in anns
assert anns["conv2d"].output_qspec is None and anns["conv2d_1"].output_qspec is not None
assert len(anns["add"].input_qspec_map) == 2 and anns["add"].output_qspec is None
assert anns["relu_1"].output_qspec is not None

labeled = read_labels("cat_pool")
left = [n.name for n in unannotated_ops(labeled)]
print("沒有標籤的 op：", left)
print(draw(labeled, focus=["cat", "max_pool2d"], hops=1, notes=annotation_notes(labeled, unlabeled=True),
     title="cat_pool 的 cat → max_pool2d 一段"))

assert {"cat", "max_pool2d"} <= set(left)

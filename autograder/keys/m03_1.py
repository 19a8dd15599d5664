"""Answer key of M03-1: add_label and reads_quantized."""

from __future__ import annotations

from torch.fx import GraphModule, Node

from common.graph_utils import observer_nodes
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, QuantizationSpecBase


def add_label(position: Node | tuple[Node, Node], spec: QuantizationSpecBase) -> None:
    if isinstance(position, tuple):
        producer, consumer = position
        if producer not in consumer.all_input_nodes:
            raise ValueError(f"{producer.name} 不是 {consumer.name} 的輸入，不能貼邊標籤")
        ann = consumer.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
        ann.input_qspec_map[producer] = spec
    else:
        ann = position.meta.setdefault(ANNOTATION_KEY, QuantizationAnnotation())
        ann.output_qspec = spec


def reads_quantized(prepared: GraphModule, producer: str) -> dict[str, bool]:
    observers = {n for n, _ in observer_nodes(prepared)}
    start = next(n for n in prepared.graph.nodes if n.name == producer)
    result: dict[str, bool] = {}

    def walk(node: Node, through_observer: bool) -> None:
        for user in node.users:
            if user in observers:
                walk(user, True)
            elif user.op in ("call_function", "output"):
                result[user.name] = result.get(user.name, False) or through_observer

    walk(start, False)
    return result

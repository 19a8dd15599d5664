"""Real data for the accuracy chapters (M06, M07): scikit-learn's bundled digits and a small CNN.

The digits (1,797 grey 8×8 images of the digits 0–9) ship inside scikit-learn, so nothing is
downloaded. ``digits()`` splits them once, with a fixed seed, into 1,077 training, 360 validation
and 360 test images. The model never sees the validation images while it trains: a chapter that
chooses something by measuring (which layers to leave in float, which observer) chooses on them
and reports the test images, which nothing was chosen on. ``digits_model()`` is a small CNN (conv → BN → relu, twice, then a pool and a linear
layer) with the weights the course ships (``digits_weights.pt``, checked against
``WEIGHTS_SHA256``): every machine starts the accuracy chapters from the same numbers.

Why ship them: ``train_digits_model()`` trains the same network in about a second with a fixed
seed, on one thread, yet the weights it reaches depend on the CPU. Torch, oneDNN and MKL pick
kernels by the instruction set (``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA``,
``MKL_ENABLE_INSTRUCTIONS``), each sums in its own order, and eight epochs of Adam turn those
last-bit differences into another model: 355 to 359 of the 360 test images right, depending on
the machine. ``python scripts/train_digits.py`` writes the shipped file again (and prints the
checksum to put here); do that only on purpose, then re-execute M06–M08.

``accuracy`` and ``sqnr`` are the notebooks' own measuring tools.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

CLASSES = 10
IMAGE_SHAPE = (1, 8, 8)
"""Channel, height and width of one digit."""
TEST_SIZE = 360
"""Images held out for testing (20 %): only reported, never chosen on."""
VAL_SIZE = 360
"""Images held out from training for choosing (20 %); the other 1,077 train the model and calibrate observers."""
SPLIT_SEED = 0
TRAIN_SEED = 0
EPOCHS = 8
BATCH = 64
LEARNING_RATE = 0.01
WEIGHTS = Path(__file__).with_name("digits_weights.pt")
"""The trained weights every machine uses (package data, in the wheel)."""
WEIGHTS_SHA256 = "c691505bd335e329b9782dde7da1a680ee0c45ebe00c561aec84f94d04f4d157"
"""SHA-256 of the shipped weights' values (``state_digest``): a changed or damaged file is refused."""


@dataclass(frozen=True)
class Digits:
    """The split digits: images ``(N, 1, 8, 8)`` float32 in [0, 1] and labels ``(N,)`` int64."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor


def _digits_array() -> Any:
    """The 1,797 × 65 array (64 pixels, then the label) scikit-learn ships as ``digits.csv.gz``.

    The file is read directly: importing ``sklearn.datasets`` costs seconds and gives the same
    numbers (``load_digits`` is the fallback when the file is not where scikit-learn keeps it).
    """
    import importlib.util

    import numpy as np

    spec = importlib.util.find_spec("sklearn")
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return np.loadtxt(path, delimiter=",")
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return np.concatenate([bunch.data, bunch.target[:, None]], axis=1)


@functools.cache
def _split() -> Digits:
    array = torch.from_numpy(_digits_array())
    images = (array[:, :64] / 16.0).to(torch.float32).reshape(-1, *IMAGE_SHAPE)
    labels = array[:, 64].to(torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SPLIT_SEED))
    test, val, train = order[:TEST_SIZE], order[TEST_SIZE : TEST_SIZE + VAL_SIZE], order[TEST_SIZE + VAL_SIZE :]
    return Digits(images[train], labels[train], images[test], labels[test], images[val], labels[val])


def digits() -> Digits:
    """The digits, split with a fixed seed (a copy: changing it does not change later calls)."""
    split = _split()
    return Digits(*(t.clone() for t in vars(split).values()))


def example_inputs(batch: int = 8) -> tuple[torch.Tensor]:
    """The first ``batch`` training images, as the tuple ``export`` and ``prepare`` take."""
    return (_split().train_x[:batch].clone(),)


def calibration_batches(count: int = 2, batch: int = 128) -> list[tuple[torch.Tensor]]:
    """``count`` batches of training images for calibrating observers (always the same ones).

    Few large batches: an observer's cost is mostly per call (HistogramObserver), not per image.
    """
    images = _split().train_x
    return [(images[i * batch : (i + 1) * batch].clone(),) for i in range(count)]


class DigitsNet(nn.Module):
    """conv1 → bn1 → relu → conv2 → bn2 → relu → max_pool2d → flatten → fc, on (N, 1, 8, 8).

    ``torch.export`` names its ops ``conv2d, batch_norm…, relu, conv2d_1, …, relu_1,
    max_pool2d, flatten, linear``.
    """

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * width)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(2 * width * 4 * 4, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        return self.fc(torch.flatten(x, 1))


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one intra-op thread (reductions in one order), then restore the setting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train(
    model: nn.Module,
    steps: int | None = None,
    seed: int = TRAIN_SEED,
    lr: float = LEARNING_RATE,
    batch: int = BATCH,
) -> list[float]:
    """Train ``model`` in place with Adam on the training images; returns the loss of every step.

    The batches come from a generator seeded with ``seed`` (the global RNG is left alone) and
    the work runs on one thread, so the result is the same on every machine setting.
    ``steps`` defaults to ``EPOCHS`` passes over the training images.
    """
    split = _split()
    count = len(split.train_y)
    per_epoch = (count + batch - 1) // batch
    total = steps if steps is not None else EPOCHS * per_epoch
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    order = torch.randperm(count, generator=generator)
    with one_thread():
        for step in range(total):
            position = step % per_epoch
            if position == 0 and step > 0:
                order = torch.randperm(count, generator=generator)
            index = order[position * batch : (position + 1) * batch]
            loss = nn.functional.cross_entropy(model(split.train_x[index]), split.train_y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    return losses


def state_digest(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 of a state dict's names, dtypes, shapes and bytes, in name order (not of the file)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class WeightsDamaged(RuntimeError):
    """Shipped weights (the digits CNN's, TinyLM's) are missing or are not the ones the course was made with."""


def load_shipped(path: Path, sha256: str, what: str) -> dict[str, torch.Tensor]:
    """The state dict saved in ``path``, if its ``state_digest`` is ``sha256``; else ``WeightsDamaged`` naming ``what``."""
    try:
        state = torch.load(path, weights_only=True)
    except Exception as exc:  # missing, or not a checkpoint (torch raises several kinds)
        raise WeightsDamaged(
            f"讀不到課程附的 {what} 權重 {path.name}（{type(exc).__name__}）：請重新安裝課程套件"
        ) from None
    if not isinstance(state, dict) or state_digest(state) != sha256:
        raise WeightsDamaged(f"課程附的 {what} 權重 {path.name} 和課程不符（checksum 不對）：請重新安裝課程套件")
    return state


@functools.cache
def _shipped_state() -> dict[str, torch.Tensor]:
    return load_shipped(WEIGHTS, WEIGHTS_SHA256, "digits")


def new_digits_net(seed: int = TRAIN_SEED) -> DigitsNet:
    """An untrained ``DigitsNet`` whose initial weights come from ``seed`` (the global RNG is left alone)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return DigitsNet()


def train_digits_model(seed: int = TRAIN_SEED) -> DigitsNet:
    """Train a ``DigitsNet`` on this machine (``EPOCHS`` epochs, about a second) and return it in eval mode.

    The recipe of the shipped weights; on another CPU it reaches slightly other weights (see the
    module docstring). The global RNG is left as it was.
    """
    model = new_digits_net(seed)
    model.train()
    train(model, seed=seed)
    return model.eval()


def digits_model() -> DigitsNet:
    """The digits CNN with the shipped weights, in eval mode: a fresh copy on every call.

    The same numbers on every machine (``WEIGHTS``); the global RNG is left as it was.
    """
    with torch.random.fork_rng():
        model = DigitsNet()
    model.load_state_dict(copy.deepcopy(_shipped_state()))
    return model.eval()


# --- exporting and quantizing ---------------------------------------------------------------------


def export(model: nn.Module) -> GraphModule:
    """``model`` exported for PT2E with a dynamic batch size (test, training and calibration batches differ).

    The model is exported as it is (call ``.eval()`` first for PTQ, ``.train()`` for QAT).
    """
    from common._noise import quiet_imports

    with quiet_imports():
        batch = torch.export.Dim("batch")
        return torch.export.export(model, example_inputs(8), dynamic_shapes=({0: batch},)).module()


def ptq(
    model: nn.Module, quantizer: Any, batches: list[tuple[torch.Tensor]] | None = None
) -> tuple[GraphModule, GraphModule]:
    """Post-training quantization of a digits model: ``(prepared, converted)``.

    export (``model`` in eval mode) → ``prepare_pt2e`` → calibrate on ``batches`` (default
    ``calibration_batches()``) → ``convert_pt2e`` on a copy, so the prepared graph stays usable.
    """
    from common.pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(export(model.eval()), quantizer)
    with torch.no_grad():
        for batch in batches if batches is not None else calibration_batches():
            prepared(*batch)
    return prepared, convert_pt2e(copy.deepcopy(prepared))


# --- measuring -----------------------------------------------------------------------------------


def predictions(model: Any, images: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """The predicted class of every image (``model`` may be an nn.Module or an exported graph)."""
    out = []
    with torch.no_grad():
        for start in range(0, len(images), batch):
            out.append(model(images[start : start + batch]).argmax(dim=1))
    return torch.cat(out)


def accuracy(model: Any, images: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> float:
    """The fraction of correctly classified images (the test images unless given).

    Works on an ``nn.Module`` in eval mode and on exported / prepared / converted graphs alike:
    it only calls ``model(batch)`` under ``torch.no_grad()``.
    """
    split = _split()
    images = split.test_x if images is None else images
    labels = split.test_y if labels is None else labels
    return float((predictions(model, images) == labels).double().mean())


def sqnr(reference: torch.Tensor, test: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio in dB: 10·log10(Σ reference² / Σ (reference − test)²).

    ``inf`` when ``test`` equals ``reference`` exactly. Computed in float64.
    """
    reference = reference.detach().to(torch.float64)
    noise = (reference - test.detach().to(torch.float64)).pow(2).sum()
    if float(noise) == 0.0:
        return float("inf")
    return float(10 * torch.log10(reference.pow(2).sum() / noise))

"""M09's language model: TinyLM, a tiny decoder-only transformer, and the made-up language it learns.

The language is generated, not downloaded: ``text(seed, chars)`` writes sentences such as
``two big cats see a dog. the hen likes some red cows.`` with Python's ``random.Random(seed)``, the
same characters on every machine. A sentence is ``det [adjective] noun verb det [adjective] noun.``:
``a`` / ``one`` take a singular noun, ``two`` / ``some`` a plural one, ``the`` either, and the verb
agrees with its subject (``the cat sees``, ``the cats see``). One character is one token (``VOCAB``).

``TinyLM`` has token and position embeddings, two pre-LayerNorm blocks (causal self-attention with
``q`` / ``k`` / ``v`` / ``out`` linears, then linear → GELU → linear), a final LayerNorm and an
output linear: 71,700 parameters. ``TinyLMConfig``'s other fields build variants (sizes,
linears without bias, post-LayerNorm blocks, ReLU) for unseen models; its defaults are the shipped
model. ``tinylm_model()`` gives it the shipped weights (``tinylm_weights.pt``, checked against
``WEIGHTS_SHA256``), as ``common.data.digits_model`` does.
They are shipped because ``train_tinylm()`` (about twelve seconds on one thread, fixed seed) reaches
slightly different weights on another CPU: the float scores stay the same, but the accuracy of a
4-bit model of them moves by up to 11 of the 4,096 held-out tokens.
``python scripts/train_tinylm.py`` writes them again, on purpose only.

``score`` (next-token accuracy and perplexity on the held-out windows), ``chance`` and ``complete``
are the measuring tools.
"""

from __future__ import annotations

import copy
import functools
import math
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from common.data import load_shipped, one_thread

# --- the language --------------------------------------------------------------------------------

SINGULAR_DETERMINERS = ("a", "one", "the")
PLURAL_DETERMINERS = ("two", "some", "the")
ADJECTIVES = ("big", "small", "red", "old")
NOUNS = ("cat", "dog", "bird", "cow", "hen")
VERBS = ("see", "like", "find", "hear")
ADJECTIVE_CHANCE = 0.4
"""How often a noun phrase has an adjective."""
PLURAL_CHANCE = 0.5

VOCAB = " ." + "".join(
    sorted(set("".join((*SINGULAR_DETERMINERS, *PLURAL_DETERMINERS, *ADJECTIVES, *NOUNS, *VERBS, "s"))))
)
"""Every character the language uses: space, full stop, then the letters in order (one token each)."""
CONTEXT = 32
"""Tokens the model sees at once (the length of its position embedding)."""

TRAIN_SEED = 0
"""Seed of the training text (and of the model's initial weights and the batch order)."""
HELDOUT_SEED = 1
"""Seed of the held-out text: the same grammar, other sentences."""
TRAIN_CHARS = 100_000
HELDOUT_WINDOWS = 128
"""Held-out windows of ``CONTEXT`` tokens: 4,096 next-token predictions."""


def noun_phrase(rng: random.Random, plural: bool) -> str:
    """``det [adjective] noun[s]``: ``a`` / ``one`` only with a singular noun, ``two`` / ``some`` only with a plural one."""
    words = [rng.choice(PLURAL_DETERMINERS if plural else SINGULAR_DETERMINERS)]
    if rng.random() < ADJECTIVE_CHANCE:
        words.append(rng.choice(ADJECTIVES))
    words.append(rng.choice(NOUNS) + ("s" if plural else ""))
    return " ".join(words)


def sentence(rng: random.Random) -> str:
    """``subject verb object.`` with the verb agreeing with the subject (``sees`` after a singular one)."""
    plural = rng.random() < PLURAL_CHANCE
    subject = noun_phrase(rng, plural)
    verb = rng.choice(VERBS) + ("" if plural else "s")
    return f"{subject} {verb} {noun_phrase(rng, rng.random() < PLURAL_CHANCE)}."


def text(seed: int, chars: int) -> str:
    """At least ``chars`` characters of the language (whole sentences, one space apart), from ``seed``.

    Uses Python's ``random.Random``: the same string on every machine, the global RNGs left alone.
    """
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < chars:
        parts.append(sentence(rng))
        length += len(parts[-1]) + 1
    return " ".join(parts)


def encode(string: str) -> torch.Tensor:
    """The tokens of ``string``: an int64 tensor of indices into ``VOCAB``."""
    unknown = sorted(set(string) - set(VOCAB))
    if unknown:
        raise ValueError(f"{''.join(unknown)!r} 不是這個語言的字元（VOCAB = {VOCAB!r}）")
    return torch.tensor([VOCAB.index(c) for c in string], dtype=torch.int64)


def decode(tokens: torch.Tensor) -> str:
    """The string of a 1-D tensor of tokens."""
    return "".join(VOCAB[int(t)] for t in tokens)


def windows(tokens: torch.Tensor, count: int, context: int = CONTEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` non-overlapping windows of ``tokens``: inputs ``(count, context)`` and targets shifted by one."""
    needed = count * context + 1
    if len(tokens) < needed:
        raise ValueError(f"{count} windows of {context} need {needed} tokens, got {len(tokens)}")
    x = tokens[: count * context].reshape(count, context)
    y = tokens[1:needed].reshape(count, context)
    return x.clone(), y.clone()


@functools.cache
def _train_tokens() -> torch.Tensor:
    return encode(text(TRAIN_SEED, TRAIN_CHARS))


@functools.cache
def _heldout() -> tuple[torch.Tensor, torch.Tensor]:
    return windows(encode(text(HELDOUT_SEED, HELDOUT_WINDOWS * CONTEXT + 1)), HELDOUT_WINDOWS)


def train_tokens() -> torch.Tensor:
    """The training text as one long 1-D tensor of tokens (a copy)."""
    return _train_tokens().clone()


def heldout() -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out windows ``(inputs, targets)``, each ``(HELDOUT_WINDOWS, CONTEXT)`` int64 (copies)."""
    x, y = _heldout()
    return x.clone(), y.clone()


def example_inputs(batch: int = 8) -> tuple[torch.Tensor]:
    """The first ``batch`` held-out windows, as the tuple ``export`` and ``prepare`` take."""
    return (_heldout()[0][:batch].clone(),)


def calibration_batches(count: int = 4, batch: int = 32) -> list[tuple[torch.Tensor]]:
    """``count`` batches of training windows for calibrating observers (always the same ones)."""
    x, _ = windows(_train_tokens(), count * batch)
    return [(x[i * batch : (i + 1) * batch],) for i in range(count)]


# --- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TinyLMConfig:
    """The sizes of ``TinyLM``."""

    vocab: int = len(VOCAB)
    context: int = CONTEXT
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    mlp: int = 128
    """Hidden width of each block's MLP."""
    bias: bool = True
    """Whether every ``nn.Linear`` (attention, MLP and head) has a bias."""
    norm_first: bool = True
    """Pre-LayerNorm blocks (``x + attn(ln1(x))``); ``False`` gives post-LayerNorm ones (``ln1(x + attn(x))``)."""
    activation: str = "gelu"
    """The MLP's activation: ``"gelu"`` or ``"relu"``."""


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with explicit ``q``, ``k``, ``v`` and ``out`` linears.

    softmax(q kᵀ / √d_head, future masked) v, per head; ``torch.export`` shows it as four
    ``linear``, two ``matmul``, a ``mul``, a ``masked_fill`` and a ``softmax``.
    """

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.d_head = config.d_model // config.heads
        self.scale = self.d_head**-0.5
        self.q = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.k = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.v = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.out = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        future = torch.ones(config.context, config.context, dtype=torch.bool).triu(1)
        self.register_buffer("future", future, persistent=False)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model)`` → ``(B, heads, T, d_head)``."""
        b, t, _ = x.shape
        return x.reshape(b, t, self.heads, self.d_head).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.split_heads(self.q(x)), self.split_heads(self.k(x)), self.split_heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
        y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


ACTIVATIONS: dict[str, type[nn.Module]] = {"gelu": nn.GELU, "relu": nn.ReLU}
"""The activations ``TinyLMConfig.activation`` names."""


class Mlp(nn.Module):
    """``fc1`` → GELU (or ReLU, ``config.activation``) → ``fc2``."""

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        if config.activation not in ACTIVATIONS:
            raise ValueError(f"activation {config.activation!r}: one of {sorted(ACTIVATIONS)}")
        self.fc1 = nn.Linear(config.d_model, config.mlp, bias=config.bias)
        self.act = ACTIVATIONS[config.activation]()
        self.fc2 = nn.Linear(config.mlp, config.d_model, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``.

    With ``config.norm_first`` false, a post-LayerNorm one: ``ln1(x + attn(x))``, then ``ln2(x + mlp(x))``.
    """

    def __init__(self, config: TinyLMConfig) -> None:
        super().__init__()
        self.norm_first = config.norm_first
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = Mlp(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.norm_first:
            x = self.ln1(x + self.attn(x))
            return self.ln2(x + self.mlp(x))
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Decoder-only transformer: ``(B, T)`` int64 tokens → ``(B, T, vocab)`` next-token logits.

    ``tok`` and ``pos`` embeddings → ``blocks[0]``, ``blocks[1]`` → ``ln_f`` → ``head``; ``T`` at most
    ``context``.
    """

    def __init__(self, config: TinyLMConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or TinyLMConfig()
        self.tok = nn.Embedding(config.vocab, config.d_model)
        self.pos = nn.Embedding(config.context, config.d_model)
        self.blocks = nn.ModuleList([Block(config) for _ in range(config.layers)])
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab, bias=config.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


# --- training and the shipped weights ------------------------------------------------------------

STEPS = 600
BATCH = 32
LEARNING_RATE = 3e-3
WEIGHTS = Path(__file__).with_name("tinylm_weights.pt")
"""The trained weights every machine uses (package data, in the wheel)."""
WEIGHTS_SHA256 = "e3fc3c2e36ea7b624827238d2d9162df6de611d72d23fac35d19b7a2492d20d8"
"""SHA-256 of the shipped weights' values (``state_digest``): a changed or damaged file is refused."""


def new_tinylm(seed: int = TRAIN_SEED) -> TinyLM:
    """An untrained ``TinyLM`` whose initial weights come from ``seed`` (the global RNG is left alone)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return TinyLM()


def train(
    model: nn.Module, steps: int = STEPS, seed: int = TRAIN_SEED, lr: float = LEARNING_RATE, batch: int = BATCH
) -> list[float]:
    """Train ``model`` in place with AdamW on random windows of the training text; the loss of every step.

    Window starts come from a generator seeded with ``seed`` (the global RNG is left alone); the
    learning rate decays along a cosine to zero; the work runs on one thread.
    """
    tokens = _train_tokens()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    offsets = torch.arange(CONTEXT + 1)
    losses: list[float] = []
    model.train()
    with one_thread():
        for _ in range(steps):
            starts = torch.randint(len(tokens) - CONTEXT - 1, (batch,), generator=generator)
            chunk = tokens[starts[:, None] + offsets]
            logits = model(chunk[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(float(loss.detach()))
    return losses


def train_tinylm(seed: int = TRAIN_SEED, steps: int = STEPS) -> TinyLM:
    """Train a ``TinyLM`` on this machine (about twelve seconds on one thread) and return it in eval mode.

    The recipe of the shipped weights; on another CPU it reaches slightly other weights.
    """
    model = new_tinylm(seed)
    train(model, steps=steps, seed=seed)
    return model.eval()


@functools.cache
def _shipped_state() -> dict[str, torch.Tensor]:
    return load_shipped(WEIGHTS, WEIGHTS_SHA256, "TinyLM")  # common.data.WeightsDamaged if it is not


def tinylm_model() -> TinyLM:
    """The TinyLM with the shipped weights, in eval mode: a fresh copy on every call.

    The same numbers on every machine (``WEIGHTS``); the global RNG is left as it was. A missing
    or changed file raises ``common.data.WeightsDamaged``.
    """
    with torch.random.fork_rng():
        model = TinyLM()
    model.load_state_dict(copy.deepcopy(_shipped_state()))
    return model.eval()


# --- measuring -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    """Next-token accuracy (fraction of argmax hits) and perplexity (exp of the mean cross-entropy)."""

    accuracy: float
    perplexity: float

    def __str__(self) -> str:
        """Printed with the digits every CPU shares (a quantized model's count of hits moves by a token or two)."""
        return f"accuracy {self.accuracy:.3f}, perplexity {self.perplexity:.4g}"


def logits(model: object, inputs: torch.Tensor, batch: int = 32) -> torch.Tensor:
    """``model``'s logits for every window, ``batch`` windows per call.

    ``model`` may be an ``nn.Module`` or an exported / prepared / converted graph; a graph exported
    for one batch size needs that size as ``batch``, and it must divide the number of windows.
    """
    outs = []
    with torch.no_grad():
        for start in range(0, len(inputs), batch):
            outs.append(model(inputs[start : start + batch]))  # type: ignore[operator]
    return torch.cat(outs)


def score_logits(out: torch.Tensor, targets: torch.Tensor) -> Score:
    """Accuracy and perplexity of ``(N, T, vocab)`` logits against ``(N, T)`` targets (summed in float64)."""
    flat, target = out.reshape(-1, out.shape[-1]).double(), targets.reshape(-1)
    hits = (flat.argmax(dim=1) == target).double().mean()
    loss = nn.functional.cross_entropy(flat, target)
    return Score(float(hits), float(torch.exp(loss)))


def score(
    model: object, inputs: torch.Tensor | None = None, targets: torch.Tensor | None = None, batch: int = 32
) -> Score:
    """Next-token accuracy and perplexity of ``model`` on the held-out windows (unless given)."""
    if inputs is None or targets is None:
        inputs, targets = _heldout()
    return score_logits(logits(model, inputs, batch), targets)


def chance() -> Score:
    """What guessing gives: accuracy of always the most common held-out target, perplexity ``len(VOCAB)``."""
    _, targets = _heldout()
    common = torch.bincount(targets.reshape(-1), minlength=len(VOCAB)).max()
    return Score(float(common) / targets.numel(), float(len(VOCAB)))


def complete(model: nn.Module, prompt: str, chars: int = 40) -> str:
    """``prompt`` continued greedily by ``model`` for ``chars`` characters (eager model, last ``CONTEXT`` tokens).

    Start the prompt after a sentence (``". a red hen"``): training windows begin anywhere in the
    text, so without one the model cannot tell a subject from an object (``"a red hen"`` alone
    continues ``"s."``, ``". a red hen"`` continues ``" hears the cats."``).
    """
    tokens = encode(prompt)
    with torch.no_grad():
        for _ in range(chars):
            window = tokens[-CONTEXT:][None]
            tokens = torch.cat([tokens, model(window)[0, -1].argmax().reshape(1)])
    return decode(tokens)

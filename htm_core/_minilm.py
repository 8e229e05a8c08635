"""all-MiniLM-L6-v2 in numpy: the bundled model's vectors without importing torch.

sentence-transformers takes seconds to import, which a command that embeds one query would
pay in full; the bundled MiniLM (a small BERT, mean pooling, L2 normalisation) is run here
with numpy over the model's own ``model.safetensors`` and ``tokenizer.json``, matching
sentence-transformers' vectors to float32 rounding (tests/integration/test_minilm.py).
:func:`available` says whether it can run a model folder (a mean-pooled, normalised BERT);
:class:`NumpyMiniLM` is the model. See docs/embeddings.md ("The built-in embedders").
"""

from __future__ import annotations

import bisect
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Hidden", "NumpyMiniLM", "available"]

_FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json",
          "1_Pooling/config.json")


def available(folder: str | Path) -> bool:
    """Whether ``folder`` is a mean-pooled, normalised BERT this module can run."""
    path = Path(folder)
    if not all((path / f).is_file() for f in _FILES):
        return False
    if any(importlib.util.find_spec(m) is None for m in ("safetensors", "tokenizers")):
        return False
    try:
        config = json.loads((path / "config.json").read_text())
        modules = [m["type"].rsplit(".", 1)[-1]
                   for m in json.loads((path / "modules.json").read_text())]
        pooling = json.loads((path / "1_Pooling/config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (config.get("model_type") == "bert" and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
            and modules == ["Transformer", "Pooling", "Normalize"]
            and pooling.get("pooling_mode_mean_tokens") is True
            and not any(pooling.get(k) for k in ("pooling_mode_cls_token",
                                                 "pooling_mode_max_tokens",
                                                 "pooling_mode_mean_sqrt_len_tokens")))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.2e-7 (Numerical Recipes' erfc; numpy has no erf of its own)."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (
        0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (
            1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    y = 1.0 - t * np.exp(poly)
    out: np.ndarray = np.where(x >= 0, y, -y)
    return out


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / np.sqrt(2.0)))).astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: np.ndarray = (x - mean) / np.sqrt(var + eps) * weight + bias
    return out


#: Token ids of each sequence to its last layer's token vectors (one pass each).
Hidden = Callable[[Sequence[Sequence[int]]], list[np.ndarray]]


def _unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)
    return out


def _segments(encoding: Any, spans: Sequence[tuple[int, int]], room: int, first: int
              ) -> tuple[list[tuple[int, int, int]], list[list[int]]]:
    """The sequences to run for one text (its first ``room`` tokens, then a stretch from
    each window the ones before did not hold) and where each pooled vector lies: the
    whole text's ``(sequence, 0, length)`` first, then per span ``(sequence, start, end)``
    in token rows of that sequence (``first``: the index of the text's first sequence)."""
    ids, offsets = encoding.ids, encoding.offsets
    cls, sep = ids[0], ids[-1]
    content, starts = ids[1:-1], [o[0] for o in offsets[1:-1]]
    segments = [[cls, *content[:room], sep]]
    plan = [(first, 0, len(segments[0]))]
    begin = 0
    last = max(len(content) - 1, 0)
    for a, b in spans:
        i = min(bisect.bisect_left(starts, a), last)
        j = max(bisect.bisect_left(starts, b), min(i + 1, len(content)))
        if j > begin + room:  # past what the current stretch read: a new pass from here
            begin = i
            segments.append([cls, *content[begin:begin + room], sep])
        j = min(j, begin + room)
        plan.append((first + len(segments) - 1, 1 + i - begin, 1 + max(j, i + 1) - begin))
    return plan, segments


class NumpyMiniLM:
    """A sentence-transformers BERT folder (mean pooling, normalised) run with numpy."""

    def __init__(self, folder: str | Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = Path(folder)
        config = json.loads((path / "config.json").read_text())
        st_config: dict[str, Any] = {}
        if (path / "sentence_bert_config.json").is_file():
            st_config = json.loads((path / "sentence_bert_config.json").read_text())
        self.max_length = int(st_config.get("max_seq_length")
                              or config.get("max_position_embeddings", 512))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        # Dense weights transposed once, contiguous: ``x @ w`` then runs as one BLAS call.
        self.w = {k.removeprefix("bert."): (np.ascontiguousarray(v.T) if v.ndim == 2 and
                                            k.startswith(("encoder.", "bert.encoder.")) else v)
                  for k, v in load_file(str(path / "model.safetensors")).items()}
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        self._whole_tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._whole_tokenizer.no_padding()
        self._whole_tokenizer.no_truncation()
        #: How many sequences went through the network (a model pass each).
        self.passes = 0

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit vectors (float32 rows) for ``texts``, as sentence-transformers makes them:
        longest first in batches of ``batch_size``, each padded to its longest text."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts)
        for i, hidden in enumerate(self._hidden([e.ids for e in encodings], batch_size)):
            out[i] = _unit(hidden.mean(axis=0))
        self.passes += len(texts)
        return out

    def _hidden(self, sequences: Sequence[Sequence[int]], batch_size: int) -> list[np.ndarray]:
        """The last layer's token vectors of each sequence of token ids (one pass each):
        longest first in batches of ``batch_size``, each padded to its longest sequence."""
        out: list[np.ndarray] = [np.zeros((0, self.dim), dtype=np.float32)] * len(sequences)
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        for start in range(0, len(order), batch_size):
            part = order[start:start + batch_size]
            width = len(sequences[part[0]])
            ids = np.zeros((len(part), width), dtype=np.int64)
            mask = np.zeros((len(part), width), dtype=np.float32)
            for row, i in enumerate(part):
                got = sequences[i]
                ids[row, :len(got)] = got
                mask[row, :len(got)] = 1.0
            hidden = self._forward(ids, mask)
            for row, i in enumerate(part):
                out[i] = hidden[row, :len(sequences[i])]
        return out

    def encode_windows(self, texts: list[str], spans: Sequence[Sequence[tuple[int, int]]],
                       batch_size: int = 32, hidden: Hidden | None = None
                       ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's unit vector (as :meth:`encode` makes it) and, for each of its
        character ``spans``, the normalised mean of the span's token vectors taken from a
        pass over the whole text: one pass per text, plus one per further stretch of
        ``max_length`` tokens that holds windows the first pass did not read.

        ``hidden`` runs the passes instead of this network (the same model in torch, for
        large batches): token ids of each sequence to its last layer's token vectors."""
        sequences: list[list[int]] = []
        plans: list[list[tuple[int, int, int]]] = []
        for text, text_spans in zip(texts, spans, strict=True):
            plan, segments = _segments(self._whole_tokenizer.encode(text), text_spans,
                                       self.max_length - 2, len(sequences))
            sequences.extend(segments)
            plans.append(plan)
        hidden_states = (hidden(sequences) if hidden is not None
                         else self._hidden(sequences, batch_size))
        self.passes += len(sequences)
        whole = np.zeros((len(texts), self.dim), dtype=np.float32)
        windows: list[np.ndarray] = []
        for n, plan in enumerate(plans):
            first = hidden_states[plan[0][0]] if plan else None
            whole[n] = _unit(first.mean(axis=0)) if first is not None else 0.0
            rows = [_unit(hidden_states[seq][a:b].mean(axis=0)) for seq, a, b in plan[1:]]
            windows.append(np.array(rows, dtype=np.float32).reshape(len(rows), self.dim))
        return whole, windows

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        batch, width = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:width][None, :, :]
             + w["embeddings.token_type_embeddings.weight"][0][None, None, :])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"],
                        self.eps)
        heads, size = self.heads, self.dim // self.heads
        blocked = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for n in range(self.layers):
            p = f"encoder.layer.{n}."

            def dense(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                weight = w[p + name + ".weight"]
                flat = v.reshape(-1, weight.shape[0]) @ weight + w[p + name + ".bias"]
                out: np.ndarray = flat.reshape(*v.shape[:-1], weight.shape[1])
                return out

            def split(v: np.ndarray) -> np.ndarray:
                return v.reshape(batch, width, heads, size).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, width, self.dim)
            x = _layer_norm(dense(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], self.eps)
            inner = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(dense(inner, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"], self.eps)
        return x.astype(np.float32)

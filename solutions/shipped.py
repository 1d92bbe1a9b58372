"""The trained models the pages read: shipped as weights, made by recipes in this file.

A claim about a trained model is a claim about an artifact. Training on another CPU
(PyTorch's vector kernels, ``ATEN_CPU_CAPABILITY``; MKL's dispatch) follows another
trajectory and ends in another model, so a page that read "the model it just trained"
would be true only on the machine that wrote it. Instead:

- ``RECIPES``: name -> ``Recipe``, the training call that made each shipped model (a
  trainer of this package and its arguments: every one is seeded, single-threaded and
  deterministic on one machine).
- ``tools/train_models.py`` (``make models``) runs the recipes and writes
  ``solutions/weights/<name>.npz`` (the parameters, and the training history of that
  run) and ``solutions/weights/manifest.json`` (each file's sha256, its recipe, the
  arguments that rebuild the empty model, and the machine it was trained on).
- ``load(name)`` -> ``(model, history)``: the empty model rebuilt and the shipped
  parameters loaded, in eval mode, after the file's sha256 is checked against the
  manifest. The book and the explorer read models only this way, so every build shows
  the same model and the same numbers; inference on another CPU moves a number by
  float noise only.
- ``tests/test_shipped_models.py`` checks the manifest and retrains recipes on the
  machine it runs on: the result must meet the quality the pages state for a run of the
  recipe, not equal the shipped weights.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "MANIFEST",
    "RECIPES",
    "WEIGHTS",
    "Recipe",
    "ShippedWeightsError",
    "constructor_arguments",
    "load",
    "load_model",
    "read_manifest",
    "save",
    "sha256",
]

WEIGHTS = Path(__file__).resolve().parent / "weights"
MANIFEST = WEIGHTS / "manifest.json"


class ShippedWeightsError(RuntimeError):
    """A shipped weight file is missing or is not the one the manifest names."""


@dataclass(frozen=True)
class Recipe:
    """One shipped model: ``trainer(**arguments)`` -> ``(model, history)``.

    trainer: dotted name of a function of this package, e.g.
    ``"solutions.transformer.train_translator"``. chapter: the page that reads it.
    """

    chapter: str
    trainer: str
    arguments: dict = field(default_factory=dict)

    def train(self):
        module, name = self.trainer.rsplit(".", 1)
        return getattr(importlib.import_module(module), name)(**self.arguments)


def _chapter6(**arguments) -> dict:
    from solutions.transformer import CHAPTER_MODEL

    return {"seed": 0, "num_heads": 4, **CHAPTER_MODEL, **arguments}


def _recipes() -> dict[str, Recipe]:
    recipes = {
        # chapter 2: the aspect-sentiment model and the memory network
        "ch2_aspect": Recipe(
            "ch2_soft_hard",
            "solutions.soft_hard_models.train_aspect_model",
            {"seed": 0},
        ),
        "ch2_memory": Recipe(
            "ch2_soft_hard",
            "solutions.soft_hard_models.train_memory_network",
            {"seed": 0},
        ),
        # chapter 5: the reversal model, the two-offset model and its seed-16 twin
        "ch5_reverse": Recipe(
            "ch5_multihead",
            "solutions.multihead.train_toy_transformer",
            {"task": "reverse", "length": 8, "seed": 0},
        ),
        "ch5_two_offset": Recipe(
            "ch5_multihead",
            "solutions.multihead.train_two_offset_transformer",
            {"offsets": [2, 5], "length": 12, "num_symbols": 8, "seed": 0},
        ),
        "ch5_two_offset_seed16": Recipe(
            "ch5_multihead",
            "solutions.multihead.train_two_offset_transformer",
            {"offsets": [2, 5], "length": 12, "num_symbols": 8, "seed": 16},
        ),
        # chapter 6: the translator, its control without source positions, and the
        # composition section's eight training seeds (predicate-voice pairs held out)
        "ch6_translator": Recipe(
            "ch6_transformer", "solutions.transformer.train_translator", _chapter6()
        ),
        "ch6_no_source_positions": Recipe(
            "ch6_transformer",
            "solutions.transformer.train_translator",
            _chapter6(source_positions=False),
        ),
    }
    # chapter 3: the model without attention, Bahdanau's and Luong's (DEFAULT_CONFIG)
    kinds = (("plain", None), ("bahdanau", "additive"), ("luong", "dot"))
    for name, attention in kinds:
        recipes[f"ch3_{name}"] = Recipe(
            "ch3_seq2seq",
            "solutions.seq2seq.train",
            {"attention": attention, "seed": 0},
        )
    for seed in range(8):
        recipes[f"ch6_compose_seed{seed}"] = Recipe(
            "ch6_transformer",
            "solutions.transformer.train_translator",
            _chapter6(seed=seed, holdout="voice"),
        )
    return recipes


RECIPES: dict[str, Recipe] = _recipes()


# --------------------------------------------------------------------------------------
# rebuilding an empty model


def constructor_arguments(model) -> dict:
    """What rebuilds an empty copy of ``model`` (its class and sizes), for
    ``load_model``: read from the model itself."""
    from solutions import seq2seq as s2s
    from solutions.multihead import TinyTransformer
    from solutions.soft_hard_models import AspectSentimentModel, MemoryNetwork
    from solutions.transformer import Translator

    if isinstance(model, s2s.Seq2Seq):
        attention = model.decoder.attention if model.attention_kind else None
        if isinstance(attention, s2s.AdditiveAttention):
            attention_dim = attention.w_h.out_features
        elif attention is not None and attention.kind == "concat":
            attention_dim = attention.w_a.out_features
        else:  # unused by "dot", "general" and the plain model
            attention_dim = s2s.DEFAULT_CONFIG.attention_dim
        return {
            "class": "Seq2Seq",
            "attention": model.attention_kind,
            "embed_dim": model.encoder.embedding.embedding_dim,
            "hidden_dim": model.encoder.rnn.hidden_size,
            "attention_dim": attention_dim,
        }
    if isinstance(model, TinyTransformer):
        block = model.blocks[0]
        return {
            "class": "TinyTransformer",
            "vocab_size": model.embed.num_embeddings,
            "d_model": model.embed.embedding_dim,
            "num_heads": block.attn.num_heads,
            "num_layers": len(model.blocks),
            "d_ff": block.ff[0].out_features,
            "max_len": model.max_len,
        }
    if isinstance(model, Translator):
        core = model.core
        return {
            "class": "Translator",
            "src_vocab": model.src_embed.num_embeddings,
            "tgt_vocab": model.tgt_embed.num_embeddings,
            "d_model": model.d_model,
            "num_heads": core.encoder[0].attn.num_heads,
            "num_layers": len(core.encoder),
            "d_ff": core.encoder[0].ff[0].out_features,
            "norm_first": core.encoder[0].norm_first,
            "max_len": model.max_len,
            "num_decoder_layers": len(core.decoder),
            "source_positions": model.source_positions,
        }
    if isinstance(model, AspectSentimentModel):
        return {
            "class": "AspectSentimentModel",
            "vocab_size": model.embed.num_embeddings,
            "num_aspects": model.query.num_embeddings,
            "d_model": model.embed.embedding_dim,
        }
    if isinstance(model, MemoryNetwork):
        return {
            "class": "MemoryNetwork",
            "vocab_size": model.embeds[0].num_embeddings,
            "num_answers": model.answer.out_features,
            "d_model": model.embeds[0].embedding_dim,
            "hops": len(model.embeds) - 1,
        }
    raise TypeError(f"no model of type {type(model).__name__} can be rebuilt")


def load_model(arguments: dict, state_dict):
    """An empty model built from ``constructor_arguments`` with ``state_dict`` loaded,
    in eval mode."""
    from solutions import seq2seq as s2s
    from solutions.multihead import TinyTransformer
    from solutions.soft_hard_models import AspectSentimentModel, MemoryNetwork
    from solutions.transformer import Translator

    kwargs = dict(arguments)
    cls = {
        "Seq2Seq": s2s.Seq2Seq,
        "TinyTransformer": TinyTransformer,
        "Translator": Translator,
        "AspectSentimentModel": AspectSentimentModel,
        "MemoryNetwork": MemoryNetwork,
    }[kwargs.pop("class")]
    model = cls(**kwargs)
    # in the dtype the parameters were saved in, whatever torch's default dtype is now
    # (a float64 default would build a float64 model around float32 weights)
    dtypes = {v.dtype for v in state_dict.values() if v.is_floating_point()}
    if len(dtypes) == 1:
        model = model.to(dtype=dtypes.pop())
    model.load_state_dict(state_dict)
    return model.eval()


# --------------------------------------------------------------------------------------
# the files: parameters and history in one .npz, written byte for byte the same way
# every time (fixed entry order and dates), so that the sha256 is the weights' own

_PARAMETER, _HISTORY = "parameter/", "history/"


def _history_arrays(history: dict) -> dict[str, np.ndarray]:
    arrays = {}
    for key, value in history.items():
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"history[{key!r}] is not a number or an array of numbers")
        arrays[key] = array
    return arrays


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(arrays):
            entry = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            data = io.BytesIO()
            # np.asarray keeps a 0-d array 0-d (np.ascontiguousarray makes it 1-d)
            np.lib.format.write_array(data, np.asarray(arrays[name], order="C"))
            archive.writestr(entry, data.getvalue())
    return buffer.getvalue()


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _trained_on() -> dict:
    import os
    import platform

    return {
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "machine": platform.machine(),
    }


def save(name: str, model, history: dict, directory: Path = WEIGHTS) -> dict:
    """Write ``<directory>/<name>.npz`` and return its manifest entry (the caller
    writes the manifest)."""
    arrays = {
        _PARAMETER + key: value.detach().cpu().numpy()
        for key, value in model.state_dict().items()
    }
    arrays.update(
        {_HISTORY + key: value for key, value in _history_arrays(history).items()}
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.npz"
    path.write_bytes(_npz_bytes(arrays))
    recipe = RECIPES[name]
    return {
        "file": path.name,
        "sha256": sha256(path),
        "chapter": recipe.chapter,
        "recipe": {"trainer": recipe.trainer, "arguments": recipe.arguments},
        "model": constructor_arguments(model),
        "trained_on": _trained_on(),
    }


def read_manifest(path: Path = MANIFEST) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_manifest(entries: dict, path: Path = MANIFEST) -> None:
    text = json.dumps(dict(sorted(entries.items())), indent=2, sort_keys=True)
    Path(path).write_text(text + "\n", encoding="utf-8")


def _history(arrays: dict[str, np.ndarray]) -> dict:
    history = {}
    for key, array in arrays.items():
        history[key] = array.item() if array.ndim == 0 else array.tolist()
    return history


def load(name: str, directory: Path = WEIGHTS):
    """-> ``(model, history)``: the shipped model ``name`` in eval mode, and the history
    of the training run that made it (as its trainer returned it: lists and numbers).

    Raises ``ShippedWeightsError`` when the file is missing or its sha256 is not the
    manifest's (``make models`` writes both)."""
    entries = read_manifest(directory / MANIFEST.name)
    if name not in entries:
        raise ShippedWeightsError(
            f"no shipped model named {name!r}; the manifest has {sorted(entries)}"
        )
    entry = entries[name]
    path = directory / entry["file"]
    if not path.is_file():
        raise ShippedWeightsError(f"{path} is missing: run `make models` to retrain it")
    if sha256(path) != entry["sha256"]:
        raise ShippedWeightsError(
            f"{path} is not the file the manifest names (sha256 differs): restore it "
            "from the repository, or run `make models` to retrain every model and "
            "rewrite the manifest"
        )
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    state = {
        key[len(_PARAMETER) :]: torch.from_numpy(value.copy())
        for key, value in arrays.items()
        if key.startswith(_PARAMETER)
    }
    history = _history(
        {k[len(_HISTORY) :]: v for k, v in arrays.items() if k.startswith(_HISTORY)}
    )
    return load_model(entry["model"], state), history

"""The decisions the loader asks an entry class for, each through a named classmethod hook, and the
default it takes where the class does not answer.

A hook is a classmethod `hook(cfg: ArchConfig)` named in LOADER_HOOKS. The decoder's shared bases
answer none, so an entry class answers exactly the hooks it or its family's classes define. The
defaults are a plain Llama checkpoint's layout with nothing fused: a class that forgets a hook its
family answers is laid out otherwise than its family (a Qwen2 without its q/k/v biases, a Qwen3
without its q/k norms), which is why a draft must answer every hook its target answers
(tests/test_draft_entry_hook_parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_layout import TensorSpec, WeightLayout, layout_tensors


@dataclass(frozen=True)
class FusedProjections:
    """Which per-layer projection groups run as one matmul over their concatenated matrix, packed
    once at load; an unfused group runs one matmul per checkpoint projection."""

    qkv: bool
    gate_up: bool


@dataclass(frozen=True)
class LoaderDecisions:
    """The loader's decisions for one entry class under one config; each field is the answer to the
    hook of its name."""

    weight_layout: WeightLayout  # per-layer biases and q/k norms
    fused_projections: FusedProjections
    tied_embeddings: bool  # the LM head is the embedding matrix
    expected_tensors: tuple[TensorSpec, ...]  # every tensor the checkpoint must hold, checked before reading


# The hooks are the decisions' names, so a decision cannot be added without its hook.
LOADER_HOOKS: tuple[str, ...] = tuple(field.name for field in fields(LoaderDecisions))


def default_weight_layout(cfg: ArchConfig) -> WeightLayout:
    """The config's attention and MLP biases, no q/k norms."""
    return WeightLayout(qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, mlp_bias=cfg.mlp_bias, qk_norm=False)


def default_fused_projections(cfg: ArchConfig) -> FusedProjections:
    """Nothing fused: one matmul per checkpoint projection, as the checkpoint stores them."""
    return FusedProjections(qkv=False, gate_up=False)


def default_tied_embeddings(cfg: ArchConfig) -> bool:
    """What the config says (tie_word_embeddings)."""
    return cfg.tie_word_embeddings


def default_expected_tensors(cfg: ArchConfig, layout: WeightLayout, tied_embeddings: bool) -> tuple[TensorSpec, ...]:
    """Every tensor the class's own layout and tying decisions read."""
    return layout_tensors(cfg, layout, tied_embeddings)


def _answer(entry: type, hook: str, cfg: ArchConfig) -> object:
    """`entry`'s answer to `hook` under `cfg`; None where it does not answer."""
    method = getattr(entry, hook, None)
    return None if method is None else method(cfg)


def _refused(entry: type, hook: str, answer: object, accepted: str) -> TypeError:
    return TypeError(f"{entry.__name__}.{hook} answered {answer!r}; accepted: {accepted}")


def decisions_of(entry: type, cfg: ArchConfig) -> LoaderDecisions:
    """Ask `entry` every hook under `cfg`, taking the default where it does not answer; an answer of
    the wrong kind raises TypeError naming the class and the hook."""
    layout = _answer(entry, "weight_layout", cfg)
    if layout is None:
        layout = default_weight_layout(cfg)
    elif not isinstance(layout, WeightLayout):
        raise _refused(entry, "weight_layout", layout, "a WeightLayout")
    fused = _answer(entry, "fused_projections", cfg)
    if fused is None:
        fused = default_fused_projections(cfg)
    elif not isinstance(fused, FusedProjections):
        raise _refused(entry, "fused_projections", fused, "a FusedProjections")
    tied = _answer(entry, "tied_embeddings", cfg)
    if tied is None:
        tied = default_tied_embeddings(cfg)
    elif not isinstance(tied, bool):
        raise _refused(entry, "tied_embeddings", tied, "a bool")
    answered = _answer(entry, "expected_tensors", cfg)
    if answered is None:
        expected = default_expected_tensors(cfg, layout, tied)
    elif isinstance(answered, tuple) and all(isinstance(spec, TensorSpec) for spec in answered):
        expected = answered
    else:
        raise _refused(entry, "expected_tensors", answered, "a tuple of TensorSpec")
    return LoaderDecisions(
        weight_layout=layout, fused_projections=fused, tied_embeddings=tied, expected_tensors=expected
    )

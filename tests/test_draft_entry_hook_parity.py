"""A draft entry class answers the loader exactly where its target does (design: runtime-half §5).

The loader asks the class it instantiates every decision through a hook (runtime_runner.loading.loader_hooks)
and takes a default where the class does not answer. A draft is its own entry class, so a hook its
target's family answers and the draft does not lays the draft's weights out for the default, not
the family (a Qwen2 draft without its q/k/v biases). The invariant is presence parity between each
target entry class and the draft class named after it; identity is not required (a draft may
delegate with adapted arguments). "Answers" means defined on the class or on an ancestor below the
shared bases, which themselves answer nothing (else parity would hold vacuously).

Reverse-verified: with DraftDecoder (models/drafts.py) delegating every hook but `weight_layout`, the
Qwen2 case fails with "Qwen2ForCausalLM -> Qwen2DraftForCausalLM: the draft does not answer
['weight_layout'], which the target answers" (and the Llama and Qwen3 cases alike); restored, it passes.
"""

from __future__ import annotations

import pytest

from runtime_runner.loading.loader_hooks import LOADER_HOOKS
from runtime_runner.models.architectures import DRAFT_CLASSES, MODEL_CLASSES
from runtime_runner.models.decoder import DecoderForCausalLM, TargetDecoder
from runtime_runner.models.drafts import DraftDecoder
from runtime_runner.models.hybrid.decoder import HybridDecoder
from runtime_runner.models.hybrid.drafts import HybridDraftDecoder

SHARED_BASES: tuple[type, ...] = (DecoderForCausalLM, TargetDecoder, DraftDecoder, HybridDecoder, HybridDraftDecoder)


def answered_hooks(entry: type) -> set[str]:
    """The hooks `entry` answers: defined on it or on an ancestor that is not a shared base (nor above one)."""
    family = [k for k in entry.__mro__ if not any(issubclass(base, k) for base in SHARED_BASES)]
    return {hook for hook in LOADER_HOOKS for k in family if hook in vars(k)}


def draft_name_of(target: type) -> str:
    """The name of the draft class named after `target`: `Draft` before `ForCausalLM`."""
    return target.__name__.replace("ForCausalLM", "DraftForCausalLM")


@pytest.mark.parametrize("base", SHARED_BASES, ids=lambda base: base.__name__)
def test_the_shared_bases_answer_no_hook(base: type) -> None:
    assert [hook for hook in LOADER_HOOKS if getattr(base, hook, None) is not None] == []


def test_every_target_has_a_draft_named_after_it() -> None:
    assert sorted(DRAFT_CLASSES) == sorted(MODEL_CLASSES), (
        "every draft is keyed by the target architecture it is named after"
    )
    for architecture, target in MODEL_CLASSES.items():
        draft = DRAFT_CLASSES.get(architecture)
        assert draft is not None, f"{target.__name__} has no draft entry class; expected {draft_name_of(target)}"
        assert draft.__name__ == draft_name_of(target), (
            f"{target.__name__} -> {draft.__name__}: expected {draft_name_of(target)}"
        )
        assert not issubclass(draft, target), (
            f"{target.__name__} -> {draft.__name__}: a draft is its own class, not its target's subclass"
        )


@pytest.mark.parametrize("architecture", sorted(MODEL_CLASSES))
def test_a_draft_answers_every_hook_its_target_answers(architecture: str) -> None:
    target, draft = MODEL_CLASSES[architecture], DRAFT_CLASSES.get(architecture)
    assert draft is not None, f"{target.__name__} has no draft entry class; expected {draft_name_of(target)}"
    assert answered_hooks(target), f"{target.__name__} answers no hook: the walk would hold vacuously"
    pair = f"{target.__name__} -> {draft.__name__}"
    draft_lacks = sorted(answered_hooks(target) - answered_hooks(draft))
    target_lacks = sorted(answered_hooks(draft) - answered_hooks(target))
    assert not draft_lacks, f"{pair}: the draft does not answer {draft_lacks}, which the target answers"
    assert not target_lacks, f"{pair}: the target does not answer {target_lacks}, which the draft answers"

"""spec: speculative decoding."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import NonEmptyStr, PositiveInt, UnitFloat
from config_bags.errors import LeafValueError
from config_bags.leaf import leaf
from config_bags.server.bags.attention_names import AttentionBackendName

SpeculativeAlgorithm = Literal["ngram", "draft_model"]
SpeculativeAttentionMode = Literal["prefill", "decode"]


class SpecBag(Bag, frozen=True, kw_only=True):
    """Speculative decoding: algorithm, draft shape and the draft's attention."""

    speculative_algorithm: Annotated[
        SpeculativeAlgorithm | None, leaf("Speculative decoding algorithm (unset: off).", hot=False)
    ] = None
    speculative_draft_model_path: Annotated[
        NonEmptyStr | None, leaf("Draft checkpoint directory for draft_model speculation.", hot=False)
    ] = None
    speculative_num_steps: Annotated[PositiveInt, leaf("Draft steps per verify.", hot=False)] = 3
    speculative_eagle_topk: Annotated[PositiveInt, leaf("Branching factor of the draft tree per step.", hot=False)] = 1
    speculative_num_draft_tokens: Annotated[
        PositiveInt,
        leaf("Tokens one verify pass computes per request: the last accepted token and the drafts after it.", hot=True),
    ] = 8
    speculative_ngram_min_match_window: Annotated[
        PositiveInt, leaf("Shortest n-gram matched against the context.", hot=True)
    ] = 1
    speculative_ngram_max_match_window: Annotated[
        PositiveInt, leaf("Longest n-gram matched against the context.", hot=True)
    ] = 12
    speculative_adaptive_draft_length: Annotated[
        bool,
        leaf(
            "Each request drafts longer after a full acceptance and shorter after a rejection (off: always the offer).",
            hot=True,
        ),
    ] = True
    speculative_adaptive_window: Annotated[
        PositiveInt, leaf("Verify steps of one request judged together by the adaptive rule.", hot=True)
    ] = 8
    speculative_adaptive_min_accept_rate: Annotated[
        UnitFloat,
        leaf(
            "Fraction of a request's drafts accepted over the window below which it pauses speculating (0: never).",
            hot=True,
        ),
    ] = 0.3
    speculative_adaptive_pause_steps: Annotated[
        PositiveInt, leaf("Decode steps a paused request runs without drafts before it speculates again.", hot=True)
    ] = 32
    speculative_disable_by_batch_size: Annotated[
        PositiveInt | None,
        leaf(
            "A step decoding more requests than this verifies no drafts (unset: no limit; resolved per device).",
            hot=True,
        ),
    ] = None
    speculative_max_drafts_per_step: Annotated[
        PositiveInt | None,
        leaf(
            "Drafts one verify step takes over all its requests, shared evenly (unset: no limit; resolved per device).",
            hot=True,
        ),
    ] = None
    speculative_attention_mode: Annotated[
        SpeculativeAttentionMode, leaf("Which attention half serves the verify pass.", hot=False)
    ] = "prefill"
    speculative_draft_attention_backend: Annotated[
        AttentionBackendName | None,
        leaf("Attention backend of the draft runner (unset: the target's pair).", hot=False),
    ] = None

    def check_leaves_together(self) -> None:
        if self.speculative_ngram_min_match_window > self.speculative_ngram_max_match_window:
            raise LeafValueError(
                f"SpecBag.speculative_ngram_min_match_window = {self.speculative_ngram_min_match_window} requires "
                "speculative_ngram_min_match_window <= speculative_ngram_max_match_window, "
                f"got speculative_ngram_max_match_window = {self.speculative_ngram_max_match_window}"
            )
        if self.speculative_algorithm is not None and self.speculative_num_draft_tokens < 2:
            raise LeafValueError(
                f"SpecBag.speculative_num_draft_tokens = {self.speculative_num_draft_tokens} leaves no draft in a "
                "verify pass (it counts the last accepted token too); accepted: >= 2 while speculative_algorithm is set"
            )
        if self.speculative_algorithm == "draft_model" and self.speculative_draft_model_path is None:
            raise LeafValueError(
                "SpecBag.speculative_algorithm = 'draft_model' requires speculative_draft_model_path (the draft "
                "checkpoint directory), got none"
            )

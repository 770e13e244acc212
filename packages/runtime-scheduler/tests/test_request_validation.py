"""Malformed requests are refused on construction with a message naming the field and what is accepted."""

import pytest

from runtime_scheduler import Request, SamplingParams, StopConditions


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"min_p": 2.0}, "min_p"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"frequency_penalty": 3.0}, "frequency_penalty"),
        ({"presence_penalty": -3.0}, "presence_penalty"),
        ({"top_logprobs": -1}, "top_logprobs"),
    ],
)
def test_bad_sampling_parameter_is_named(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}=.*accepted: "):
        SamplingParams(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"stop_token_ids": frozenset({-1})}, "stop_token_ids"),
        ({"eos_token_ids": frozenset({-2})}, "eos_token_ids"),
    ],
)
def test_bad_stop_condition_is_named(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}=.*accepted: "):
        StopConditions(**kwargs)  # type: ignore[arg-type]


def test_empty_prompt_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^prompt_ids=\(\) .*accepted: at least one token id"):
        Request(rid="r", prompt_ids=())


def test_negative_token_id_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^prompt_ids=.*accepted: token ids >= 0"):
        Request(rid="r", prompt_ids=(1, -4))


def test_empty_rid_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^rid='' .*accepted: a non-empty string"):
        Request(rid="", prompt_ids=(1,))


def test_defaults_are_greedy_and_accepted() -> None:
    req = Request(rid="r", prompt_ids=(1, 2))
    assert req.sampling.temperature == 0.0
    assert req.stop.max_new_tokens == 128
    assert not req.stop.ignore_eos

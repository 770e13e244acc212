"""The sampler: greedy, temperature, truncation, penalties, seeds and logprobs, vectorized over the
batch; one request whose sampling fails fails alone."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from runtime_runner.sampling.sampler import apply_penalties, row_argmax, sample
from runtime_runner.standalone import Request, Sampling

VOCAB = 12


def _req(
    sampling: Sampling, *, prompt: tuple[int, ...] = (0,), output: tuple[int, ...] = (), sample_it: bool = True
) -> Request:
    return Request("r", 0, 1, (0,), sample_it, sampling, prompt, output)


def _logits(rows: int = 1) -> torch.Tensor:
    return torch.linspace(-2.0, 3.5, VOCAB).repeat(rows, 1)  # token 11 most likely, then 10, 9, ...


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def test_greedy_answers_argmax_with_logprobs() -> None:
    logits = torch.randn(3, VOCAB, generator=_gen())
    reqs = [_req(Sampling(logprobs=True, top_logprobs=3)), _req(Sampling()), _req(Sampling(), sample_it=False)]
    out = sample(logits, reqs, _gen())
    expected = logits.argmax(-1).tolist()
    assert out.token_ids == (expected[0], expected[1], -1)
    logprobs = torch.log_softmax(logits, -1)
    assert out.logprobs[0] == pytest.approx(logprobs[0, expected[0]].item())
    assert out.logprobs[1] is None and out.logprobs[2] is None
    top = out.top_logprobs[0]
    assert top is not None and [t for t, _ in top] == logprobs[0].topk(3).indices.tolist()
    assert [lp for _, lp in top] == pytest.approx(logprobs[0].topk(3).values.tolist())
    assert out.top_logprobs[1] is None and out.top_logprobs[2] is None


def test_row_argmax_picks_the_first_maximum_as_torch_does() -> None:
    """Ties (bf16 logits widened to fp32 tie often), -inf rows, a non-contiguous view and a row
    whose maximum is last: the CPU fast path answers what torch.argmax answers. Reverse-verified:
    taking the last maximum instead (argmax over the reversed row) fails the tie rows."""
    scores = torch.randn(6, 1000, generator=_gen()).bfloat16().float()
    scores[1, [3, 500, 999]] = 50.0
    scores[2] = float("-inf")
    scores[3, -1] = 60.0
    scores[4] = 0.0
    for view in (scores, scores[:, ::2], scores.t().contiguous().t()):
        got = row_argmax(view)
        assert got.dtype == torch.int64
        assert got.tolist() == view.argmax(dim=-1).tolist()
    assert row_argmax(scores)[[1, 4]].tolist() == [3, 0]


def test_temperature_draws_follow_the_softmax() -> None:
    """2,000 unseeded rows in one call: the empirical frequencies match softmax(logits / T)."""
    rows, temp = 2000, 1.5
    out = sample(_logits(rows), [_req(Sampling(temperature=temp))] * rows, _gen())
    freq = torch.bincount(torch.tensor(out.token_ids), minlength=VOCAB).float() / rows
    torch.testing.assert_close(freq, torch.softmax(_logits()[0] / temp, -1), atol=0.035, rtol=0)


def _draws(sampling: Sampling, n: int = 400) -> set[int]:
    reqs = [_req(replace(sampling, seed=s)) for s in range(n)]
    return set(sample(_logits(n), reqs, _gen()).token_ids)


def test_top_k_top_p_min_p_truncate_the_support() -> None:
    """Reverse-verified: removing the top-k term from `drop` lets tokens below 9 through."""
    assert _draws(Sampling(temperature=1.0, top_k=3)) == {9, 10, 11}
    probs = torch.softmax(_logits()[0], -1)
    sorted_probs = probs.sort(descending=True).values
    nucleus = int((sorted_probs.cumsum(0) - sorted_probs < 0.6).sum())
    assert _draws(Sampling(temperature=1.0, top_p=0.6)) == set(range(VOCAB - nucleus, VOCAB))
    kept = int((probs >= 0.3 * probs.max()).sum())
    assert _draws(Sampling(temperature=1.0, min_p=0.3)) == set(range(VOCAB - kept, VOCAB))
    assert len(_draws(Sampling(temperature=1.0))) > 6


def test_same_seed_same_tokens_whatever_the_batch() -> None:
    """Reverse-verified: drawing seeded rows from the shared generator makes the alone/batched tokens differ."""
    seeded = _req(Sampling(temperature=1.0, seed=1234), output=(1, 2))
    alone = sample(_logits(), [seeded], torch.Generator().manual_seed(1)).token_ids[0]
    others = [_req(Sampling(temperature=1.0))] * 5
    for position in range(6):
        batch = others[:position] + [seeded] + others[position:]
        got = sample(_logits(6), batch, torch.Generator().manual_seed(position + 7)).token_ids[position]
        assert got == alone
    steps = {sample(_logits(), [replace(seeded, output_ids=(1,) * n)], _gen()).token_ids[0] for n in range(40)}
    assert len(steps) > 1  # the seed is mixed with the step, so a sequence does not repeat one token


def test_penalties_match_their_definitions() -> None:
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    req = _req(
        Sampling(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25), prompt=(0,), output=(2, 2, 1)
    )
    got = apply_penalties(logits, [req])
    # token 0: prompt only -> repetition; token 1: once in output; token 2: twice; token 3: unseen
    expected = torch.tensor([[2.0 / 2, (-1.0 - 0.5 - 0.25) * 2, (0.5 - 1.0 - 0.25) * 2, 3.0]])
    torch.testing.assert_close(got, expected)
    assert apply_penalties(logits, [_req(Sampling())]) is logits


def test_repetition_penalty_changes_the_greedy_choice() -> None:
    logits = torch.tensor([[1.0, 2.0, 1.9]])
    assert sample(logits, [_req(Sampling(), prompt=(1,))], _gen()).token_ids == (1,)
    assert sample(logits, [_req(Sampling(repetition_penalty=1.5), prompt=(1,))], _gen()).token_ids == (2,)


def test_a_request_whose_sampling_fails_fails_alone_and_the_others_keep_their_tokens() -> None:
    """top_k = 2**63 (past the HTTP bounds) overflows the batch's top-k tensor. That request alone
    gets -1 and the cause; the greedy, seeded and logprob-asking requests around it get what the
    batch without it gives. Reverse-verified: with `sample` answering the vectorized pass alone,
    the whole call raised "Overflow when unpacking long long"."""
    logits = torch.randn(4, VOCAB, generator=_gen())
    good = [
        _req(Sampling(logprobs=True, top_logprobs=2)),
        _req(Sampling(temperature=0.9, seed=11)),
        _req(Sampling(temperature=0.7, top_k=4, seed=5), output=(3,)),
    ]
    bad = _req(Sampling(temperature=1.0, top_k=2**63))
    out = sample(logits, [good[0], bad, good[1], good[2]], _gen())
    assert out.token_ids[1] == -1 and out.logprobs[1] is None and out.top_logprobs[1] is None
    assert out.errors[1] == "request failed while sampling: ValueError: Overflow when unpacking long long"
    without = sample(logits[[0, 2, 3]], good, _gen())
    assert without.errors == (None, None, None)
    kept = [0, 2, 3]
    assert [out.token_ids[i] for i in kept] == list(without.token_ids)
    assert without.logprobs[0] is not None and out.logprobs[0] == pytest.approx(without.logprobs[0])
    top, top_without = out.top_logprobs[0], without.top_logprobs[0]
    assert top is not None and top_without is not None and [t for t, _ in top] == [t for t, _ in top_without]
    assert [lp for _, lp in top] == pytest.approx([lp for _, lp in top_without]) and out.logprobs[2:] == (None, None)
    assert [out.errors[i] for i in kept] == [None, None, None]


def test_a_batch_failure_no_request_has_alone_propagates() -> None:
    """Attribution is real: logits with a row more than the requests fail the batch, yet every
    request samples fine alone, so the batch's error is raised rather than blamed on anyone.
    Reverse-verified: with _each_alone's answer returned even when no request failed, the call
    answered tokens instead of raising."""
    with pytest.raises(ValueError, match="zip"):
        sample(torch.randn(3, VOCAB, generator=_gen()), [_req(Sampling()), _req(Sampling())], _gen())


class _DeviceLostAtTopK:
    """Sampling parameters whose top_k read raises `error`, as a device fault mid-sampling would."""

    def __init__(self, error: BaseException) -> None:
        self._error = error

    def __getattr__(self, name: str) -> object:
        return getattr(Sampling(temperature=1.0), name)

    @property
    def top_k(self) -> int:
        raise self._error


@pytest.mark.parametrize(
    "error",
    [
        torch.OutOfMemoryError("CUDA out of memory"),
        MemoryError("host"),
        RuntimeError("CUDA error: an illegal memory access was encountered"),
    ],
    ids=["torch OOM", "MemoryError", "CUDA error"],
)
def test_a_device_fault_while_sampling_is_never_one_request_s_failure(error: BaseException) -> None:
    """Reverse-verified: without the is_device_fault re-raise in _each_alone, the fault came back
    as the request's error and sampling went on."""
    faulty = Request("r", 0, 1, (0,), True, _DeviceLostAtTopK(error), (0,), ())  # type: ignore[arg-type]
    with pytest.raises(type(error)):
        sample(_logits(2), [_req(Sampling()), faulty], _gen())

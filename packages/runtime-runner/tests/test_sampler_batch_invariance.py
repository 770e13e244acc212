"""A greedy or seeded request samples the same token with the same logprobs alone as in any batch,
at any position, beside any other requests (unseeded sampled ones included): the sampler's ops
(penalties, softmax, sort, cumulative sums, the exponential race, log_softmax, top-k) work row by
row, and a seeded row draws from its own generator, seeded by (seed, tokens generated so far)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_runner.sampling.sampler import sample
from runtime_runner.standalone import Request, Sampling

VOCAB = 3000

SAMPLING = st.builds(
    Sampling,
    temperature=st.sampled_from([0.0, 0.0, 0.5, 1.0, 1.7]),
    top_p=st.sampled_from([1.0, 0.9, 0.3]),
    top_k=st.sampled_from([-1, 1, 5, 40]),
    min_p=st.sampled_from([0.0, 0.05]),
    repetition_penalty=st.sampled_from([1.0, 1.3]),
    frequency_penalty=st.sampled_from([0.0, 0.4]),
    presence_penalty=st.sampled_from([0.0, -0.2]),
    seed=st.one_of(st.none(), st.integers(0, 2**31)),
    logprobs=st.booleans(),
    top_logprobs=st.integers(0, 5),
)
REQUEST = st.builds(
    lambda sampling, prompt, output: Request("r", 0, 1, (0,), True, sampling, tuple(prompt), tuple(output)),
    SAMPLING,
    st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=8),
    st.lists(st.integers(0, VOCAB - 1), max_size=8),
)


def _reproducible(request: Request) -> bool:
    """Greedy or seeded: an unseeded sampled request draws from the shared generator by design."""
    s = request.sampling
    return s.temperature == 0 or s.top_k == 1 or s.seed is not None


@settings(max_examples=40, deadline=None)
@given(requests=st.lists(REQUEST, min_size=1, max_size=24), seed=st.integers(0, 2**16), bf16=st.booleans())
def test_a_reproducible_row_samples_alone_as_in_its_batch(requests: list[Request], seed: int, bf16: bool) -> None:
    """Reverse-verified by hand: drawing a seeded row's noise from the batch's generator (skipping
    its own) fails this test, and so did the top logprobs as `topk(the batch's largest n)[:n]`,
    which picks among tied bf16 logprobs by the batch's n (now a stable sort)."""
    logits = torch.randn(len(requests), VOCAB, generator=torch.Generator().manual_seed(seed)) * 4
    if bf16:  # logits of a bf16 model, widened: many exact ties
        logits = logits.bfloat16().float()
    batch = sample(logits, requests, torch.Generator().manual_seed(1))
    for i, request in enumerate(requests):
        if not _reproducible(request):
            continue
        alone = sample(logits[i : i + 1].clone(), [request], torch.Generator().manual_seed(2))
        got = (batch.token_ids[i], batch.logprobs[i], batch.top_logprobs[i], batch.errors[i])
        assert got == (alone.token_ids[0], alone.logprobs[0], alone.top_logprobs[0], alone.errors[0]), i

"""The seams between the runtime packages fit structurally, as mypy sees them, without any of them
importing another: attn_backends' pair factory is a runtime_runner AttentionPairFactory and the
runner's attention metadata an attn_backends AttentionMetadataView; the runner is the scheduler's
executor and spec-workers' target and draft runner, a draft worker the scheduler's executor and
speculator, serve's grammar engine the scheduler's, and what each package builds (the scheduler's
sampling and grammars, spec-workers' draft batches) is what the others read. The neutral sampling
values the three packages each write down agree."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from runtime_runner.batch import SamplingView
from runtime_runner.standalone import Sampling
from runtime_scheduler.request import SamplingParams
from spec_workers.draft_batch import GREEDY

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
from attn_backends import AttentionMetadataView, build_attention_pair
from runtime_runner.attention_seam import AttentionMetadata, AttentionPairFactory
from runtime_runner.batch import ForwardBatchView
from runtime_runner.standalone import Batch


def wire(metadata: AttentionMetadata, batch: Batch) -> None:
    factory: AttentionPairFactory = build_attention_pair
    view: AttentionMetadataView = metadata
    forwarded: ForwardBatchView = batch
"""


PACKAGE_SEAMS = """
from runtime_runner import ForwardOutput
from runtime_runner.batch import SamplingView, TokenGrammar as RunnerGrammar
from runtime_runner.runner import ModelRunner
from runtime_scheduler.executor import ModelExecutor
from runtime_scheduler.grammar import GrammarEngine, TokenGrammar as SchedulerGrammar
from runtime_scheduler.request import SamplingParams
from runtime_scheduler.speculation import Speculator
from serve.grammar.xgrammar_engine import XGrammarEngine
from spec_workers import DraftModelWorker, NgramWorker
from spec_workers.batch_view import SamplingView as SpecSampling, TokenGrammar as SpecGrammar
from spec_workers.draft_batch import GreedySampling
from spec_workers.draft_model_worker import DraftRunner, TargetRunner


def seams(
    runner: ModelRunner,
    worker: DraftModelWorker[ForwardOutput],
    ngram: NgramWorker,
    engine: XGrammarEngine,
    scheduled: SchedulerGrammar,
    sampling: SamplingParams,
    greedy: GreedySampling,
) -> None:
    executor: ModelExecutor = runner
    target: TargetRunner[ForwardOutput] = runner
    draft: DraftRunner = runner
    speculating_executor: ModelExecutor = worker
    speculator: Speculator = worker
    prompt_lookup: Speculator = ngram
    grammars: GrammarEngine = engine
    runner_grammar: RunnerGrammar = scheduled
    spec_grammar: SpecGrammar = scheduled
    runner_sampling: SamplingView = sampling
    spec_sampling: SpecSampling = sampling
    draft_sampling: SamplingView = greedy
"""


def _mypy_accepts(probe_text: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(probe_text)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout


def test_factory_and_metadata_fit_the_declared_protocols(tmp_path: Path) -> None:
    """Reverse-verified: renaming AttentionMetadata.max_extend_len (or changing attend's keyword `scale`)
    makes mypy reject the probe."""
    _mypy_accepts(PROBE, tmp_path)


def test_what_each_runtime_package_builds_is_what_the_others_read(tmp_path: Path) -> None:
    """Field for field, through the protocols each package declares for itself.

    Reverse-verified: a property added to the runner's RequestView alone made mypy reject the
    runner as the scheduler's executor and as spec-workers' target and draft runner (the batches
    they hand it lack the field); one added to spec-workers' SamplingView alone rejected the
    scheduler's SamplingParams there and the draft worker as the scheduler's executor."""
    _mypy_accepts(PACKAGE_SEAMS, tmp_path)


def test_the_neutral_sampling_values_agree_across_packages() -> None:
    """The scheduler's default SamplingParams, the runner's standalone Sampling and spec-workers'
    greedy draft sampling each write every field the runner reads; they must say the same (greedy,
    every filter and penalty off), or a draft would sample under settings its target does not.

    Reverse-verified: spec-workers' GreedySampling with top_k 0 failed it, naming top_k."""
    read = [name for name in dir(SamplingView) if not name.startswith("_")]
    assert set(read) == {field.name for field in fields(Sampling)}
    for name in read:
        values = {"scheduler": getattr(SamplingParams(), name), "runner": getattr(Sampling(), name)}
        values["spec-workers"] = getattr(GREEDY, name)
        assert len({repr(v) for v in values.values()}) == 1, f"{name}: {values}"

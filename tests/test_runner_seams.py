"""The seams between runner and attention backends fit structurally, as mypy sees them: attn_backends'
pair factory is a runtime_runner AttentionPairFactory, and the runner's attention metadata is an
attn_backends AttentionMetadataView, without either package importing the other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_factory_and_metadata_fit_the_declared_protocols(tmp_path: Path) -> None:
    """Reverse-verified: renaming AttentionMetadata.max_seq_len (or changing attend's keyword `scale`)
    makes mypy reject the probe."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout

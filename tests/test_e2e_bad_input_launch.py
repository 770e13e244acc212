"""End to end, the launch side of the bad-input battery: every bad flag, environment variable and
config file exits 2 with one line naming what was wrong, and a server already running (whose port
one case tries to take) keeps serving with its config unchanged.

The cases run `serve`'s own entry point (`serve.main.main`) in this process, with --dump-config
wherever the input would otherwise launch, so a case that wrongly resolved prints its config
instead of starting a second server; two cases run the real console command in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serve.main import main
from serve_testing.server import ServerProcess, free_port
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-llama"
CONTEXT = 4096


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / MODEL, max_position_embeddings=CONTEXT)


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(model_dir, "--max-total-tokens", "8192", "--device", "cpu")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


# (id, argv after --model-path DIR, what the one line must name)
FLAG_CASES: list[tuple[str, list[str], list[str]]] = [
    ("page size zero", ["--page-size", "0"], ["--page-size", "page_size", "accepted: int >= 1"]),
    ("page size not a number", ["--page-size", "abc"], ["--page-size", "cannot read 'abc'"]),
    (
        "int past 64 bits",
        ["--max-running-requests", "1" + "0" * 30],
        ["--max-running-requests", "<= 9223372036854775807"],
    ),
    ("unknown choice", ["--schedule-policy", "random"], ["schedule_policy", "accepted: one of fcfs, lpm"]),
    ("port out of range", ["--port", "70000"], ["--port", "<= 65535"]),
    ("unknown flag", ["--page-sise", "4"], ["unknown flag --page-sise", "did you mean --page-size"]),
    ("flag without value", ["--page-size"], ["--page-size", "expected one argument"]),
    ("not a boolean", ["--enable-metrics", "maybe"], ["--enable-metrics", "cannot read 'maybe'"]),
    ("empty host", ["--host", ""], ["--host", "host", "length >= 1"]),
    ("queue cap zero", ["--max-queued-requests", "0"], ["max_queued_requests", ">= 1"]),
    (
        "unknown kv dtype",
        ["--kv-cache-dtype", "int8"],
        ["kv_cache_dtype", "accepted: one of auto, float32, bfloat16, float16"],
    ),
    ("chunk of zero", ["--chunked-prefill-size", "0"], ["chunked_prefill_size = 0 is not accepted"]),
    (
        "pipeline parallel",
        ["--pp-size", "2"],
        ["pp_size = 2: this build has no pipeline parallelism; accepted: 1 (the default)", "--pp-size 2"],
    ),
    # The tiny checkpoint: 4 attention heads, 2 KV heads, 128 intermediate rows.
    (
        "heads over tp",
        ["--tp-size", "3"],
        ["num_attention_heads = 4 not divisible by tp_size = 3", "rule tensor_parallel_fits_model", "--tp-size 3"],
    ),
    (
        "ranks over nodes",
        ["--tp-size", "2", "--nnodes", "4", "--dist-init-addr", "10.0.0.1:29500"],
        ["tp_size * pp_size = 2 * 1 = 2 not divisible by nnodes = 4", "rule nodes_divide_ranks"],
    ),
    ("nodes without a rendezvous", ["--tp-size", "2", "--nnodes", "2"], ["nnodes = 2 > 1 requires dist_init_addr"]),
    (
        "rendezvous without a port",
        ["--dist-init-addr", "10.0.0.1"],
        ["dist_init_addr", "accepted: str of the form host:port"],
    ),
    (
        "replicas across nodes",
        ["--tp-size", "2", "--dp-size", "2", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:29500"],
        ["dp_size = 2 with nnodes = 2: data-parallel replicas run on node 0", "rule parallel_as_built"],
    ),
    (
        "quantized weights over ranks",
        ["--tp-size", "2", "--quantization", "int8", "--device", "cpu"],
        ["tp_size = 2 slices dense weight matrices, and quantization = 'int8' keeps them quantized"],
    ),
    (
        "compiled decode over ranks",
        ["--tp-size", "2", "--enable-torch-compile", "--enable-deterministic-inference", "false"],
        ["enable_torch_compile = True compiles a one-process decode step, and tp_size = 2 splits the model"],
    ),
    (
        "speculation off",
        ["--speculative-num-steps", "5"],
        ["speculative_num_steps = 5 configures speculative decoding, which is off"],
    ),
    (
        "draft tree",
        ["--speculative-algorithm", "ngram", "--speculative-eagle-topk", "2", "--page-size", "1"],
        [
            "speculative_eagle_topk = 2 asks for a tree of drafts; this build verifies a chain of drafts, not a tree; "
            "accepted: 1"
        ],
    ),
    (
        "draft leaf under ngram",
        ["--speculative-algorithm", "ngram", "--speculative-num-steps", "5"],
        ["speculative_num_steps = 5 configures a draft model, but speculative_algorithm = 'ngram' has none"],
    ),
    ("draft model without a path", ["--speculative-algorithm", "draft_model"], ["speculative_draft_model_path"]),
    ("cuda graphs", ["--disable-cuda-graph"], ["disable_cuda_graph = True: this build has no CUDA-graph capture"]),
    (
        "two-batch overlap",
        ["--enable-two-batch-overlap", "true"],
        ["enable_two_batch_overlap = True: this build has no two-batch overlap"],
    ),
    (
        "multimodal",
        ["--mm-max-items-per-request", "2"],
        ["mm_max_items_per_request = 2: this build has no multimodal model"],
    ),
    (
        "flashinfer decode",
        ["--decode-attention-backend", "flashinfer", "--device", "cpu"],
        [
            "decode_attention_backend = flashinfer: flashinfer runs on CUDA devices only, not on cpu",
            "use torch_native, cpu_paged or auto",
        ],
    ),
    (
        "unknown attention backend",
        ["--attention-backend", "fa3"],
        ["attention_backend", "accepted: one of auto, torch_native, cpu_paged, triton, flashinfer, intel_amx"],
    ),
    # TRITON_INTERPRET=1 in tests, so triton builds here; the compiled step still refuses it.
    (
        "compiled decode over triton",
        ["--enable-torch-compile", "--decode-attention-backend", "triton"],
        ["enable_torch_compile = True compiles the decode step", "got decode_attention_backend = triton"],
    ),
    (
        "deterministic with SDPA prompts",
        ["--enable-deterministic-inference", "true", "--prefill-attention-backend", "torch_native"],
        [
            "enable_deterministic_inference = True needs batch-invariant attention, but prefill_attention_backend = "
            "torch_native",
            "torch_native is not batch-invariant",
            "rule deterministic_kernels",
        ],
    ),
    (
        "deterministic and compiled",
        ["--enable-deterministic-inference", "true", "--enable-torch-compile"],
        ["enable_deterministic_inference = True runs the decode step eagerly", "enable_torch_compile = True"],
    ),
    (
        "context above the model",
        ["--context-length", "100000"],
        ["context_length = 100000 requires context_length <= the model's maximum", "4096"],
    ),
    (
        "pool under a page",
        ["--max-total-tokens", "8", "--page-size", "16"],
        ["max_total_tokens = 8 requires max_total_tokens >= page_size"],
    ),
    (
        "chunk over the pool",
        ["--max-total-tokens", "1024", "--chunked-prefill-size", "2048"],
        ["chunked_prefill_size = 2048 requires one chunk to fit the KV pool"],
    ),
    (
        "budget over the pool",
        ["--max-total-tokens", "1024", "--max-prefill-tokens", "5000"],
        ["max_prefill_tokens = 5000 requires max_prefill_tokens <= max_total_tokens"],
    ),
    ("decreasing graph sizes", ["--cuda-graph-decode-bs", "4,2"], ["cuda_graph_decode_bs", "strictly increasing"]),
    ("cuda without a device", ["--device", "cuda"], ["device='cuda'", "no CUDA device"]),
    (
        "decoder embeddings in float16",
        ["--task", "embed", "--dtype", "float16"],
        [
            "task = 'embed' runs the decoder's embeddings in float32 or bfloat16, and dtype = 'float16'",
            "rule task_served",
            "--task embed",
        ],
    ),
    (
        "rerank on a decoder",
        ["--task", "rerank"],
        ["task = 'rerank': LlamaForCausalLM is a decoder", "accepted: 'generate' or 'embed'"],
    ),
    ("pooling a generation", ["--pooling", "mean"], ["pooling = 'mean' configures embeddings, and task = 'generate'"]),
    ("unknown task", ["--task", "classify"], ["task", "accepted: one of generate, embed, rerank"]),
    (
        "explain an unknown leaf",
        ["--explain", "page-sise"],
        ["--explain: unknown flag 'page-sise'", "did you mean --page-size"],
    ),
]


@pytest.mark.parametrize(("argv", "needles"), [c[1:] for c in FLAG_CASES], ids=[c[0] for c in FLAG_CASES])
def test_a_bad_flag_exits_2_with_one_line_naming_it(
    argv: list[str], needles: list[str], model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--model-path", str(model_dir), *argv, "--dump-config"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("serve: error: "), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_triton_on_a_cpu_without_its_interpreter_is_refused_naming_the_alternatives(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reverse-verified: with the attention_backends_run_here rule answering nothing, this launch
    resolved and printed its config (exit 0)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert (
        main(
            [
                "--model-path",
                str(model_dir),
                "--prefill-attention-backend",
                "triton",
                "--device",
                "cpu",
                "--dump-config",
            ]
        )
        == 2
    )
    lines = capsys.readouterr().err.strip().splitlines()
    assert (
        len(lines) == 1
        and "prefill_attention_backend = triton: triton runs on a CPU only under TRITON_INTERPRET=1" in lines[0]
    ), lines
    assert "use torch_native, cpu_paged or auto" in lines[0]


def test_a_missing_model_directory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(tmp_path / "nowhere"), "--dump-config"]) == 2
    assert f"model_path {tmp_path / 'nowhere'}" in capsys.readouterr().err


ENV_CASES: list[tuple[str, dict[str, str], list[str]]] = [
    ("negative page size", {"SERVE_PAGE_SIZE": "-1"}, ["SERVE_PAGE_SIZE", "page_size"]),
    ("unknown variable", {"SERVE_PAGESIZE": "4"}, ["unknown environment variable SERVE_PAGESIZE", "SERVE_PAGE_SIZE"]),
    (
        "absent feature",
        {"SERVE_PP_SIZE": "2"},
        ["pp_size = 2: this build has no pipeline parallelism", "SERVE_PP_SIZE"],
    ),
    ("topology", {"SERVE_TP_SIZE": "3"}, ["num_attention_heads = 4 not divisible by tp_size = 3", "SERVE_TP_SIZE"]),
]


@pytest.mark.parametrize(("environ", "needles"), [c[1:] for c in ENV_CASES], ids=[c[0] for c in ENV_CASES])
def test_a_bad_environment_variable_exits_2_naming_it(
    environ: dict[str, str],
    needles: list[str],
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert main(["--model-path", str(model_dir), "--dump-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    for needle in needles:
        assert needle in err[0], err[0]


FILE_CASES: list[tuple[str, str, str, list[str]]] = [
    ("unknown key", "c.yaml", "page-sise: 4\n", ["c.yaml:1", "key 'page-sise'", "did you mean --page-size"]),
    ("bad value", "c.yaml", "max-n: 2\npage-size: -3\n", ["c.yaml:2", "page_size"]),
    (
        "absent feature",
        "c.toml",
        'moe-runner-backend = "triton"\n',
        [
            "moe_runner_backend = 'triton': this build has no mixture-of-experts kernel choice or expert parallelism",
            "c.toml",
        ],
    ),
    ("malformed yaml", "c.yaml", "page-size: [1,\n", ["c.yaml"]),
    ("not a mapping", "c.yaml", "- page-size\n", ["c.yaml"]),
]


@pytest.mark.parametrize(("name", "text", "needles"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_a_bad_config_file_exits_2_naming_the_file_and_line(
    name: str, text: str, needles: list[str], model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert main(["--model-path", str(model_dir), "--config", str(path), "--dump-config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    for needle in needles:
        assert needle in err[0], err[0]


def test_a_missing_config_file_is_named(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(model_dir), "--config", str(tmp_path / "absent.yaml"), "--dump-config"]) == 2
    assert "absent.yaml" in capsys.readouterr().err


def test_a_taken_port_is_found_before_the_model_loads_and_the_server_keeps_serving(
    server: ServerProcess, model_dir: Path
) -> None:
    """The real console command, against the running server's port: one line, exit 2, in well
    under the time a launch takes to load a model; the running server is untouched.
    Reverse-verified: without refuse_a_taken_port in main(), the second launch resolved, started
    its scheduler and loaded the model before uvicorn failed to bind."""
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        before = http.get("/server_info").json()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "serve.main",
                "--model-path",
                str(model_dir),
                "--port",
                str(server.port),
                "--device",
                "cpu",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"port={server.port}" in lines[0] and "choose another with --port" in lines[0], (
            result.stderr
        )
        assert "loading" not in result.stdout
        after = http.get("/server_info").json()
        assert after["config_hashes"] == before["config_hashes"] and after["pids"] == before["pids"]
        answer = http.post(
            "/v1/completions", json={"model": MODEL, "prompt": "Hello", "max_tokens": 3, "temperature": 0}
        )
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] >= 1


def test_the_console_command_turns_an_oversized_flag_into_one_line() -> None:
    """It had printed an 18-line OverflowError traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "serve.main", "--max-running-requests", "1" + "0" * 30, "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "max_running_requests" in lines[0] and "<= 9223372036854775807" in lines[0], (
        result.stderr
    )

"""The command line, the environment and the config file: flags per leaf grouped by bag,
precedence cli > env > file > default, text forms, and one-line refusals with exit code 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config_bags import flag_of, leaf_specs
from config_bags.server import Bags
from serve.main import main
from serve.record import ConfigFileError, LaunchInputError, launch_request
from serve.record.cli import parser

pytestmark = pytest.mark.usefixtures("unpublished")


def test_help_lists_every_leaf_flag_under_its_bag() -> None:
    text = parser().format_help()
    sections = re.split(r"\n(?=[a-z.]+:\n)", text)
    by_title = {s.split(":\n", 1)[0].strip(): s for s in sections}
    for name, spec in leaf_specs(Bags).items():
        assert spec.namespace in by_title, f"no help group for bag {spec.namespace}"
        assert f"{flag_of(name)} " in by_title[spec.namespace], f"{flag_of(name)} is not listed under {spec.namespace}"
    for launch_only in ("--config", "--dump-config", "--explain"):
        assert launch_only in by_title["launch"]


def test_help_shows_what_each_flag_accepts_and_its_default() -> None:
    text = " ".join(parser().format_help().split())
    assert "--schedule-policy {fcfs,lpm}" in text
    assert "[int >= 1 and <= 65535; default 30000; cold]" in text


CONFIG_TEXT = {
    ".yaml": "page-size: 2\nport: 1111\nmax_n: 3\ncuda-graph-decode-bs: [1, 2, 4]\nlog-requests: yes\n",
    ".toml": 'page-size = 2\nport = 1111\nmax_n = 3\ncuda-graph-decode-bs = [1, 2, 4]\nlog-requests = "yes"\n',
}


@pytest.mark.parametrize("suffix", sorted(CONFIG_TEXT))
def test_precedence_is_cli_then_env_then_file_then_default(tmp_path: Path, suffix: str) -> None:
    config = tmp_path / f"launch{suffix}"
    config.write_text(CONFIG_TEXT[suffix])
    request = launch_request(
        ["--config", str(config), "--page-size", "8"],
        {"SERVE_PAGE_SIZE": "4", "SERVE_PORT": "2222", "PATH": "/usr/bin"},
    )
    args = request.server_args
    assert (args.page_size, args.provenance_of("page_size"), args.origin_of("page_size")) == (8, "cli", "--page-size 8")
    assert (args.port, args.provenance_of("port"), args.origin_of("port")) == (2222, "env", "SERVE_PORT")
    assert (args.max_n, args.provenance_of("max_n")) == (3, "file")
    assert args.origin_of("max_n") == f"{config}:3"
    assert (args.cuda_graph_decode_bs, args.log_requests) == ((1, 2, 4), True)
    assert (args.stream_interval, args.provenance_of("stream_interval")) == (1, "default")


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("1", True), ("yes", True), ("false", False), ("0", False), ("no", False)]
)
def test_boolean_words(text: str, value: bool) -> None:
    assert launch_request(["--disable-cuda-graph", text], {}).server_args.disable_cuda_graph is value
    assert launch_request([], {"SERVE_DISABLE_CUDA_GRAPH": text}).server_args.disable_cuda_graph is value


def test_a_bare_boolean_flag_means_true() -> None:
    assert launch_request(["--disable-cuda-graph"], {}).server_args.disable_cuda_graph is True


@pytest.mark.parametrize("text", ["none", "None", ""])
def test_unset_words_clear_an_optional_leaf(text: str) -> None:
    args = launch_request(["--max-total-tokens", text], {"SERVE_MAX_TOTAL_TOKENS": "64"}).server_args
    assert args.max_total_tokens is None and args.provenance_of("max_total_tokens") == "cli"


def test_model_is_the_short_spelling_of_model_path(tmp_path: Path) -> None:
    """`serve --model PATH`, as other servers spell it. Reverse-verified: without the alias the
    parser refuses --model as an unknown flag."""
    args = launch_request(["--model", str(tmp_path)], {}).server_args
    assert args.model_path == str(tmp_path) and args.provenance_of("model_path") == "cli"


def test_tuple_leaves_take_comma_separated_lists() -> None:
    assert launch_request(["--cuda-graph-decode-bs", "1, 2,8"], {}).server_args.cuda_graph_decode_bs == (1, 2, 8)


BAD_ARGV = [
    (["--pagesize", "3"], r"unknown flag --pagesize; did you mean --page-size"),
    (["--page-size", "many"], r"--page-size: page_size: cannot read 'many'; accepted: int >= 1"),
    (["--page-size", "0"], r"--page-size: .*accepted: int >= 1"),
    (["--port", "70000"], r"--port: .*accepted: int >= 1 and <= 65535"),
    (["--schedule-policy", "random"], r"--schedule-policy: .*accepted: one of fcfs, lpm"),
    (["--disable-cuda-graph", "maybe"], r"--disable-cuda-graph: .*accepted: bool"),
    (["--cuda-graph-decode-bs", "1,x"], r"--cuda-graph-decode-bs: .*accepted: list of int >= 1"),
    (["--page-size"], r"--page-size: expected one argument"),
    (["stray"], r"unexpected argument 'stray'"),
    (["--explain", "pagesize"], r"--explain: unknown flag 'pagesize'; did you mean --page-size"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGV)
def test_bad_flags_are_one_line_errors_with_exit_code_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dump-config", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert re.search(message, lines[0]), lines[0]


def test_a_bad_environment_variable_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SERVE_PAGESIZE", "16")
    assert main(["--dump-config"]) == 2
    assert "unknown environment variable SERVE_PAGESIZE; did you mean SERVE_PAGE_SIZE" in capsys.readouterr().err
    monkeypatch.delenv("SERVE_PAGESIZE")
    monkeypatch.setenv("SERVE_PORT", "http")
    assert main(["--dump-config"]) == 2
    assert "SERVE_PORT: port: cannot read 'http'" in capsys.readouterr().err


def test_a_bad_file_key_or_value_names_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("port: 8000\n\npage_sise: 16\n")
    with pytest.raises(
        LaunchInputError, match=rf"{re.escape(str(config))}:3: key 'page_sise': unknown flag .*--page-size"
    ):
        launch_request(["--config", str(config)], {})
    config.write_text("port: 8000\npage_size: -4\n")
    with pytest.raises(LaunchInputError, match=rf"{re.escape(str(config))}:2: page_size: .*accepted: int >= 1"):
        launch_request(["--config", str(config)], {})


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("bad.yaml", "port: 8000\npage_size: 16\nmax_n: [1, 2\n", 4),
        ("bad.toml", "port = 8000\npage_size = 16\nmax_n = = 3\n", 3),
    ],
)
def test_an_unparseable_config_file_names_file_and_line(tmp_path: Path, name: str, text: str, line: int) -> None:
    config = tmp_path / name
    config.write_text(text)
    with pytest.raises(ConfigFileError, match=rf"^{re.escape(str(config))}:{line}: cannot parse"):
        launch_request(["--config", str(config)], {})


def test_config_file_of_unknown_type_or_shape(tmp_path: Path) -> None:
    json_file = tmp_path / "c.json"
    json_file.write_text("{}")
    with pytest.raises(ConfigFileError, match=r"accepted: \.yaml, \.yml, \.toml"):
        launch_request(["--config", str(json_file)], {})
    listing = tmp_path / "c.yml"
    listing.write_text("- page_size\n")
    with pytest.raises(ConfigFileError, match="must be a mapping"):
        launch_request(["--config", str(listing)], {})
    with pytest.raises(ConfigFileError, match="cannot read config file"):
        launch_request(["--config", str(tmp_path / "absent.yaml")], {})

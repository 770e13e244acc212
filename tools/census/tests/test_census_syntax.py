"""Any valid Python 3.8-3.13 file is scanned with its reads on the right lines; an unparseable
one is skipped with a warning naming it."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from census import RecordNames, census_of, census_of_source
from census.downgrade import downgraded
from census.parsing import UnparseableWarning

PY38 = textwrap.dedent(
    """\
    def sizes(server_args, /, *, extra=None):
        if (n := server_args.tp_size) > 1:
            return [n, server_args.pp_size]
        return [server_args.dp_size]
    """
)

# Python 3.12/3.13 syntax that Python 3.11's parser refuses: PEP 695 and PEP 701.
PY312 = textwrap.dedent(
    '''\
    type Sizes[T] = list[T]

    class Runner[T: (int, str), *Ts, **P](Base):
        def describe[U](self, server_args) -> str:
            sa = server_args
            return f"{sa.model_path} {server_args.tokenizer_path!r:>{server_args.port}} {f'{sa.host}'}"

        def multi(self, server_args):
            return f"""
            {server_args.nnodes=}
            {server_args.api_key["k"]}
            """ f"{server_args.max_n}" "tail"
    '''
)


def test_python_38_syntax() -> None:
    census = census_of_source(PY38, "py38.py", RecordNames(), {})
    assert {(r.line, r.leaf, r.shape) for r in census.reads} == {
        (2, "tp_size", "direct"),
        (3, "pp_size", "direct"),
        (4, "dp_size", "direct"),
    }


def test_python_312_syntax_is_scanned_on_the_right_lines() -> None:
    """Reverse-verified: with the fallback to `downgraded()` removed from `parsed_module`, the
    file is skipped with a warning and this test fails."""
    with pytest.raises(SyntaxError):
        ast.parse(PY312)  # this interpreter alone cannot read it
    census = census_of_source(PY312, "py312.py", RecordNames(), {})
    assert census.skipped == []
    assert {(r.line, r.leaf, r.shape, r.function) for r in census.reads} == {
        (6, "model_path", "alias", "Runner.describe"),
        (6, "tokenizer_path", "direct", "Runner.describe"),
        (6, "port", "direct", "Runner.describe"),
        (6, "host", "alias", "Runner.describe"),
        (10, "nnodes", "direct", "Runner.multi"),
        (11, "api_key", "direct", "Runner.multi"),
        (12, "max_n", "direct", "Runner.multi"),
    }


def test_downgrade_keeps_every_line_and_valid_311_code_unchanged_in_meaning() -> None:
    rewritten = downgraded(PY312)
    assert rewritten.count("\n") == PY312.count("\n")
    ast.parse(rewritten)
    assert ast.dump(ast.parse(PY38)) == ast.dump(ast.parse(downgraded(PY38)))


def test_an_unparseable_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("x = server_args.page_size\n")
    (tmp_path / "bad.py").write_text("def f(server_args):\n    return server_args.page_size +\n")
    with pytest.warns(UnparseableWarning, match=r"bad.py:2: skipped, not valid Python 3.8-3.13"):
        census = census_of([tmp_path], RecordNames(), {}, root=tmp_path)
    assert census.skipped == ["bad.py"]
    assert census.files == 2
    assert [(r.path, r.leaf) for r in census.reads] == [("good.py", "page_size")]


def test_a_file_that_never_spells_the_record_is_not_parsed() -> None:
    """It cannot hold a finding; the prefilter is what makes the census faster than parsing."""
    broken_but_unrelated = "def f(:\n"
    assert census_of_source(broken_but_unrelated, "x.py", RecordNames(), {}).skipped == []
    with pytest.warns(UnparseableWarning):
        assert census_of_source(broken_but_unrelated, "x.py", RecordNames(), {}, prefilter=False).skipped == ["x.py"]

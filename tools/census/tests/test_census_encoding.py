"""Files are read as UTF-8 with an optional byte-order mark (editors on Windows write one); a
file that is not UTF-8 is still skipped with a warning naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from census import RecordNames, census_of, census_of_source
from census.cli import main
from census.parsing import UnparseableWarning
from census.scan import read_sources

SOURCE = "def pages(server_args):\n    return server_args.page_size\n"
BOM = b"\xef\xbb\xbf"


def test_a_file_that_starts_with_a_byte_order_mark_is_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mark is dropped as the file is read, so the text the census scans is the code.

    Reverse-verified: with `source_text` reading plain "utf-8", the texts keep the mark and
    this test fails; with `parsed_module`'s `removeprefix` removed as well, both files are
    skipped ("invalid non-printable character U+FEFF")."""
    (tmp_path / "bom.py").write_bytes(BOM + SOURCE.encode("utf-8"))
    (tmp_path / "bom_cookie.py").write_bytes(
        BOM + b"# -*- coding: utf-8 -*-\n" + "# \u00e9t\u00e9\n".encode("utf-8") + SOURCE.encode("utf-8")
    )
    readable, unreadable = read_sources([tmp_path], tmp_path)
    assert unreadable == [] and [f.text.splitlines()[-1] for f in readable] == ["    return server_args.page_size"] * 2
    assert not any(f.text.startswith("\ufeff") for f in readable)
    census = census_of([tmp_path], RecordNames(), {}, root=tmp_path)
    assert census.skipped == []
    assert sorted((r.path, r.line, r.leaf) for r in census.reads) == [
        ("bom.py", 2, "page_size"),
        ("bom_cookie.py", 4, "page_size"),
    ]
    assert main([str(tmp_path), "--root", str(tmp_path), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    assert json.loads(captured.out)["totals"]["reads"] == 2


def test_source_text_that_keeps_the_mark_is_parsed_too() -> None:
    """A caller that decoded the file as plain UTF-8 hands the mark in with the text.

    Reverse-verified: with the `removeprefix` in `parsed_module` removed, the module is skipped
    and this test fails."""
    census = census_of_source("\ufeff" + SOURCE, "bom.py", RecordNames(), {})
    assert census.skipped == []
    assert [(r.line, r.leaf) for r in census.reads] == [(2, "page_size")]


def test_a_file_that_is_not_utf8_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "latin1.py").write_bytes("# caf\u00e9\n".encode("latin-1") + SOURCE.encode("utf-8"))
    with pytest.warns(UnparseableWarning, match=r"latin1.py: skipped, cannot read: 'utf-8' codec"):
        census = census_of([tmp_path], RecordNames(), {}, root=tmp_path)
    assert census.skipped == ["latin1.py"] and census.files == 1 and census.reads == []

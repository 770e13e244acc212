"""The `census` command: JSON and table output, schemas, baselines that ratchet both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from census import SHAPES
from census.cli import main

TREE = Path(__file__).parent / "fixtures" / "serving_tree"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_output_has_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([str(TREE), "--root", str(TREE), "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"reads", "dynamic", "writes", "takers", "parkers", "exposure", "copies", "skipped", "totals"}
    assert set(doc["reads"][0]) == {"path", "line", "function", "leaf", "bag", "shape"}
    assert {r["shape"] for r in doc["reads"]} == set(SHAPES) == {"direct", "alias", "getattr", "parked", "inherited"}
    totals = doc["totals"]
    assert totals["reads"] == len(doc["reads"]) == sum(totals["reads_by_shape"].values())
    assert totals["dynamic"] == len(doc["dynamic"]) == 6
    assert totals["reads_by_folder"] == {"engine": totals["reads"]}
    assert {r["bag"] for r in doc["reads"] if r["leaf"] == "page_size"} == {"schedule"}, "this repo's schema by default"


def test_table_output_names_functions_blind_spots_and_totals(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([str(TREE), "--root", str(TREE)], capsys)
    assert code == 0
    assert "engine/scheduler.py::Scheduler.get_next_batch" in out
    assert "dynamic (blind spots" in out and "getattr(server_args, name)" in out
    assert "engine/overlap_scheduler.py::OverlapScheduler.overlap" in out
    assert out.strip().splitlines()[-1].startswith("totals: 6 files (0 skipped)")


def test_a_schema_from_json_or_module_callable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"page_size": "paging"}))
    _, out, _ = run([str(TREE), "--root", str(TREE), "--format", "json", "--schema", str(schema)], capsys)
    bags = {r["leaf"]: r["bag"] for r in json.loads(out)["reads"]}
    assert bags["page_size"] == "paging" and bags["tp_size"] is None
    _, out, _ = run(
        [str(TREE), "--root", str(TREE), "--format", "json", "--schema", "census.schema:config_bags_schema"], capsys
    )
    assert {r["leaf"]: r["bag"] for r in json.loads(out)["reads"]}["tp_size"] == "parallel"
    code, _, err = run([str(TREE), "--schema", "no_such_module:table"], capsys)
    assert code == 2 and "cannot import the schema" in err


def test_baseline_ratchets_both_ways_one_line_per_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("def f(server_args):\n    return server_args.page_size\n")
    (tree / "b.py").write_text("def g(server_args):\n    return server_args.tp_size + server_args.pp_size\n")
    baseline = tmp_path / "baseline.txt"
    args = [str(tree), "--root", str(tree), "--baseline", str(baseline)]
    assert run([*args, "--update-baseline"], capsys)[0] == 0
    assert baseline.read_text().splitlines()[1:] == ["1 a.py", "2 b.py"]
    assert run(args, capsys)[0] == 0

    (tree / "a.py").write_text("def f(server_args):\n    return server_args.page_size + server_args.dp_size\n")
    code, _, err = run(args, capsys)
    assert code == 1 and "a.py: reads grew from 1 to 2" in err

    (tree / "a.py").write_text("def f(page_size):\n    return page_size\n")
    code, _, err = run(args, capsys)
    assert code == 1 and "a.py: reads dropped from 1 to 0; lower the baseline" in err

    before = baseline.read_text().splitlines()
    run([*args, "--update-baseline"], capsys)
    after = baseline.read_text().splitlines()
    assert [line for line in before if line not in after] == ["1 a.py"] and len(after) == len(before) - 1


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([str(tmp_path / "absent")], capsys)[0] == 2
    assert run([str(TREE), "--update-baseline"], capsys)[0] == 2
    bad = tmp_path / "b.txt"
    bad.write_text("many a.py\n")
    code, _, err = run([str(TREE), "--baseline", str(bad)], capsys)
    assert code == 2 and "expected '<count> <path>'" in err


def test_stats_reports_census_and_parse_speed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([str(TREE), "--stats"], capsys)
    assert code == 0 and "census" in out and "ast.parse alone" in out and "6 files" in out


def test_exclude_leaves_a_subtree_out(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(
        [str(TREE), "--root", str(TREE), "--format", "json", "--exclude", str(TREE / "engine" / "spec_worker.py")],
        capsys,
    )
    doc = json.loads(out)
    assert doc["totals"]["files"] == 5
    assert {r["path"] for r in doc["reads"]} == {
        "engine/model_runner.py",
        "engine/scheduler.py",
        "engine/overlap_scheduler.py",
    }
    assert doc["dynamic"] == [d for d in doc["dynamic"] if d["path"] != "engine/spec_worker.py"]

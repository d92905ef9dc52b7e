"""``python -m gridplan.board DIR --html SITE``: one line per suite and the site's path; exit
2 with a one-line message on a missing folder, a folder without rows or a malformed row."""

from __future__ import annotations

import runpy
import sys

import pytest
from helpers_board import filled_board, make_row

from gridplan.board import Board
from gridplan.board.__main__ import main


def test_the_summary_and_the_site(tmp_path, capsys):
    board = filled_board(tmp_path / "board")
    board.write(make_row("oracle", "quick-b", suite="full"), force=True)
    assert main([str(board.folder), "--html", str(tmp_path / "site")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "full: 3 models, 1 track, 3 rows",
        "quick: 3 models, 2 tracks, 6 rows (1 row of older track versions left out)",
        f"site: {tmp_path / 'site' / 'index.html'}",
    ]
    assert (tmp_path / "site" / "suite-full.html").is_file()


def test_without_html_only_the_summary_is_printed(tmp_path, capsys):
    board = filled_board(tmp_path / "board")
    assert main([str(board.folder)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "quick: 3 models, 2 tracks, 6 rows (1 row of older track versions left out)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board"]


def _row_file(folder, text: str) -> None:
    (folder / "rows").mkdir(parents=True)
    (folder / "rows" / "bad.json").write_text(text)


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda f: None, "no such board folder"),
        (lambda f: f.mkdir(), "the board folder holds no rows"),
        (lambda f: _row_file(f, "[]"), "bad.json: a board row is a JSON object, got list"),
        (lambda f: _row_file(f, '{"schema_version": 9}'), "a board row of schema_version 9"),
    ],
    ids=["missing", "empty", "not-an-object", "version"],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, setup, message):
    folder = tmp_path / "board"
    setup(folder)
    assert main([str(folder), "--html", str(tmp_path / "site")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("gridplan-board: error: ")
    assert message in captured.err
    assert not (tmp_path / "site").exists()


def test_a_site_folder_of_other_files_needs_force(tmp_path, capsys):
    board = filled_board(tmp_path / "board")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "a.txt").write_text("x")
    assert main([str(board.folder), "--html", str(tmp_path / "site")]) == 2
    assert "--force" in capsys.readouterr().err
    assert main([str(board.folder), "--html", str(tmp_path / "site"), "--force"]) == 0


def test_python_dash_m_runs_it(tmp_path, monkeypatch, capsys):
    Board(tmp_path / "board").write(make_row("oracle", "quick-a"))
    monkeypatch.setattr(sys, "argv", ["gridplan-board", str(tmp_path / "board")])
    # As under python -m: the module runs fresh as __main__, not as the imported one.
    monkeypatch.delitem(sys.modules, "gridplan.board.__main__", raising=False)
    with pytest.raises(SystemExit) as done:
        runpy.run_module("gridplan.board", run_name="__main__")
    assert (done.value.code, capsys.readouterr().out) == (0, "quick: 1 model, 1 track, 1 row\n")

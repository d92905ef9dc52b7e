"""The board folder: one file per (model, track hash), incremental, never overwritten
silently, written atomically; a malformed file is named when the rows are read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_board import MODELS, TRACKS, make_row, sha

from gridplan.board import Board, BoardError


def test_a_row_is_named_after_its_model_and_track(tmp_path):
    board = Board(tmp_path)
    row = make_row("oracle", "quick-a")
    path = board.write(row)
    fp, digest = MODELS["oracle"][1], TRACKS["quick-a"][1]
    assert path == tmp_path / "rows" / f"{fp[:16]}-quick-a-{digest[:12]}.json"
    assert json.loads(path.read_text()) == row
    assert board.rows() == [row]


def test_has_follows_the_rows_written_one_by_one(tmp_path):
    board = Board(tmp_path / "new")
    oracle, digest_a, digest_b = MODELS["oracle"][1], TRACKS["quick-a"][1], TRACKS["quick-b"][1]
    assert not board.has(oracle, digest_a)
    board.write(make_row("oracle", "quick-a"))
    assert board.has(oracle, digest_a)
    assert not board.has(oracle, digest_b)
    assert not board.has(MODELS["mlp-20k"][1], digest_a)
    board.write(make_row("oracle", "quick-b"))
    assert board.has(oracle, digest_b)
    assert [r["track"]["name"] for r in board.rows()] == ["quick-a", "quick-b"]


def test_has_compares_the_whole_fingerprint_not_the_file_names_prefix(tmp_path):
    board = Board(tmp_path)
    board.write(make_row("oracle", "quick-a"))
    fp = MODELS["oracle"][1]
    other = fp[:16] + ("0" if fp[16] != "0" else "1") + fp[17:]
    assert not board.has(other, TRACKS["quick-a"][1])


def test_an_existing_row_is_replaced_only_with_force(tmp_path):
    board = Board(tmp_path)
    path = board.write(make_row("mlp-20k", "quick-a"))
    again = make_row("mlp-20k", "quick-a", values=(0.5, 0.2, 0.05, 0.3))
    with pytest.raises(BoardError, match="already holds the row of model 'mlp-20k' on track "
                                         "'quick-a'; pass force=True"):
        board.write(again)
    assert json.loads(path.read_text())["metrics"]["success"]["value"] == 0.74
    assert board.write(again, force=True) == path
    assert json.loads(path.read_text())["metrics"]["success"]["value"] == 0.5


def test_a_row_of_another_model_under_the_same_file_name_is_never_replaced(tmp_path):
    board = Board(tmp_path)
    path = board.write(make_row("oracle", "quick-a"))
    impostor = make_row("oracle", "quick-a")
    fp = impostor["model"]["fingerprint"]
    impostor["model"]["fingerprint"] = fp[:16] + "f" * 48
    with pytest.raises(BoardError, match="holds another model or track"):
        board.write(impostor, force=True)
    assert json.loads(path.read_text())["model"]["fingerprint"] == fp


def test_an_invalid_row_writes_nothing(tmp_path):
    row = make_row("oracle", "quick-a")
    del row["metrics"]["success"]
    with pytest.raises(BoardError, match="the row to write: metrics: 'success' is a required"):
        Board(tmp_path / "b").write(row)
    assert not (tmp_path / "b").exists()


def test_a_write_that_fails_midway_leaves_the_old_row_whole_and_no_temporary_file(
    tmp_path, monkeypatch
):
    board = Board(tmp_path)
    path = board.write(make_row("oracle", "quick-a"))
    before = path.read_bytes()

    def torn(self, text, *args, **kwargs):
        Path.write_bytes(self, text[: len(text) // 2].encode())
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(OSError, match="disk full"):
        board.write(make_row("oracle", "quick-a", values=(0.1, 0.5, 0.2, 0.9)), force=True)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_malformed_row_file_is_named_when_the_rows_are_read(tmp_path):
    board = Board(tmp_path)
    board.write(make_row("oracle", "quick-a"))
    bad = tmp_path / "rows" / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(BoardError, match=f"{bad}: not a readable JSON row"):
        board.rows()
    bad.write_text(json.dumps({**make_row("oracle", "quick-b"), "schema_version": 2}))
    with pytest.raises(BoardError, match=f"{bad}: a board row of schema_version 2; this "
                                         "gridplan reads schema_version 1"):
        board.rows()


def test_a_row_file_under_another_name_is_refused(tmp_path):
    board = Board(tmp_path)
    path = board.write(make_row("oracle", "quick-a"))
    moved = path.with_name("copy.json")
    path.rename(moved)
    with pytest.raises(BoardError, match=f"{moved}: holds the row of model 'oracle' on track "
                                         f"'quick-a', whose file is {path.name}; rename it"):
        board.rows()


def test_a_missing_folder_and_bad_identities_are_refused(tmp_path):
    with pytest.raises(BoardError, match="no such board folder"):
        Board(tmp_path / "absent").rows()
    assert Board(tmp_path).rows() == []
    with pytest.raises(BoardError, match="a model fingerprint must be 64 lowercase hex"):
        Board(tmp_path).has("abc", sha("t"))
    with pytest.raises(BoardError, match="a track hash must be 64 lowercase hex"):
        Board(tmp_path).has(sha("m"), sha("t").upper())


def test_suites_are_those_the_rows_name(tmp_path):
    board = Board(tmp_path)
    board.write(make_row("oracle", "quick-a"))
    board.write(make_row("oracle", "quick-b", suite="full"))
    assert board.suites() == ["full", "quick"]

"""A board folder: one JSON file per (model, track) row under ``<folder>/rows/``.

The file of a row is named from the model's fingerprint and the track's hash,
``rows/<fingerprint[:16]>-<track name>-<track hash[:12]>.json`` (``Board.row_path``), so a
model is measured once per version of a track and an evaluation that is re-run skips the rows
the folder holds (``Board.has``). A row is written through a temporary file and an atomic
rename (``gridplan.util.files.write_text_atomic``): a reader sees no row or the whole row,
never half of one. An existing row is replaced only when asked (``force=True``); two
processes that write the same new row at once both pass that check, and the last rename wins
(both rows measure the same model on the same track).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gridplan.board.row_schema import BoardError, validate_row
from gridplan.util.files import write_text_atomic

#: The sub-folder of a board folder that holds its rows.
ROWS = "rows"
_SHA256 = re.compile("^[0-9a-f]{64}$")


def _check_sha256(value, what: str) -> str:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise BoardError(f"{what} must be 64 lowercase hex digits (SHA-256), got {value!r}")
    return value


def read_row(path: Path) -> dict:
    """The validated row of the file ``path``.

    Raises:
        BoardError: naming ``path`` if it cannot be read, is not JSON or is not a valid row.
    """
    try:
        row = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BoardError(f"{path}: not a readable JSON row ({err})") from err
    return validate_row(row, path)


class Board:
    """The rows of one board folder (module docstring).

    Args:
        folder: the board folder; ``write`` creates it, the readers need it to exist.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def __repr__(self) -> str:
        return f"Board({str(self.folder)!r})"

    def row_path(self, fingerprint: str, track_name: str, track_hash: str) -> Path:
        """The file of the row of model ``fingerprint`` on track ``track_name``/``track_hash``.

        Raises:
            BoardError: if ``fingerprint`` or ``track_hash`` is not 64 hex digits.
        """
        fp = _check_sha256(fingerprint, "a model fingerprint")
        digest = _check_sha256(track_hash, "a track hash")
        return self.folder / ROWS / f"{fp[:16]}-{track_name}-{digest[:12]}.json"

    def _path_of(self, row: dict) -> Path:
        model, track = row["model"], row["track"]
        return self.row_path(model["fingerprint"], track["name"], track["hash"])

    def has(self, fingerprint: str, track_hash: str) -> bool:
        """Whether the folder holds the row of model ``fingerprint`` on the track of hash
        ``track_hash`` (whatever the track's name).

        Raises:
            BoardError: on a malformed fingerprint or hash, or a malformed matching row file.
        """
        fp = _check_sha256(fingerprint, "a model fingerprint")
        digest = _check_sha256(track_hash, "a track hash")
        for path in (self.folder / ROWS).glob(f"{fp[:16]}-*-{digest[:12]}.json"):
            row = read_row(path)
            if row["model"]["fingerprint"] == fp and row["track"]["hash"] == digest:
                return True
        return False

    def write(self, row: dict, force: bool = False) -> Path:
        """Validate ``row`` and write it to its file (``row_path``) atomically; returns the path.

        Raises:
            BoardError: if ``row`` is not a valid row (nothing is written), or its file exists
                and ``force`` is False, or that file holds another model or track whose
                fingerprint and hash share the file name's prefixes.
        """
        # Imported here: reading a board (gridplan-board) needs neither it nor torch.
        from gridplan.util.jsonio import dumps

        validate_row(row, "the row to write")
        path = self._path_of(row)
        if path.exists():
            held = read_row(path)
            same = (held["model"]["fingerprint"], held["track"]["hash"]) == (
                row["model"]["fingerprint"], row["track"]["hash"])
            if not same:
                raise BoardError(f"{path} holds another model or track with the same prefixes "
                                 "of fingerprint and hash; move it aside")
            if not force:
                raise BoardError(
                    f"{path} already holds the row of model {row['model']['name']!r} on track "
                    f"{row['track']['name']!r}; pass force=True (--force) to replace it"
                )
        return write_text_atomic(path, dumps(row, indent=2) + "\n")

    def rows(self) -> list[dict]:
        """Every row of the folder, validated, in file-name order.

        Raises:
            BoardError: if the folder does not exist, or naming the first file that is not a
                valid row or is not named after its row.
        """
        if not self.folder.is_dir():
            raise BoardError(f"{self.folder}: no such board folder")
        rows = []
        for path in sorted((self.folder / ROWS).glob("*.json")):
            row = read_row(path)
            expected = self._path_of(row)
            if path.name != expected.name:
                raise BoardError(
                    f"{path}: holds the row of model {row['model']['name']!r} on track "
                    f"{row['track']['name']!r}, whose file is {expected.name}; rename it"
                )
            rows.append(row)
        return rows

    def suites(self) -> list[str]:
        """The names of the suites the rows were measured under, sorted.

        Raises:
            BoardError: as ``rows``.
        """
        return sorted({row["suite"] for row in self.rows()})

"""Hand-built leaderboard rows: three models on the two tracks of suite ``quick``, one row of
an older version of track ``quick-a``, and the board folder that holds them."""

from __future__ import annotations

import copy
import hashlib

from gridplan.board import Board


def sha(text: str) -> str:
    """A SHA-256 hex digest standing for a fingerprint or a spec hash."""
    return hashlib.sha256(text.encode()).hexdigest()


SPEC_A = {"task": "A", "world": "default", "depth": 3, "episodes": 200, "seeds": [0, 1]}
SPEC_B = {"task": "B", "world": "default", "depth": 3, "episodes": 200, "seeds": [0, 1]}
#: Track name -> (version, hash, spec) of the newest version.
TRACKS = {"quick-a": (2, sha("quick-a v2"), SPEC_A), "quick-b": (1, sha("quick-b v1"), SPEC_B)}
OLD_A = (1, sha("quick-a v1"), {**SPEC_A, "episodes": 100})
#: Model name -> (kind, fingerprint).
MODELS = {
    "oracle": ("oracle", sha("oracle")),
    "noise(0.35,0.1)": ("controlled", sha("noise 0.35 0.1")),
    "mlp-20k": ("checkpoint", sha("mlp 20k seed 0")),
}
#: (model, track) -> (success, regret, drpe, e_tot); E_tot misranks the noise model and the
#: MLP on quick-a, DRPE agrees with success there.
VALUES = {
    ("oracle", "quick-a"): (0.92, 0.0, 0.0012, 0.21),
    ("noise(0.35,0.1)", "quick-a"): (0.61, 0.14, 0.034, 0.18),
    ("mlp-20k", "quick-a"): (0.74, 0.07, 0.015, 0.29),
    ("oracle", "quick-b"): (0.88, 0.0, 0.0009, 0.2),
    ("noise(0.35,0.1)", "quick-b"): (0.55, 0.19, 0.041, 0.33),
    ("mlp-20k", "quick-b"): (0.7, 0.09, None, 0.27),
}


def make_row(model: str, track: str, values=None, suite: str = "quick", old: bool = False):
    """The row of ``model`` on ``track`` (``VALUES`` unless ``values`` is given); ``old``: on
    the older version of quick-a."""
    success, regret, drpe, e_tot = values or VALUES[(model, track)]
    kind, fp = MODELS[model]
    version, digest, spec = OLD_A if old else TRACKS[track]
    return {
        "schema_version": 1,
        "gridplan_version": "0.2.0",
        "suite": suite,
        "track": {"name": track, "version": version, "hash": digest, "spec": copy.deepcopy(spec)},
        "model": {"name": model, "fingerprint": fp, "kind": kind,
                  "info": {"description": f"{model} on the paper's world", "depth": 3}},
        "metrics": {
            "success": {"value": success, "ci": [round(success - 0.05, 4),
                                                 round(success + 0.05, 4)], "se": 0.025},
            "regret": {"value": regret, "ci": [max(regret - 0.03, 0.0), regret + 0.03]},
            "drpe": {"value": drpe, "ci": None},
            "e_tot": {"value": e_tot, "ci": None},
            "VPE": {"value": 0.5, "ci": [0.4, 0.6]},
        },
        "wall_s": 12.4,
        "created": "2026-12-04T18:00:00+00:00",
        "report": f"reports/{fp[:12]}-{track}.json",
    }


def filled_board(folder) -> Board:
    """A board folder holding every row of ``VALUES``, the older quick-a row of the oracle
    and the full report of the oracle on quick-b (the others' reports are missing)."""
    board = Board(folder)
    for model, track in VALUES:
        board.write(make_row(model, track))
    board.write(make_row("oracle", "quick-a", values=(0.9, 0.0, 0.001, 0.2), old=True))
    report = board.folder / make_row("oracle", "quick-b")["report"]
    report.parent.mkdir(parents=True)
    report.write_text('{"schema_version": "2.0"}\n')
    return board

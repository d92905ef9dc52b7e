"""``python -m eval`` with built-in models: protocol defaults, overrides and the JSON report."""

from __future__ import annotations

import json

import pytest

from eval.cli import build_parser, fill_defaults, main
from gridplan.core.protocols import CONTROLLED, LEARNED


def _protocol(*argv: str):
    args = build_parser().parse_args(list(argv))
    fill_defaults(args)
    return args.protocol


def test_built_in_models_default_to_the_controlled_protocol_and_checkpoints_to_the_learned():
    assert _protocol("--model", "oracle") == CONTROLLED
    assert _protocol() == CONTROLLED
    assert _protocol("--ckpt", "x.ckpt") == LEARNED


def test_protocol_options_override_single_fields_of_the_default():
    p = _protocol("--ckpt", "x.ckpt", "--seeds", "3", "--eval-windows", "50", "--horizon", "5")
    assert p == LEARNED.replace(seeds=(0, 1, 2), n_windows=50, horizon=5)


def test_a_noise_model_is_reported_as_json_with_its_protocol(tmp_path, capsys):
    out = tmp_path / "noise.json"
    args = ["--model", "noise", "--sigma-r", "0.35", "--depth", "1", "--seeds", "2"]
    args += ["--episodes", "2", "--eval-windows", "8", "--horizon", "3", "--no-progress"]
    assert main([*args, "--json", str(out)]) == 0
    assert "success rate" in capsys.readouterr().out
    report = json.loads(out.read_text())
    # The paper's layout (schema 1), in this order: scripts read these keys.
    assert list(report) == [
        *("model", "task", "depth", "seeds", "episodes", "success", "outcomes", "mean_steps"),
        *("device", "E_tot", "DRPE", "profile", "step_profile", "event_audit", "VPE"),
        *("horizon", "n_windows"),
    ]
    assert (report["task"], report["depth"], report["seeds"], report["episodes"]) == (
        "A",
        1,
        [0, 1],
        2,
    )
    assert report["success"]["n"] == 4
    assert sum(report["outcomes"].values()) == 4
    assert (report["horizon"], report["n_windows"]) == (3, 8)
    assert report["model"] == {"name": "noise", "sigma_r": 0.35, "sigma_i": 0.0}
    assert report["DRPE"]["graded"] > 0  # relevant noise errs on the relevant dims
    with pytest.raises(SystemExit):
        main([*args, "--json", str(out)])  # refuses to overwrite without --force
    assert "already exists" in capsys.readouterr().err

"""Checkpoint loading errors name the problem and never pass on unsafe advice."""

from __future__ import annotations

import pickle

import pytest
import torch
from helpers_learned import module_checkpoint, tiny_module

from gridplan.models.learned import load_world_model


class Payload:
    """An arbitrary Python object: a weights-only load must refuse to build it."""


def test_a_shape_mismatch_names_each_parameter_and_both_shapes(tmp_path):
    module = tiny_module(tmp_path)  # hidden [32, 32]
    ckpt = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(ckpt)
    ckpt["gridplan"]["model"]["hidden"] = [64, 32]
    path = tmp_path / "mismatch.ckpt"
    torch.save(ckpt, path)
    with pytest.raises(ValueError) as err:
        load_world_model(path)
    msg = str(err.value)
    assert "weights do not fit the stored architecture" in msg
    # Ensemble-major weights (members, in, out); input 12 state dims + 4 one-hot actions.
    assert "layers.0.weight: checkpoint (1, 16, 32), architecture (1, 16, 64)" in msg
    assert "layers.0.bias: checkpoint (1, 1, 32), architecture (1, 1, 64)" in msg
    assert "layers.2.weight: checkpoint (1, 32, 32), architecture (1, 64, 32)" in msg
    assert "Error(s) in loading state_dict" not in msg


def test_missing_and_unexpected_parameters_are_listed(tmp_path):
    module = tiny_module(tmp_path)
    ckpt = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(ckpt)
    key = next(k for k in ckpt["state_dict"] if k.endswith("bias"))
    ckpt["state_dict"]["net.extra.weight"] = ckpt["state_dict"].pop(key)
    path = tmp_path / "renamed.ckpt"
    torch.save(ckpt, path)
    with pytest.raises(
        ValueError,
        match=r"missing from the checkpoint: .*bias.*; not in the "
        r"architecture: extra\.weight",
    ):
        load_world_model(path)


@pytest.mark.parametrize(
    "payload",
    [{"state_dict": Payload()}, pickle.dumps(Payload(), protocol=4), b"\x00" * 64],
    ids=["torch-file-with-an-object", "plain-pickle", "raw-bytes"],
)
def test_a_file_torch_refuses_gets_no_advice_to_disable_weights_only(tmp_path, payload):
    path = tmp_path / "x.ckpt"
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    else:
        torch.save(payload, path)
    with pytest.raises(ValueError, match="not a readable checkpoint") as err:
        load_world_model(path)
    msg = str(err.value)
    assert "weights_only" not in msg and "will likely succeed" not in msg
    assert "the weights-only loader refused it" in msg


def test_a_good_checkpoint_still_loads(tmp_path):
    path = module_checkpoint(tiny_module(tmp_path), tmp_path / "good.ckpt")
    assert load_world_model(path).metadata["model"]["hidden"] == [32, 32]

"""What a researcher plugging in their own model meets: the plug-in's folder importable (and
nothing leaking between two folders), every optional method documented with its signature in
one place, a wrong signature or a broken latent method named with the file, the method, the
shapes passed and the fix."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import gridplan.models.plugins as plugins
from gridplan.core import tasks
from gridplan.core import world as worlds
from gridplan.models.latent_contract import LatentContractError, check_latent_model
from gridplan.models.latent_reference import PersistenceLatentModel
from gridplan.models.plugins import (
    CheckedLatentModel,
    PluginError,
    build,
    check_contract,
    check_plugin,
    load_factory,
)
from gridplan.models.signatures import METHODS

TASK_A = tasks.get("A")
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "plug-ins.md"


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


SIBLING_PLUGIN = """
    import wm


    def make():
        return wm.VALUE
"""


# 1. the plug-in's own folder ------------------------------------------------------------------


def test_a_plugin_imports_its_sibling_module_without_pythonpath(tmp_path):
    folder = _write(tmp_path / "a", {"wm.py": "VALUE = 1\n", "plugin.py": SIBLING_PLUGIN})
    path_before = list(sys.path)
    assert load_factory(f"{folder / 'plugin.py'}:make")() == 1
    assert sys.path == path_before
    assert "wm" not in sys.modules


def test_the_factory_finds_the_same_sibling_modules_the_file_imported(tmp_path):
    # A checkpoint pickled with a sibling's class unpickles inside the factory.
    plugin = """
        import pickle

        import wm

        SAVED = pickle.dumps(wm.Net(3))


        class Model:
            def __init__(self, facts):
                self.facts = facts

            def predict(self, state, action, generator):
                return state


        def make():
            import wm as again

            net = pickle.loads(SAVED)
            return Model((again is wm, type(net) is wm.Net, net.width))
    """
    net = "class Net:\n    def __init__(self, width):\n        self.width = width\n"
    folder = _write(tmp_path / "a", {"wm.py": net, "plugin.py": plugin})
    model = build(f"{folder / 'plugin.py'}:make", {}, TASK_A, "cpu")
    assert model.facts == (True, True, 3)
    assert "wm" not in sys.modules


def test_two_plugins_in_two_folders_each_get_their_own_sibling(tmp_path):
    a = _write(tmp_path / "a", {"wm.py": "VALUE = 1\n", "plugin.py": SIBLING_PLUGIN})
    b = _write(tmp_path / "b", {"wm.py": "VALUE = 2\n", "plugin.py": SIBLING_PLUGIN})
    first = load_factory(f"{a / 'plugin.py'}:make")
    second = load_factory(f"{b / 'plugin.py'}:make")
    assert (first(), second()) == (1, 2)


def test_a_module_already_imported_under_a_siblings_name_is_set_aside_and_put_back(
    tmp_path, monkeypatch
):
    other = type(sys)("wm")
    other.VALUE = "elsewhere"
    monkeypatch.setitem(sys.modules, "wm", other)
    folder = _write(tmp_path / "a", {"wm.py": "VALUE = 1\n", "plugin.py": SIBLING_PLUGIN})
    assert load_factory(f"{folder / 'plugin.py'}:make")() == 1
    assert sys.modules["wm"] is other


def test_a_sibling_package_is_importable_too(tmp_path):
    folder = _write(
        tmp_path / "a",
        {"plugin.py": "from nets.core import WIDTH\n\n\ndef make():\n    return WIDTH\n"},
    )
    _write(folder / "nets", {"__init__.py": "", "core.py": "WIDTH = 64\n"})
    assert load_factory(f"{folder / 'plugin.py'}:make")() == 64
    assert not any(name == "nets" or name.startswith("nets.") for name in sys.modules)


# 2. every method documented in one place ------------------------------------------------------


@pytest.mark.parametrize("key", sorted(METHODS))
def test_every_method_is_documented_with_its_signature(key):
    method = METHODS[key]
    call = f"{method.name}({', '.join(method.params)})"
    assert call in plugins.__doc__, f"{call} is missing from gridplan.models.plugins"
    assert call in PAGE.read_text(), f"{call} is missing from {PAGE.name}"


def test_the_page_is_in_the_site_navigation():
    assert "how-to/plug-ins.md" in (ROOT / "mkdocs.yml").read_text()


# 2. a wrong signature is a clear error --------------------------------------------------------


class TrueStep:
    def predict(self, state, action, generator):
        return state.clone()


class TwoArgumentReward(TrueStep):
    def predict_reward(self, state, action):
        return torch.zeros(state.shape[0])


def test_a_state_plugin_with_a_wrong_signature_names_the_signature_and_shapes():
    model = plugins.checked(TwoArgumentReward(), "mine.make", "mine.py")
    with pytest.raises(PluginError) as info:
        check_contract(model, TASK_A, "cpu", "mine.make")
    message = str(info.value)
    assert message.startswith(
        "mine.make.predict_reward (from mine.py) (at imagined step 1) has the wrong signature"
    )
    assert "it is predict_reward(state, action)" in message
    assert "calls predict_reward(state, action, next_state) -> (N,) rewards" in message
    assert (
        "this call passed state (8, 12) float32, action (8,) int64, next_state (8, 12) float32"
        in message
    )
    assert "Define it as def predict_reward(self, state, action, next_state): ..." in message


class TwoArgumentLatentReward(PersistenceLatentModel):
    def reward(self, z, action):
        return torch.zeros(z.shape[0])


def test_a_latent_plugin_with_a_wrong_reward_signature_is_a_plugin_error():
    with pytest.raises(PluginError) as info:
        check_plugin(TwoArgumentLatentReward(), TASK_A, "cpu", "wm_plugin.make", "wm_plugin.py")
    message = str(info.value)
    assert message.startswith("wm_plugin.make.reward (from wm_plugin.py) has the wrong signature")
    assert "calls reward(z, action, z_next) -> (N,) finite rewards" in message
    assert "passed z (8, 12) float32, action (8,) int64, z_next (8, 12) float32" in message


def test_a_latent_model_from_python_with_a_wrong_signature_is_a_contract_error():
    message = r"^TwoArgumentLatentReward\.reward has the wrong signature"
    with pytest.raises(LatentContractError, match=message):
        check_latent_model(TwoArgumentLatentReward(), TASK_A.world)


def test_a_raising_latent_method_names_the_file_line_and_shapes(tmp_path):
    folder = _write(
        tmp_path,
        {
            "broken.py": """
                from gridplan.models.latent_reference import PersistenceLatentModel


                class Broken(PersistenceLatentModel):
                    def encode(self, obs):
                        return obs @ obs


                def make(task):
                    return Broken(task.world)
            """
        },
    )
    model = build(f"{folder / 'broken.py'}:make", {}, TASK_A, "cpu")
    with pytest.raises(PluginError) as info:
        check_plugin(model, TASK_A, "cpu", "broken.make", "broken.py")
    message = str(info.value)
    assert message.startswith("broken.make.encode (from broken.py) raised RuntimeError at ")
    assert re.search(r"broken\.py:7 in encode: return obs @ obs", message)
    assert message.endswith("(called with obs (8, 12) float32)")


# 3. the latent contract's boundary errors name the plug-in file -------------------------------


class NarrowEncode(PersistenceLatentModel):
    def encode(self, obs):
        return torch.zeros(obs.shape[0], 3)


class NaNDecode(PersistenceLatentModel):
    def _decode(self, z):
        return torch.full((z.shape[0], 12), float("nan"))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            NarrowEncode(),
            "mine.make.encode (from mine.py) must have shape (8, 12) (rows, latent_dim), got "
            "(8, 3) (called with obs (8, 12) float32); return one latent of latent_dim numbers "
            "per row, or declare latent_dim = 3 if the latent has 3",
        ),
        (
            NaNDecode(),
            "mine.make.decode (from mine.py) holds non-finite values (NaN or inf) in 8 of 8 rows "
            "(first rows [0, 1, 2, 3, 4]) (called with z (8, 12) float32); look for a division "
            "by zero",
        ),
    ],
)
def test_latent_output_errors_name_the_file_method_shapes_and_fix(model, expected):
    with pytest.raises(PluginError) as info:
        check_plugin(model, TASK_A, "cpu", "mine.make", "mine.py")
    assert str(info.value).startswith(expected)


def test_a_latent_plugin_of_another_world_names_the_file_and_the_world_to_pass():
    g16 = worlds.get("g16-k8")
    with pytest.raises(PluginError) as info:
        check_plugin(PersistenceLatentModel(g16), TASK_A, "cpu", "mine.make", "mine.py")
    message = str(info.value)
    assert message.startswith("mine.make (from mine.py) reads observations of world g16-k8")
    assert "but the task is played on default" in message
    assert message.endswith(
        "evaluate it on its own world (--world g16-k8), or set its world attribute to the "
        "world it was trained on"
    )


def test_the_wrapper_shows_exactly_the_optional_methods_the_plugin_has():
    wrapped = CheckedLatentModel(NaNDecode(), "mine.make", "mine.py")
    assert callable(wrapped.decode)
    assert not hasattr(wrapped, "reward") and not hasattr(wrapped, "predict")
    assert (wrapped.obs_kind, wrapped.latent_dim) == ("state", 12)


# the page's worked example is a working plug-in ------------------------------------------------


def _page_blocks() -> dict[str, str]:
    blocks = re.findall(r"```python\n(# (\w+\.py):.*?)```", PAGE.read_text(), re.S)
    return {name: text for text, name in blocks}


def test_the_pages_pixel_model_loads_from_its_folder_and_passes_the_contract(tmp_path):
    blocks = _page_blocks()
    assert set(blocks) == {"wm.py", "plugin.py"}
    folder = tmp_path / "pixel_model"
    folder.mkdir()
    for name, text in blocks.items():
        (folder / name).write_text(text)
    g16 = tasks.get("A", world="g16-k8")
    model = build(f"{folder / 'plugin.py'}:make", {"world": "g16-k8"}, g16, "cpu")
    checked = check_plugin(model, g16, "cpu", "plugin.make", "plugin.py")
    assert isinstance(checked, CheckedLatentModel)
    assert checked.world == g16.world and checked.obs_kind == "pixels"


def test_the_eval_cli_names_the_file_of_a_latent_plugin_of_another_world(tmp_path, capsys):
    from eval.cli import main

    folder = _write(
        tmp_path,
        {
            "default_world.py": """
                from gridplan.models.latent_reference import PersistenceLatentModel


                def make():
                    return PersistenceLatentModel()
            """
        },
    )
    out = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["--model", f"{folder / 'default_world.py'}:make", "--world", "g16-k8",
              "--levels", "L1", "--json", str(out), "--no-progress"])  # fmt: skip
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    source = folder / "default_world.py"
    assert f"error: default_world.make (from {source}) reads observations of world default" in err
    assert "evaluate it on its own world (--world default)" in err
    assert not out.exists()

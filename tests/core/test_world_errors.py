"""Bad worlds are refused with a clear error and nothing written: unknown names at every entry
point, worlds too large for exact V*, models, windows and datasets of another world."""

from __future__ import annotations

import pytest
from helpers_learned import debug_overrides

from gridplan.core import tasks
from gridplan.core import values as values_module
from gridplan.core import world as worlds
from gridplan.core.tasks import TASK_A
from gridplan.core.values import MAX_VALUE_BYTES, check_table_memory, table_size, value_table
from gridplan.data.datasets import collect, eval_windows
from gridplan.metrics.prediction import prediction_metrics
from gridplan.models.contract import check_model_world
from gridplan.models.learned import LearnedWorldModel, MLPDynamics
from gridplan.models.noise import OracleModel
from gridplan.planning.planner import Planner

G16 = worlds.get("g16-k8")
UNKNOWN = "unknown world 'bogus'; registered worlds are default, g16-k8, g32-k64"


def _files(root) -> list:
    return sorted(p for p in root.rglob("*") if p.is_file())


# --- unknown names ----------------------------------------------------------------------------


def test_train_refuses_an_unknown_world_and_writes_nothing(tmp_path, capsys):
    from train.__main__ import main

    assert main([*debug_overrides(tmp_path), "world=bogus"]) == 2
    assert UNKNOWN in capsys.readouterr().err
    assert _files(tmp_path) == []


def test_eval_refuses_an_unknown_world(tmp_path, capsys):
    from eval.cli import main

    out = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["--world", "bogus", "--json", str(out), "--no-progress", "--seeds", "1"])
    assert exit_info.value.code == 2
    assert UNKNOWN in capsys.readouterr().err
    assert _files(tmp_path) == []


def test_tasks_get_refuses_an_unknown_world():
    with pytest.raises(ValueError, match=UNKNOWN):
        tasks.get("A", world="bogus")
    with pytest.raises(ValueError, match=UNKNOWN):
        tasks.get("B", world="bogus")


# --- a world too large for exact V* ------------------------------------------------------------


@pytest.mark.parametrize(("name", "task"), [("g128-k2", "A"), ("g96-k2", "B")])
def test_value_iteration_refuses_a_world_too_large_before_allocating(monkeypatch, name, task):
    task = tasks.get(task, world=name)
    need = table_size(task) * 20
    assert need > MAX_VALUE_BYTES  # 20 GiB and 10.5 GiB of working memory
    with pytest.raises(ValueError, match=r"too large for exact V\*.*the limit is 8\.0 GiB"):
        check_table_memory(task)

    def allocates(*_):
        raise AssertionError("value iteration allocated before checking the memory limit")

    monkeypatch.setattr(values_module, "_cells", allocates)
    with pytest.raises(
        ValueError,
        match=rf"world '{name}' \({task.world.size}x{task.world.size}\)"
        r" is too large for exact V\*.*MAX_VALUE_BYTES",
    ):
        value_table(task)


def test_the_memory_limit_is_the_one_given_and_the_largest_registered_world_fits():
    big_b = tasks.get("B", world="g32-k64")
    assert check_table_memory(big_b) == table_size(big_b) * 20 == 32**4 * 8 * 20
    with pytest.raises(ValueError, match=r"the limit is 0\.1 GiB"):
        check_table_memory(big_b, limit=2**30 // 10)
    # g80 fits the V* limit (3.1 GiB) but not the planner's table index: both refuse up front.
    assert check_table_memory(tasks.get("A", world="g80-k2")) < MAX_VALUE_BYTES


def test_eval_refuses_a_world_too_large_and_writes_nothing(tmp_path, capsys):
    from eval.cli import main

    out = tmp_path / "report.json"
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "--world",
                "g128-k2",
                "--model",
                "oracle",
                "--json",
                str(out),
                "--no-progress",
                "--seeds",
                "1",
                "--episodes",
                "1",
            ]
        )
    assert exit_info.value.code == 2
    assert "world 'g128-k2'" in capsys.readouterr().err
    assert _files(tmp_path) == []


def test_train_refuses_a_world_too_large_and_writes_nothing(tmp_path, capsys):
    from train.__main__ import main

    assert main([*debug_overrides(tmp_path), "world=g128-k2"]) == 2
    err = capsys.readouterr().err
    assert "world 'g128-k2' (128x128) is too large for exact V*" in err
    assert "the limit is 8.0 GiB" in err
    assert _files(tmp_path) == []


# --- a model of another world ------------------------------------------------------------------


@pytest.fixture(scope="module")
def g16_model() -> LearnedWorldModel:
    return LearnedWorldModel(MLPDynamics(hidden=(8,), state_dim=24), world=G16)


def test_a_learned_model_must_match_its_worlds_width():
    with pytest.raises(ValueError, match="predicts 12 dims from 4 actions, world 'g16-k8' has 24"):
        LearnedWorldModel(MLPDynamics(hidden=(8,)), world=G16)


def test_a_model_of_another_world_is_refused_naming_both(g16_model):
    both = r"predicts world g16-k8 \(16x16, S=24.*played on default \(8x8, S=12.*--world g16-k8"
    with pytest.raises(ValueError, match=both):
        check_model_world(g16_model, worlds.DEFAULT)
    check_model_world(g16_model, G16)
    with pytest.raises(ValueError, match=both):
        Planner(g16_model, 2, TASK_A)
    with pytest.raises(ValueError, match="predicts world g32-k64"):
        Planner(OracleModel(world=worlds.get("g32-k64")), 2, TASK_A)
    Planner(g16_model, 2, tasks.get("A", world=G16))


def test_evaluate_refuses_a_model_of_another_world(g16_model):
    from gridplan.evaluation.ladder import evaluate

    with pytest.raises(ValueError, match=r"spec 'quick-a' is on world default, but the model "
                                         r"predicts g16-k8"):
        evaluate(g16_model, "quick-a", depth=1, levels=["L1"])


# --- windows and datasets of another world -------------------------------------------------------


@pytest.fixture(scope="module")
def g16_windows():
    return eval_windows(4, horizon=3, task=tasks.get("A", world=G16))


def test_prediction_metrics_refuses_windows_of_another_world(g16_windows, g16_model):
    assert g16_windows.world == G16 and g16_windows.start.shape == (4, 24)
    with pytest.raises(
        ValueError, match="windows were logged in world 'g16-k8', the task is played in 'default'"
    ):
        prediction_metrics(OracleModel(), g16_windows, TASK_A)
    default_windows = eval_windows(4, horizon=3)
    with pytest.raises(ValueError, match="predicts world g16-k8"):
        prediction_metrics(g16_model, default_windows, TASK_A)
    (metrics,) = prediction_metrics(OracleModel(world=G16), g16_windows, tasks.get("A", world=G16))
    # The oracle predicts the relevant dims exactly and samples the distractors.
    assert metrics.DRPE == {"binary": 0.0, "graded": 0.0} and metrics.E_tot > 0.0


def test_windows_whose_tensors_disagree_with_their_world_are_refused(g16_windows):
    import dataclasses

    relabelled = dataclasses.replace(
        g16_windows, meta={**g16_windows.meta, "world": worlds.DEFAULT.spec()}
    )
    with pytest.raises(ValueError, match=r"12|default"):
        relabelled.check()


def test_a_dataset_records_its_world_and_refuses_another_width():
    import dataclasses

    data = collect("random", 50, 0, tasks.get("A", world=G16))
    assert data.world == G16 and data.meta["world"] == G16.spec()
    with pytest.raises(ValueError, match=r"\(N, 12\) \(world 'default'\)"):
        dataclasses.replace(data, meta={**data.meta, "world": worlds.DEFAULT.spec()})

"""Config composition, override errors, sweeps and the ``python -m train`` entry point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers_learned import debug_overrides
from hydra._internal.utils import get_args_parser
from omegaconf import OmegaConf

from gridplan.models.learned import load_world_model
from gridplan.training.config import DEFAULT_CONFIG_DIR, compose, run_name
from train.__main__ import _search, main
from train.sweep import plan


def test_defaults_train_uniform_on_20k_balanced_transitions():
    cfg = compose([])
    assert (cfg.variant.name, cfg.data.name, cfg.model.name, cfg.trainer.name) == (
        "uniform",
        "20k",
        "mlp",
        "default",
    )
    assert (cfg.data.budget, cfg.data.policy, cfg.seed, cfg.out_dir) == (
        "20k",
        "balanced",
        0,
        "runs",
    )
    assert cfg.trainer.accelerator == "auto"


def test_group_choices_and_dotted_overrides_compose():
    cfg = compose(["variant=event_weighted", "data=12k", "data.policy=random", "seed=3"])
    assert cfg.variant.event_weight == 10.0
    assert (cfg.data.budget, cfg.data.policy) == ("12k", "random")
    assert cfg.data.seed == 3  # the data seed follows the run seed
    assert compose(["seed=3", "data.seed=7"]).data.seed == 7


def test_list_override_replaces_the_hidden_widths():
    assert list(compose(["model.hidden=[64,32,16]"]).model.hidden) == [64, 32, 16]


def test_experiment_preset_sets_groups_and_values_and_the_command_line_wins():
    cfg = compose(["experiment=random_12k"])
    assert (cfg.data.budget, cfg.data.policy, cfg.experiment) == ("12k", "random", "random_12k")
    cfg = compose(["experiment=random_12k", "data=4k"])
    assert (cfg.data.budget, cfg.data.policy) == ("4k", "random")


@pytest.mark.parametrize(
    "override, message",
    [
        # Hydra's messages where they name the valid choices ...
        (
            "variant=heavy",
            "Could not find 'variant/heavy'\n\nAvailable options in 'variant':\n"
            "\tanti_weighted\n\tevent_weighted\n\trel_heavy\n\trel_only\n\trollout\n\tuniform",
        ),
        ("data=8k", "Available options in 'data':\n\t12k\n\t20k\n\t4k"),
        (
            "experiment=nope",
            "Available options in 'experiment':\n\tpaper_error_scale\n\trandom_12k",
        ),
        ("trainer.max_epochs=many", "'many' of type 'str' could not be converted to Integer"),
        ("seed", "Error parsing override 'seed'"),
        ("seed=0,1", "To sweep over it, add --multirun"),
        # ... with the valid keys added where Hydra names the unknown key only ...
        (
            "epochs=3",
            "Key 'epochs' not in 'Config'; valid keys of the config: variant, data, model, obs, "
            "trainer, train, logger, experiment, world, seed, out_dir, name, threads",
        ),
        ("trainer.epochs=3", "not in 'TrainerConfig'; valid keys of trainer: name, max_epochs,"),
        ("+trainer.foo=1", "unknown config key 'trainer.foo'; valid keys of trainer: name,"),
        # ... and each dataclass's own checks (__post_init__).
        ("data.policy=greedy", "unknown data.policy 'greedy'; valid: random, balanced, expert"),
        ("trainer.monitor=val/acc", "unknown trainer.monitor 'val/acc'; valid: val/loss"),
        ("variant.irrelevant_weight=-1", "variant.irrelevant_weight must be a finite number"),
        ("data.budget=lots", "budget must be a transition count"),
        ("seed=-1", "seed must lie in 0..2"),
        ("trainer.accelerator=tpu9", "unknown trainer.accelerator 'tpu9'; valid: auto, cpu"),
        ("threads=0", "threads"),
    ],
)
def test_bad_overrides_are_errors_that_name_the_valid_choices(override, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        compose([override])


def test_a_key_given_twice_takes_the_last_value_as_hydra_does():
    assert compose(["seed=1", "seed=2"]).seed == 2
    assert compose(["trainer=debug", "trainer=default"]).trainer.max_epochs == 100


def test_a_group_file_without_its_name_is_refused(tmp_path):
    (tmp_path / "variant").mkdir()
    (tmp_path / "variant" / "nameless.yaml").write_text("relevant_weight: 2.0\n")
    with pytest.raises(ValueError, match="missing mandatory value: name"):
        compose([f"hydra.searchpath=[file://{tmp_path}]", "variant=nameless"])


def _user_configs(folder: Path) -> Path:
    """A config folder outside the repository: a variant and an experiment preset of its own."""
    (folder / "variant").mkdir(parents=True)
    (folder / "variant" / "mine.yaml").write_text("name: mine\nrelevant_weight: 3.0\n")
    (folder / "experiment").mkdir()
    (folder / "experiment" / "my_preset.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /variant: mine\n  - override /data: 4k\n"
        "experiment: my_preset\nseed: 5\n"
    )
    return folder


def test_a_config_folder_outside_the_repository_joins_the_search_path(tmp_path):
    folder = _user_configs(tmp_path / "elsewhere")
    cfg = compose([f"hydra.searchpath=[file://{folder}]", "experiment=my_preset"])
    assert (cfg.variant.name, cfg.variant.relevant_weight, cfg.data.budget, cfg.seed) == (
        "mine",
        3.0,
        "4k",
        5,
    )
    assert cfg.experiment == "my_preset" and run_name(cfg) == "mine-balanced-4k-seed5"
    with pytest.raises(ValueError, match="Could not find 'variant/mine'"):
        compose(["variant=mine"])


def test_cli_config_dir_composes_a_user_config_and_cfg_job_shows_it(tmp_path, capsys):
    folder = _user_configs(tmp_path / "elsewhere")
    assert main(["--config-dir", str(folder), "variant=mine", "--cfg", "job"]) == 0
    shown = OmegaConf.create(capsys.readouterr().out)
    assert (shown.variant.name, shown.variant.relevant_weight) == ("mine", 3.0)
    added = ["--config-dir", str(folder), "variant=mine", "+trainer.foo=1"]
    assert main([*added, "--cfg", "job"]) == 2
    assert "unknown config key 'trainer.foo'" in capsys.readouterr().err
    assert main(["--config-dir", str(tmp_path / "nowhere"), "--cfg", "job"]) == 2
    assert "nowhere not found" in capsys.readouterr().err
    # --config-dir and hydra.searchpath together: both folders are searched.
    other = tmp_path / "other"
    (other / "data").mkdir(parents=True)
    (other / "data" / "tiny.yaml").write_text("name: tiny\nbudget: 300\n")
    both = ["--config-dir", str(folder), f"hydra.searchpath=[file://{other}]"]
    assert main([*both, "variant=mine", "data=tiny", "--cfg", "job"]) == 0
    shown = OmegaConf.create(capsys.readouterr().out)
    assert (shown.variant.name, shown.data.name, shown.data.budget) == ("mine", "tiny", "300")


def test_run_names_spell_variant_policy_budget_and_seed():
    assert run_name(compose(["variant=rel_only", "data=12k", "seed=4"])) == (
        "rel_only-balanced-12k-seed4"
    )
    assert run_name(compose(["data.budget=600"])) == "uniform-balanced-600-seed0"
    assert run_name(compose(["name=mine"])) == "mine"


@pytest.mark.slow
def test_cli_sweep_runs_one_after_another_and_ends_with_the_last_checkpoint(tmp_path, capsys):
    # Today's sweep syntax without -m runs as Hydra's multirun; train.vectorize=false runs
    # its points one after another (tests/training/test_sweep.py: the vectorized default).
    assert main([*debug_overrides(tmp_path), "seed=0,1", "train.vectorize=false"]) == 0
    captured = capsys.readouterr()
    assert "note: a sweep runs as: python -m train -m trainer=debug" in captured.err
    assert "as vectorized groups" not in captured.out
    lines = captured.out.strip().splitlines()
    checkpoints = [line.split(": ", 1)[1] for line in lines if line.startswith("checkpoint: ")]
    assert len(checkpoints) == 2
    assert lines[-1] == f"checkpoint: {checkpoints[1]}"
    assert "seed1" in checkpoints[1] and "seed0" in checkpoints[0]
    assert any(line.startswith("  policy: balanced") for line in lines)  # resolved config
    for path in checkpoints:
        assert load_world_model(path).metadata["config"]["trainer"]["name"] == "debug"
        run_dir = Path(path).parents[1]
        assert (run_dir / "config.yaml").is_file()
        assert "seed=" in (run_dir / ".hydra" / "overrides.yaml").read_text()
    # Hydra keeps its sweep record under out_dir and writes nothing in the working directory.
    assert len(list((tmp_path / "runs" / "_sweeps").glob("*/multirun.yaml"))) == 1
    assert not Path("outputs").exists() and not Path("multirun").exists()


def test_cli_checks_every_point_of_a_sweep_before_training(tmp_path, capsys):
    assert main(["-m", *debug_overrides(tmp_path), "variant=uniform,heavy"]) != 0
    assert "Could not find 'variant/heavy'" in capsys.readouterr().err
    assert not list((tmp_path / "runs").glob("*/version_*"))


def test_cli_reports_a_bad_argument_and_trains_nothing(tmp_path, capsys):
    assert main([*debug_overrides(tmp_path), "variant=heavy"]) == 2
    captured = capsys.readouterr()
    assert "error: In 'config': Could not find 'variant/heavy'" in captured.err
    assert "Available options in 'variant':" in captured.err
    assert main(["--no-such-flag"]) == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_cfg_job_prints_the_config_the_run_saves(tmp_path, capsys):
    folder = _user_configs(tmp_path / "elsewhere")
    args = ["--config-dir", str(folder), *debug_overrides(tmp_path), "variant=mine", "seed=2"]
    assert main([*args, "--cfg", "job", "--resolve"]) == 0
    resolved = capsys.readouterr().out
    assert main([*args, "--cfg", "job"]) == 0
    unresolved = capsys.readouterr().out
    assert not (tmp_path / "runs").exists()
    assert main(args) == 0
    run_dir = next((tmp_path / "runs").glob("mine-balanced-600-seed2/version_0"))
    assert resolved == (run_dir / "config.yaml").read_text()
    assert unresolved == (run_dir / ".hydra" / "config.yaml").read_text()
    assert "seed: ${seed}" in unresolved and "  seed: 2" in resolved
    ckpt = load_world_model(run_dir / "checkpoints" / "best.ckpt")
    assert ckpt.metadata["config"]["variant"]["relevant_weight"] == 3.0


def test_cli_help_lists_the_groups_their_choices_and_the_keys(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "python -m train variant=event_weighted data=12k" in out
    assert "variant: anti_weighted, event_weighted, rel_heavy, rel_only, rollout, uniform" in out
    assert "experiment: paper_error_scale, random_12k" in out
    assert "max_epochs: 100" in out and "budget: 20k" in out


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory) -> Path:
    """Best checkpoint of one tiny run made through the train CLI."""
    tmp = tmp_path_factory.mktemp("cli")
    assert main(debug_overrides(tmp)) == 0
    return Path(next((tmp / "runs").glob("*/version_0/checkpoints/best.ckpt")))


def _eval(*args: str) -> int:
    from eval.cli import main as eval_main

    tiny = ["--seeds", "1", "--episodes", "2", "--eval-windows", "8", "--no-progress"]
    return eval_main([*args, *tiny])


def test_eval_scores_a_trained_checkpoint_into_json_and_tensorboard(trained_checkpoint, capsys):
    import json

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert _eval("--ckpt", str(trained_checkpoint)) == 0
    out = capsys.readouterr().out
    assert "success rate" in out and "E_tot" in out and "DRPE" in out
    # The smoke protocol of _eval names its report; best.eval.json stays free.
    assert not trained_checkpoint.with_suffix(".eval.json").exists()
    report = json.loads(trained_checkpoint.with_suffix(".eval.A-d2-s1x2-w8.json").read_text())
    assert report["depth"] == 2 and report["episodes"] == 2
    assert report["model"]["variant"] == "uniform"
    assert {"success", "E_tot", "DRPE", "profile", "event_audit"} <= set(report)
    events = EventAccumulator(str(trained_checkpoint.parents[1]), size_guidance={"images": 0})
    events.Reload()
    assert {"eval/success", "eval/E_tot", "eval/err_dim/carrying"} <= set(events.Tags()["scalars"])
    assert {"eval/profile", "eval/step_profile"} <= set(events.Tags()["images"])


def test_eval_refuses_to_overwrite_a_report_before_evaluating(trained_checkpoint, capsys):
    out = trained_checkpoint.parent / "taken.json"
    out.write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        _eval("--ckpt", str(trained_checkpoint), "--json", str(out))
    assert exit_info.value.code == 2
    assert "already exist" in capsys.readouterr().err
    assert out.read_text() == "{}"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ckpt", "/nonexistent/*.ckpt"], "matches no file"),
        (["--ckpt", "/nonexistent/best.ckpt"], "does not exist"),
        (["--ckpt", "x.ckpt", "--model", "oracle"], "either --model or --ckpt"),
    ],
)
def test_eval_reports_bad_checkpoint_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _eval(*args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_eval_reports_of_another_task_or_depth_go_beside_the_default_one():
    from eval.cli import checkpoint_json_path
    from gridplan.evaluation.spec import LEARNED

    ckpt = Path("runs/x/version_0/checkpoints/best.ckpt")
    assert checkpoint_json_path(ckpt).name == "best.eval.json"
    task_b = LEARNED.replace(task="B", depth=4)
    assert checkpoint_json_path(ckpt, task_b).name == "best.eval.B-d4.json"
    assert checkpoint_json_path(ckpt, LEARNED.replace(depth=4)).name == "best.eval.A-d4.json"


def test_a_sweep_composes_its_points_with_a_config_folder_outside_the_repository(tmp_path):
    folder = _user_configs(tmp_path / "elsewhere")
    (_, overrides, name) = _search(
        get_args_parser().parse_args(["-m", "--config-dir", str(folder), "variant=mine,uniform"])
    )
    sweep = plan(overrides, DEFAULT_CONFIG_DIR, name)
    assert [(c.variant.name, c.variant.relevant_weight) for c in sweep.configs] == [
        ("mine", 3.0),
        ("uniform", 1.0),
    ]
    with pytest.raises(ValueError, match="Could not find 'variant/mine'"):
        plan(["variant=mine,uniform"])


def test_the_train_summary_says_how_many_held_out_windows_its_scores_were_measured_on(capsys):
    from train.__main__ import _summary

    metrics = {
        "epochs": 3,
        "monitor": "val/DRPE_graded",
        "best_score": 0.25,
        "train_seconds": 2.0,
        "best/E_tot": 0.5,
        "best/DRPE_graded": 0.25,
        "best/DRPE_binary": 0.125,
    }
    _summary(metrics, {"run_dir": "R", "best_checkpoint": "R/best.ckpt"}, windows=256)
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "epochs 3  val/DRPE_graded 0.25000  E_tot 0.5000  DRPE_graded 0.2500  DRPE_binary 0.1250"
        " on 256 held-out windows  (2 s)"
    )

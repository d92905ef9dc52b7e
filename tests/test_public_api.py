"""The public API of every gridplan package, written out: the exact ``__all__`` of each.

A researcher's code imports these names (``from gridplan.models import OracleModel``), so
removing or renaming one breaks it. Such a change is deliberate: it edits the list below and is
recorded in ``CHANGELOG.md``. Every name is exported lazily (``gridplan.util.lazy``), so
importing a package imports none of its modules, and ``import gridplan`` needs none of the
optional extras.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import subprocess
import sys
from importlib import metadata

import pytest

import gridplan
from gridplan.util.extras import EXTRAS

PUBLIC = {
    "gridplan": [
        "EvalSpec", "Report", "Task", "WorldModel", "compare", "evaluate", "load_spec",
    ],
    "gridplan.adapters": [
        "GridEnv", "GridPlanEnv", "GridPlanVectorEnv", "ImaginedEnv", "WorldModelEnv",
        "planning_policy", "register_envs", "value_operator",
    ],
    "gridplan.board": [
        "Board", "BoardError", "ROW_SCHEMA", "SCHEMA_VERSION", "SuiteTable", "render_site",
        "suite_tables", "validate_row",
    ],
    "gridplan.core": [
        "ACTION_NAMES", "DoorKey", "DoorKeyTask", "N_ACTIONS", "OBS_KINDS", "PROJECT",
        "Reading", "STATE_LAYOUT_VERSION", "TASK_A", "TASK_B", "TASK_KINDS", "Task",
        "ValueTable", "World", "binary_weights", "check_action", "check_state", "obs_shape",
        "observe", "perturbation_saliency", "relevance_weights", "reset", "state_outcome", "step",
        "transition", "value_table",
    ],
    "gridplan.data": [
        "BALANCED_EPSILONS", "BEHAVIOUR_POLICIES", "DATASET_SCHEMA", "EXPERT_EPSILONS",
        "EXPORT_SCHEMA", "EvalWindows", "SEQUENCE_SCHEMA", "TENSOR_FIELDS", "TransitionDataset",
        "WINDOWS_SCHEMA", "check_policy", "collect", "eval_windows", "export_dataset",
        "export_name", "export_sequences", "load_export", "load_sequences", "parse_budget",
        "sequence_rows",
    ],
    "gridplan.evaluation": [
        "CONTROLLED", "Comparison", "EvalSpec", "LEARNED", "LEVELS", "ModelComparison",
        "PlannerSpec", "ProbeResult", "Report", "SCHEMA_VERSION", "Suite", "build_card",
        "evaluate", "load_spec", "load_suite", "load_track", "paper_report", "protocol_names",
        "resolve_spec", "suite_names", "track_names", "write_card", "write_report",
    ],
    "gridplan.experiments": [
        "GROUPS", "Group", "GroupContext", "GroupReport", "PROFILES", "Profile", "run_groups",
        "select_groups",
    ],
    "gridplan.metrics": [
        "ActionConsistency", "EpisodeSummary", "FVIConfig", "FrozenDecoder", "LatentFidelity",
        "PairedDifference", "PredictionMetrics", "RelevanceEstimate", "STANDARD_WEIGHTS",
        "SpearmanResult", "UncertaintyQuality", "aurc", "check_weights", "drpe", "e_tot",
        "effective_rank", "estimate_relevance", "event_audit", "fit_frozen_decoder",
        "iso_error_pairs", "latent_fidelity", "mean_se", "paired_hierarchical_bootstrap",
        "prediction_metrics",
        "profile", "risk_coverage", "rollout_predictions", "spearman_ci", "squared_errors",
        "standard_weights", "step_profile", "summarize_episodes", "uncertainty_quality",
    ],
    "gridplan.models": [
        "AR1NoiseModel", "Capabilities", "CheckedHistoryModel", "CheckedLatentModel",
        "CheckedModel", "EnsembleWorldModel", "HistoryWorldModel", "LatentContractError",
        "LatentWorldModel", "LearnedLatentModel", "LearnedWorldModel", "METHODS", "MLPDynamics",
        "NoiseModel", "OpaqueLatent", "OracleModel", "PersistenceLatentModel", "PluginError",
        "StateLatentModel", "WorldModel", "admit", "admit_history", "build", "capabilities_of",
        "check_contract",
        "check_latent_model", "check_model_world", "check_plugin", "check_sigma", "checked",
        "imagined_transition", "is_history_model", "is_latent_model", "keeps_memory",
        "load_ensemble",
        "load_latent_model", "load_world_model", "noise_grid", "sibling_imports",
    ],
    "gridplan.planning": [
        "CrossEntropyPlanner", "DEFAULT_MAX_MEMORY", "EpisodeResults", "FusedNoiseScorer",
        "GenericScorer", "LatentScorer", "LeafScorer", "LearnedValue", "PLANNERS",
        "PathIntegralPlanner", "Planner", "RewardScorer", "SequencePlanner", "TIES", "TreeScorer",
        "TreeSearchPlanner", "ValueSearchPlanner", "ZeroValue", "action_sequences", "break_ties",
        "check_depth", "check_planner", "check_prediction", "default_ties", "leaf_scorer",
        "make_planner", "needs_learned_value", "planner_settings", "register_scorer",
        "run_closed_loop", "run_episodes", "start_states",
    ],
    "gridplan.training": [
        "Config", "LatentWorldModelModule", "Launcher", "STATUS_FILE", "TrainConfig",
        "TransitionDataModule", "WorldModelModule", "adamw", "cache_path", "cached_dataset",
        "compose", "dashboard_layout", "dimension_weights", "figures_due", "held_out_windows",
        "log_figures", "log_report", "lr_factor", "make_logger", "metric_scalars",
        "metrics_due", "next_rows", "read_status", "relevance_order", "resume", "rollout_rows",
        "sample_weights", "score_best", "squared_error_sums", "train", "train_all", "validate",
        "weighted_mse",
    ],
    "gridplan.util": [
        "EXTRAS", "MissingExtraError", "Progress", "as_progress", "available_cpus",
        "configure_threads", "describe", "dumps", "install_command", "read_fragments", "require",
        "retain_freed_memory", "set_wait_policy", "to_jsonable", "training_threads",
        "write_atomic", "write_text_atomic",
    ],
}

#: Public names that need an optional extra (``gridplan.util.extras``) to resolve.
NEEDS = {"gymnasium": ("GridPlanEnv", "GridPlanVectorEnv", "ImaginedEnv", "register_envs"),
         "torchrl": ("GridEnv", "WorldModelEnv", "planning_policy", "value_operator")}
#: Names importable from the flat layout before the layer packages, from the module of
#: that name (``gridplan/models.py`` became ``gridplan/models/``, and so on).
FLAT_LAYOUT = {
    "gridplan.models": ["AR1NoiseModel", "NoiseModel", "OracleModel", "WorldModel",
                        "imagined_transition", "noise_grid"],
    "gridplan.data": ["BALANCED_EPSILONS", "BEHAVIOUR_POLICIES", "DATASET_SCHEMA", "EvalWindows",
                      "TransitionDataset", "collect", "eval_windows", "parse_budget"],
    "gridplan.metrics": ["PredictionMetrics", "check_weights", "drpe", "e_tot",
                         "prediction_metrics", "profile", "rollout_predictions",
                         "squared_errors", "standard_weights", "step_profile"],
    "gridplan.training": ["TransitionDataModule", "WorldModelModule", "adamw", "cache_path",
                          "cached_dataset", "dashboard_layout", "dimension_weights",
                          "figures_due", "held_out_windows", "log_figures",
                          "log_report", "lr_factor", "metric_scalars", "metrics_due",
                          "next_rows", "relevance_order", "rollout_rows",
                          "sample_weights", "score_best", "weighted_mse"],
}
OPTIONAL = ("gymnasium", "torchrl", "tensordict", "mlflow", "wandb")


def _installed(extra: str) -> bool:
    return all(importlib.util.find_spec(module) is not None for module in EXTRAS[extra])


def test_every_package_is_listed():
    packages = {"gridplan"} | {
        f"gridplan.{m.name}" for m in pkgutil.iter_modules(gridplan.__path__) if m.ispkg
    }
    assert packages == set(PUBLIC)


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_all_is_the_written_list(package):
    exported = importlib.import_module(package).__all__
    removed = sorted(set(PUBLIC[package]) - set(exported))
    added = sorted(set(exported) - set(PUBLIC[package]))
    assert (removed, added) == ([], []), (
        f"{package}: public names removed {removed}, added {added}; a deliberate change edits "
        "PUBLIC here and is recorded in CHANGELOG.md"
    )
    assert exported == PUBLIC[package]  # sorted, so that the written list is one order


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_every_public_name_resolves_and_dir_lists_it(package):
    module = importlib.import_module(package)
    assert set(PUBLIC[package]) <= set(dir(module))
    for name in PUBLIC[package]:
        extra = next((e for e, names in NEEDS.items() if name in names), None)
        if extra is not None and not _installed(extra):
            continue
        value = getattr(module, name)
        assert value is getattr(module, name)  # resolved once, then a plain attribute
        namespace: dict = {}
        exec(f"from {package} import {name}", namespace)
        assert namespace[name] is value
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__name__ == name and value.__module__.startswith("gridplan.")


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_no_public_name_is_shadowed_by_a_module_of_its_package(package):
    # Importing package.x sets the package's attribute x to that module, which would hide
    # an exported name x.
    module = importlib.import_module(package)
    modules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    assert modules & set(PUBLIC[package]) == set()


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    import gridplan.models

    with pytest.raises(AttributeError, match="module 'gridplan.models' has no attribute 'Oracle'"):
        gridplan.models.Oracle  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'Oracle' from 'gridplan.models'"):
        exec("from gridplan.models import Oracle", {})


@pytest.mark.parametrize("package", sorted(FLAT_LAYOUT))
def test_the_flat_layouts_names_import_again(package):
    namespace: dict = {}
    exec(f"from {package} import {', '.join(FLAT_LAYOUT[package])}", namespace)
    assert set(FLAT_LAYOUT[package]) <= set(PUBLIC[package]) & set(namespace)


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_import_gridplan_imports_no_optional_extra():
    code = f"import sys, gridplan\nprint(sorted(set({OPTIONAL!r}) & set(sys.modules)))"
    assert _python(code) == "[]"


def test_importing_every_package_imports_none_of_their_modules_nor_torch():
    code = (
        "import sys\n"
        f"for package in {sorted(PUBLIC)!r}:\n"
        "    __import__(package)\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('gridplan.')"
        " and m.count('.') > 1))"
    )
    assert _python(code) == "['gridplan.util.lazy']"


def test_import_gridplan_and_its_api_import_no_optional_extra():
    # Every public name but the adapters' resolves (the ladder, the trainer, the loggers),
    # and still none of the optional packages is imported.
    names = {p: [n for n in PUBLIC[p] if not any(n in v for v in NEEDS.values())] for p in PUBLIC}
    code = (
        "import importlib, sys\n"
        f"for package, names in {names!r}.items():\n"
        "    module = importlib.import_module(package)\n"
        "    for name in names:\n"
        "        getattr(module, name)\n"
        f"print(sorted(set({OPTIONAL!r}) & set(sys.modules)))"
    )
    assert _python(code) == "[]"


def test_the_version_is_the_installed_distributions():
    assert gridplan.__version__ == metadata.version("gridplan")


def test_a_source_tree_that_was_never_installed_says_its_version_is_unknown():
    code = (
        "from importlib import metadata\n"
        "def missing(name):\n"
        "    raise metadata.PackageNotFoundError(name)\n"
        "metadata.version = missing\n"
        "import gridplan\n"
        "print(gridplan.__version__)"
    )
    assert _python(code) == "0+unknown"

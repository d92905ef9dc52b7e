"""The bugs that losses hide: five bugs real model-based RL codebases have shipped, each
planted in a state MLP trained as ``python -m train`` trains it, then measured as
``python -m eval`` measures any model (``docs/how-to/planted-bugs.md``).

Two bugs live in the training data, so the model learns them and its validation loss is
computed on data with the same bug:

* ``shifted-actions``: each transition is logged with the action of the step after it (the
  last step of an episode keeps its own), the off-by-one pairing of actions and observations
  that left a Dreamer agent on MiniGrid at 0% success while its losses converged;
* ``ignored-action``: the action never reaches the model (every logged action is 0, in
  training and at use), as when the action is concatenated onto the wrong tensor.

Three live in the code that uses a clean model, so its training and validation losses are
the clean model's:

* ``delta-twice``: the predicted change is added to the state twice (a ``predict_delta``
  network whose output is treated as a change once more);
* ``swapped-actions``: left and right swapped between the environment's action order and
  the model's (an action enum defined twice);
* ``refit-normalization``: the input normalization's statistics are refit on every batch
  the model is called with, instead of the training data's (``s`` standardized by the
  batch's mean and standard deviation, mapped back through the training data's).

Each model is evaluated through the plug-in boundary (``make`` below) under the learned
protocol (paper §5.4) at the levels that carry a gate (L1, closed-loop success, L4, L5, L6),
with its evaluation card; the table puts its validation loss and E_tot beside the clean
model's and names the card gates that fail.

    python scripts/planted_bugs.py --out planted             # 20k transitions, ~10 min on 2 cores
    python scripts/planted_bugs.py --out planted --epochs 20 # fewer epochs per model
    python scripts/planted_bugs.py --out planted --quick     # a smoke run: tiny data and protocol
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

from gridplan.core.constants import LEFT, RIGHT
from gridplan.data.datasets import TransitionDataset
from gridplan.evaluation.card import card_paths
from gridplan.models.learned import load_world_model

#: Bugs in the training data (the model learns them) and in the code that uses a model.
DATA_BUGS = ("shifted-actions", "ignored-action")
USE_BUGS = ("delta-twice", "swapped-actions", "refit-normalization")
BUGS = ("clean", *DATA_BUGS, *USE_BUGS)
#: The levels the card's gates read, and the closed loop.
LEVELS = "L1,success,L4,L5,L6"


def shifted_actions(data: TransitionDataset) -> TransitionDataset:
    """``data`` with each transition's action replaced by the next transition's of the same
    episode (the last transition of an episode keeps its own); states are unchanged."""
    nxt = torch.roll(data.actions, -1)
    same = torch.roll(data.episode, -1) == data.episode
    same[-1] = False
    return dataclasses.replace(data, actions=torch.where(same, nxt, data.actions))


def ignored_action(data: TransitionDataset) -> TransitionDataset:
    """``data`` with every action 0 (``UP``): the model never sees which action was taken."""
    return dataclasses.replace(data, actions=torch.zeros_like(data.actions))


DATA_TRANSFORMS = {"shifted-actions": shifted_actions, "ignored-action": ignored_action}


class BuggyModel:
    """A trained state model used through one of the bugs (module docstring).

    Args:
        model: the trained ``LearnedWorldModel``.
        bug: one of ``BUGS`` (``clean``, ``shifted-actions``: used as trained).
        mean, std: ``(S,)`` statistics of the training states (``refit-normalization``).

    Raises:
        ValueError: on an unknown bug.
    """

    deterministic = True

    def __init__(self, model, bug: str, mean=None, std=None) -> None:
        if bug not in BUGS:
            raise ValueError(f"unknown bug {bug!r}; valid: {', '.join(BUGS)}")
        self.model, self.bug = model, bug
        self.world, self.metadata = model.world, {**model.metadata, "bug": bug}
        self.mean, self.std = mean, std

    def predict(self, state, action, generator):
        """``(N, S)`` float32 states, ``(N,)`` long actions -> ``(N, S)`` next states."""
        if self.bug == "ignored-action":
            action = torch.zeros_like(action)
        elif self.bug == "swapped-actions":
            swap = torch.arange(4, device=action.device)
            swap[LEFT], swap[RIGHT] = RIGHT, LEFT
            action = swap[action]
        elif self.bug == "refit-normalization":
            mean, var = state.mean(dim=0), state.var(dim=0, unbiased=False)
            state = (state - mean) / torch.sqrt(var + 1e-6) * self.std + self.mean
        nxt = self.model.predict(state, action, generator)
        if self.bug == "delta-twice":
            nxt = (2 * nxt - state).clamp(0.0, 1.0)
        return nxt


def make(ckpt: str, bug: str = "clean"):
    """The plug-in factory: the checkpoint ``ckpt`` used through ``bug``
    (``python -m eval --model scripts/planted_bugs.py:make --model-arg ckpt=... --model-arg
    bug=delta-twice``)."""
    model = load_world_model(ckpt)
    mean = std = None
    if bug == "refit-normalization":
        from gridplan.training.latent_module import run_data

        train, _ = run_data(model.metadata)
        mean, std = train.states.mean(dim=0), train.states.std(dim=0, unbiased=False)
    return BuggyModel(model, bug, mean, std)


def _train(out: Path, name: str, overrides: list[str], bug: str | None) -> Path:
    """Train the state MLP into ``out/runs``; a data bug trains on its transform of the
    clean data, placed in a cache folder of its own under the clean data's key."""
    from gridplan.training.config import compose
    from gridplan.training.module import cache_path, cached_dataset
    from gridplan.training.runs import train_run

    cache = out / "cache" / (bug or "clean")
    cfg = compose([*overrides, f"data.cache_dir={cache}"])
    if bug is not None:
        from gridplan.core import tasks
        from gridplan.data.datasets import parse_budget

        d = cfg.data
        task = tasks.get(d.task, world=cfg.world)
        budget = parse_budget(d.budget)
        clean = cached_dataset(d.policy, budget, int(d.seed), task, out / "cache" / "clean")
        path = cache_path(cache, d.policy, budget, int(d.seed), task)
        DATA_TRANSFORMS[bug](clean).save(path, overwrite=True)
    return train_run([*overrides, f"data.cache_dir={cache}", f"name={name}"])


def _evaluate(ckpt: Path, bug: str, out: Path, protocol: list[str]) -> dict:
    from eval.cli import main

    report = out / "reports" / f"{bug}.json"
    argv = [
        "--model", f"{Path(__file__).resolve()}:make", "--model-arg", f"ckpt={ckpt}",
        "--model-arg", f"bug={bug}", "--levels", LEVELS, "--card", "--json", str(report),
        "--no-progress", *protocol,
    ]  # fmt: skip
    if main(argv) != 0:
        raise RuntimeError(f"evaluating {bug} failed")
    card = json.loads(card_paths(report)["json"].read_text())
    return {"report": json.loads(report.read_text()), "card": card}


def _row(bug: str, run: Path, measured: dict, clean: dict | None) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())["metrics"]
    report, card = measured["report"], measured["card"]
    ladder = report["ladder"]
    failed = [f"{g['level']} {g['rule']}" for g in card["gates"] if g["passed"] is False]
    row = {
        "bug": bug,
        "val_loss": metrics["best_score"],
        "E_tot": report["E_tot"],
        "DRPE": report["DRPE"]["graded"],
        "success": report["success"]["mean"],
        "success_se": report["success"]["se"],
        "decision_agreement": ladder["L4"]["decision_agreement"]["mean"],
        "decision_regret": ladder["L4"]["decision_regret"]["mean"],
        "gates_failed": failed,
    }
    if clean is not None:
        row["val_loss_ratio"] = row["val_loss"] / clean["val_loss"]
        row["E_tot_ratio"] = row["E_tot"] / clean["E_tot"]
    return row


def table(rows: list[dict]) -> str:
    """The markdown table of ``rows`` (``run``'s)."""
    lines = [
        "| bug | val/loss (x clean) | E_tot (x clean) | DRPE graded | success | decision "
        "agreement | decision regret | card gates failed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "" if "val_loss_ratio" not in r else f" ({r['val_loss_ratio']:.2f}x)"
        e_ratio = "" if "E_tot_ratio" not in r else f" ({r['E_tot_ratio']:.2f}x)"
        gates = ", ".join(r["gates_failed"]) or "none"
        lines.append(
            f"| {r['bug']} | {r['val_loss']:.5f}{ratio} | {r['E_tot']:.4f}{e_ratio} "
            f"| {r['DRPE']:.4f} | {r['success']:.3f} ± {r['success_se']:.3f} "
            f"| {r['decision_agreement']:.3f} | {r['decision_regret']:.4f} | {gates} |"
        )
    return "\n".join(lines)


def run(out: Path, overrides: list[str], protocol: list[str]) -> list[dict]:
    """Train the clean model and the data bugs' models, evaluate all six, write
    ``out/results.json`` (``settings``: the training overrides and evaluation options; ``rows``)
    and ``out/table.md`` (the settings above the table); the rows, clean first."""
    common = [*overrides, f"out_dir={out / 'runs'}", "logger=csv"]
    runs = {"clean": _train(out, "clean", common, None)}
    for bug in DATA_BUGS:
        runs[bug] = _train(out, bug, common, bug)
    for bug in USE_BUGS:
        runs[bug] = runs["clean"]
    rows: list[dict] = []
    for bug in BUGS:
        measured = _evaluate(runs[bug] / "checkpoints" / "best.ckpt", bug, out, protocol)
        rows.append(_row(bug, runs[bug], measured, rows[0] if rows else None))
    settings = {"training": overrides, "evaluation": protocol or ["the learned protocol"]}
    (out / "results.json").write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))
    (out / "table.md").write_text(f"{settings_line(settings)}\n\n{table(rows)}\n")
    return rows


def settings_line(settings: dict) -> str:
    """One line naming the training overrides and the evaluation options of a table."""
    training = " ".join(settings["training"]) or "the config's defaults"
    return f"Trained with `{training}`; evaluated with `{' '.join(settings['evaluation'])}`."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="a new folder for everything")
    parser.add_argument("--quick", action="store_true", help="tiny data and protocol (smoke)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument(
        "--epochs", type=int, default=None, help="trainer.max_epochs (default: the config's)"
    )
    args = parser.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        print(f"error: {args.out} is not empty; choose a new folder", file=sys.stderr)
        return 2
    overrides = [
        f"seed={args.seed}",
        "trainer.figures_every_n_epochs=0",
        "trainer.metrics_every_n_epochs=0",
    ]
    if args.epochs is not None:
        overrides.append(f"trainer.max_epochs={args.epochs}")
    protocol: list[str] = []
    if args.quick:
        overrides += ["data.budget=2000", "trainer.max_epochs=2", "data.windows=8"]
        protocol = [
            "--seeds", "1", "--episodes", "4", "--eval-windows", "16", "--ladder-sizes", "tiny",
        ]  # fmt: skip
    run(args.out, overrides, protocol)
    print((args.out / "table.md").read_text(), end="")
    print(f"results: {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

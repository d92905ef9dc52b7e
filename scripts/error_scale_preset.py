"""Pick the learned-error-scale preset by the pre-registered Rule 2 (docs/PREREGISTERED.md).

Examples::

    python scripts/error_scale_preset.py                      # Rule 2: 8 budgets x 3 seeds
    python scripts/error_scale_preset.py --out results/error_scale_preset --force
    python scripts/error_scale_preset.py --profile tiny --candidates 2,4 --seeds 0   # smoke

Rule 2: one target, the uniform-20k model's ``E_tot`` in the paper's Table 3 (0.145); one
knob, the training budget in optimizer steps (``trainer.max_steps``), everything else as E3's
training config (``gridplan.experiments.settings.E3``, its ``train_overrides``); candidates
10, 20, ..., 1280 steps; each trained with seeds 0, 1, 2 and its ``E_tot`` measured as E3
measures it (``gridplan.metrics.prediction.prediction_metrics`` on the protocol's held-out
windows, ``gridplan.experiments.measure.standard_windows``); the candidate with the smallest
``|ln(mean E_tot / 0.145)|`` is chosen, a tie going to the larger budget. If 0.145 lies
outside the candidates' range of mean ``E_tot``, the nearest end is taken and the results say
the target was not reached. No other model is trained or looked at.

Writes ``<out>/selection.json`` (every candidate's ``E_tot``, mean and per seed, epochs and
training time, the chosen budget, whether the target was reached) and
``<out>/selection.md`` (the same as a table), beside the training runs (``<out>/runs/``) and
the dataset cache (``<out>/data_cache/``). The folder is written under a temporary name and
renamed when complete; an existing selection is replaced only with ``--force``. Any other
profile, candidate list or seed list is a smoke run of the procedure: it prints the table and
chooses no preset (docs/PREREGISTERED.md Rule 5).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gridplan.util.threads import set_wait_policy  # noqa: E402

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gridplan.core.tasks import TASK_A  # noqa: E402
from gridplan.experiments import paper, settings  # noqa: E402
from gridplan.experiments.learned_runs import ModelStack, cpu_threads, train_runs  # noqa: E402
from gridplan.experiments.measure import standard_windows  # noqa: E402
from gridplan.experiments.runner import GroupContext  # noqa: E402
from gridplan.experiments.settings import UNIFORM_20K  # noqa: E402
from gridplan.experiments.tables import fmt, md_table  # noqa: E402
from gridplan.metrics.prediction import prediction_metrics  # noqa: E402
from gridplan.models.learned import load_world_model  # noqa: E402
from gridplan.util.jsonio import dumps  # noqa: E402
from gridplan.util.threads import configure_threads, describe  # noqa: E402

#: Rule 2's target: the uniform-20k model's E_tot in the paper's Table 3.
TARGET = paper.TABLE_3[UNIFORM_20K]["E_tot"].value
#: Rule 2's candidate training budgets, optimizer steps.
CANDIDATES = (10, 20, 40, 80, 160, 320, 640, 1280)
#: Rule 2's training seeds.
SEEDS = (0, 1, 2)
SELECTION_JSON = "selection.json"
SELECTION_MD = "selection.md"
RULE = "docs/PREREGISTERED.md, Rule 2 (pre-registered): the learned-error-scale preset"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One training budget: its uniform-20k models' E_tot per seed and their mean, the
    epochs they ran (the last one partial where the cap falls inside it) and their training
    seconds."""

    max_steps: int
    E_tot_per_seed: tuple[float, ...]
    epochs: tuple[int, ...]
    train_seconds: tuple[float, ...]

    @property
    def E_tot(self) -> float:
        return float(np.mean(self.E_tot_per_seed))

    def distance(self, target: float = TARGET) -> float:
        """``|ln(mean E_tot / target)|``, Rule 2's criterion."""
        return abs(math.log(self.E_tot / target))

    def to_dict(self, target: float = TARGET) -> dict:
        return {
            "max_steps": self.max_steps,
            "E_tot": self.E_tot,
            "E_tot_per_seed": list(self.E_tot_per_seed),
            "abs_log_ratio": self.distance(target),
            "epochs": list(self.epochs),
            "train_seconds": list(self.train_seconds),
        }


def choose(candidates: Sequence[Candidate], target: float = TARGET) -> tuple[Candidate, bool]:
    """Rule 2's choice: the candidate with the smallest ``|ln(mean E_tot / target)|`` (a tie
    goes to the larger budget), and whether ``target`` lies within the candidates' range of
    mean E_tot (else the choice is the nearest end and the target is not reached).

    Raises:
        ValueError: if there is no candidate, a mean E_tot is not a finite positive number,
            or ``target`` is not positive.
    """
    if not candidates:
        raise ValueError("no candidate budgets to choose from")
    if not target > 0:
        raise ValueError(f"the target E_tot must be > 0, got {target}")
    bad = [c.max_steps for c in candidates if not (math.isfinite(c.E_tot) and c.E_tot > 0)]
    if bad:
        raise ValueError(f"candidates {bad} have no finite positive mean E_tot")
    best = min(candidates, key=lambda c: (c.distance(target), -c.max_steps))
    means = [c.E_tot for c in candidates]
    return best, min(means) <= target <= max(means)


def is_rule_2(profile: str, candidates: Sequence[int], seeds: Sequence[int]) -> bool:
    """Whether a run follows Rule 2 as registered (else it is a smoke run)."""
    return profile == "full" and tuple(candidates) == CANDIDATES and tuple(seeds) == SEEDS


def measure(
    ctx: GroupContext, e3: settings.E3Config, budgets: Sequence[int], seeds: Sequence[int]
) -> list[Candidate]:
    """Train uniform-20k for every budget and seed with E3's config plus
    ``trainer.max_steps`` and measure each model's E_tot as E3 does."""
    row = next(r for r in e3.rows if r.key == UNIFORM_20K)
    windows = standard_windows(ctx, e3.protocol)
    out = []
    for n in budgets:
        cfg = dataclasses.replace(
            e3, train_overrides=(*e3.train_overrides, f"trainer.max_steps={n}")
        )
        runs = train_runs(ctx, cfg, [(row, s) for s in seeds])
        models = [
            load_world_model(ctx.out / runs[(row.key, s)].checkpoint, ctx.device) for s in seeds
        ]
        with cpu_threads(ctx):
            metrics = prediction_metrics(ModelStack(models), windows, TASK_A)
        cand = Candidate(
            n,
            tuple(float(m.E_tot) for m in metrics),
            tuple(runs[(row.key, s)].epochs for s in seeds),
            tuple(runs[(row.key, s)].train_seconds for s in seeds),
        )
        per_seed = ", ".join(f"{v:.4f}" for v in cand.E_tot_per_seed)
        ctx.log(f"max_steps={n}: E_tot {cand.E_tot:.4f} ({per_seed})")
        out.append(cand)
    return out


def markdown(record: Mapping) -> str:
    """``selection.md``: every candidate's E_tot beside the target, and the choice."""
    rows = [
        [
            c["max_steps"],
            fmt(c["E_tot"]),
            ", ".join(fmt(v) for v in c["E_tot_per_seed"]),
            fmt(c["abs_log_ratio"], 3),
            ", ".join(str(e) for e in c["epochs"]),
            "**chosen**" if record["chosen"] == c["max_steps"] else "",
        ]
        for c in record["candidates"]
    ]
    head = ["max_steps", "mean E_tot", "E_tot per seed", "abs(ln(E_tot / target))", "epochs", ""]
    seeds = ", ".join(str(s) for s in record["seeds"])
    means = [c["E_tot"] for c in record["candidates"]]
    span = f"{fmt(min(means))}–{fmt(max(means))}"
    if record["rule_2"]:
        outcome = (
            f"Chosen budget: **trainer.max_steps={record['chosen']}** (mean E_tot "
            f"{fmt(record['chosen_E_tot'])} vs the paper's {fmt(record['target'])}). The target "
            + (
                f"lies within the candidates' range of mean E_tot ({span}): reached."
                if record["reached"]
                else f"lies outside the candidates' range of mean E_tot ({span}): **not reached**; "
                "the candidate nearest to it, the range's nearest end, is taken."
            )
        )
    else:
        outcome = (
            "Smoke run (not Rule 2's profile, candidates and seeds): no preset is chosen by it."
        )
    return (
        "# The learned-error-scale preset: selection by Rule 2\n\n"
        f"Rule: {RULE}. Target: the uniform-20k model's E_tot in the paper's Table 3, "
        f"{fmt(record['target'])}. Knob: `trainer.max_steps`; everything else as E3's training "
        f"config (profile `{record['profile']}`"
        + (
            f", with {', '.join(record['e3_train_overrides'])}"
            if record["e3_train_overrides"]
            else ", `python -m train` defaults"
        )
        + f"). Seeds {seeds}; E_tot on E3's {record['n_windows']} held-out H = "
        f"{record['horizon']} windows. Criterion: smallest abs(ln(mean E_tot / target)), a tie "
        "to the larger budget. Epochs: the last one partial where the cap falls inside it.\n\n"
        + md_table(head, rows)
        + f"\n\n{outcome}\n\nTraining and measuring took {record['wall_seconds']:.0f} s "
        f"({record['threads']} torch thread(s), device `{record['device']}`).\n"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python scripts/error_scale_preset.py",
        description="Choose the learned-error-scale preset's training budget by Rule 2 of "
        "docs/PREREGISTERED.md.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--out", default="results/error_scale_preset", help="results folder")
    p.add_argument(
        "--profile",
        choices=tuple(settings.E3),
        default="full",
        help="E3's training config of this profile (only full is Rule 2)",
    )
    p.add_argument(
        "--candidates",
        default=",".join(map(str, CANDIDATES)),
        help="comma-separated budgets in optimizer steps (only the default is Rule 2)",
    )
    p.add_argument(
        "--seeds",
        default=",".join(map(str, SEEDS)),
        help="comma-separated training seeds (only the default is Rule 2)",
    )
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--force", action="store_true", help="replace an existing selection")
    p.add_argument("--no-progress", action="store_true", help="hide progress lines")
    return p


def _ints(parser: argparse.ArgumentParser, flag: str, text: str, low: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        parser.error(f"{flag} must be comma-separated integers, got {text!r}")
    if not values or min(values) < low or len(set(values)) != len(values):
        parser.error(f"{flag} must list distinct integers >= {low}, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    budgets = _ints(parser, "--candidates", args.candidates, 1)
    seeds = _ints(parser, "--seeds", args.seeds, 0)
    final = Path(args.out)
    if (final / SELECTION_JSON).exists() and not args.force:
        parser.exit(2, f"error: {final / SELECTION_JSON} exists; --force replaces it\n")
    threads = configure_threads(args.threads or None)
    print(describe(threads), flush=True)
    e3 = settings.E3[args.profile]
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        device = torch.device(args.device)
        ctx = GroupContext(
            "error_scale_preset", args.profile, e3, tmp, tmp, device, not args.no_progress
        )
        t0 = time.perf_counter()
        cands = measure(ctx, e3, budgets, seeds)
        wall = time.perf_counter() - t0
        best, reached = choose(cands)
        rule_2 = is_rule_2(args.profile, budgets, seeds)
        record = {
            "rule": RULE,
            "rule_2": rule_2,
            "target": TARGET,
            "profile": args.profile,
            "e3_train_overrides": list(e3.train_overrides),
            "seeds": list(seeds),
            "n_windows": e3.protocol.n_windows,
            "horizon": e3.protocol.horizon,
            "candidates": [c.to_dict() for c in cands],
            "chosen": best.max_steps if rule_2 else None,
            "chosen_E_tot": best.E_tot if rule_2 else None,
            "reached": reached if rule_2 else None,
            "wall_seconds": round(wall, 1),
            "threads": torch.get_num_threads(),
            "device": str(device),
        }
        (tmp / SELECTION_JSON).write_text(dumps(record, indent=2) + "\n")
        text = markdown(record)
        (tmp / SELECTION_MD).write_text(text)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does decision regret predict planning quality? The ladder's decision metrics on the E1 grid.

Every model of the controlled grid of E1 (paper §5.1: ``M(sigma_r, sigma_i)``, 8 x 6 = 48
settings, Task A, the depth-4 planner, 10 seeds x 30 episodes) is evaluated with
``gridplan.evaluate`` at levels L1 (E_tot, DRPE), L4 (decision agreement and regret on the
branch set), L7 (closed-loop success, XGap) and the WorldModelGym probe. Then the Spearman
correlation of each predictor with closed-loop success over the 48 models, with a percentile
bootstrap CI over models (``gridplan.metrics.stats.spearman_ci``, 2000 resamples), and the paired
bootstrap CI of ``|rho(decision regret)| - |rho(p)|`` for every other predictor ``p`` (the same
resampled models for both). Decision regret needs no closed loop: it is read from the
planner's first-action values at the branch states against the exact ``Q*``.

    python scripts/ladder_grid.py --json ladder_grid.json          # the 48 models, minutes
    python scripts/ladder_grid.py --profile quick                  # 2 seeds x 10 episodes
    python scripts/ladder_grid.py --profile tiny                   # plumbing, seconds

Nothing is tuned to a target: the table is whatever the grid gives. Within a row of fixed
``sigma_r`` every decision number and the success are identical (Prop. 1 with common random
numbers), so the 48 models carry 8 distinct values of each; the intervals resample the 48 as
units and are narrower than 8 independent models would give.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

# Run from any folder against this checkout, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gridplan  # noqa: E402
from gridplan.evaluation.ranking import spearman  # noqa: E402
from gridplan.evaluation.spec import load_spec  # noqa: E402
from gridplan.experiments.settings import E1  # noqa: E402
from gridplan.metrics.stats import spearman_ci  # noqa: E402
from gridplan.models.noise import NoiseModel  # noqa: E402
from gridplan.util.jsonio import dumps  # noqa: E402

#: Reproduction profile -> the ladder protocol whose closed loop and windows are that
#: profile's E1 protocol (``gridplan.experiments.settings.E1``).
LADDER_PROTOCOL = {"full": "controlled", "quick": "quick-controlled", "tiny": "tiny-controlled"}
LEVELS = ("L1", "L4", "L7", "probe")
#: Predictors of success: (record key, label).
PREDICTORS = (
    ("decision_regret", "decision regret (L4)"),
    ("decision_agreement", "decision agreement (L4)"),
    ("probe_regret", "WorldModelGym regret"),
    ("xgap", "XGap (L7)"),
    ("DRPE_binary", "DRPE binary"),
    ("DRPE_graded", "DRPE graded"),
    ("E_tot", "E_tot"),
)


def ladder_spec(profile: str):
    """The ladder's spec of ``profile``: its protocol file at E1's depth, Task A, ``LEVELS``."""
    spec = load_spec(LADDER_PROTOCOL[profile])
    return spec.replace(depth=E1[profile].protocol.depth, task="A", levels=LEVELS)


def grid_records(profile: str, device: torch.device, log) -> list[dict]:
    """One record per grid setting, ``sigma_r``-major: the sigmas, success and predictors.

    Raises:
        ValueError: if the ladder protocol's closed loop is not the profile's E1 protocol.
    """
    cfg = E1[profile]
    protocol = ladder_spec(profile)
    loop = ("depth", "seeds", "episodes", "n_windows", "horizon")
    if any(getattr(protocol, k) != getattr(cfg.protocol, k) for k in loop):
        raise ValueError(f"ladder protocol {protocol} differs from E1's {cfg.protocol}")
    records = []
    for sr in cfg.sigma_r:
        for si in cfg.sigma_i:
            start = time.perf_counter()
            report = gridplan.evaluate(
                NoiseModel.controlled(sr, si),
                protocol,
                device=device,
                model_info={"name": "noise", "sigma_r": sr, "sigma_i": si},
            ).to_dict()
            lad = report["ladder"]
            records.append(
                {
                    "sigma_r": sr,
                    "sigma_i": si,
                    "success": report["success"]["mean"],
                    "success_se": report["success"]["se"],
                    "decision_regret": lad["L4"]["decision_regret"]["mean"],
                    "decision_agreement": lad["L4"]["decision_agreement"]["mean"],
                    "probe_regret": lad["probe"]["regret"]["mean"],
                    "xgap": lad["L7"]["xgap"]["mean"],
                    "DRPE_binary": report["DRPE"]["binary"],
                    "DRPE_graded": report["DRPE"]["graded"],
                    "E_tot": report["E_tot"],
                }
            )
            log(
                f"M({sr:g}, {si:g}): success {records[-1]['success']:.3f}, decision regret "
                f"{records[-1]['decision_regret']:.4f}, DRPE {records[-1]['DRPE_binary']:.4f} "
                f"({time.perf_counter() - start:.1f} s)"
            )
    return records


def correlations(records: list[dict], n_resamples: int, seed: int = 0) -> dict:
    """Spearman of each predictor with success (CI over models), and the paired bootstrap of
    ``|rho(decision regret)| - |rho(p)|`` on the same resampled models (NaN resamples, with a
    constant predictor or success, dropped)."""
    success = np.array([r["success"] for r in records])
    values = {key: np.array([r[key] for r in records]) for key, _ in PREDICTORS}
    idx = np.random.default_rng(seed).integers(0, len(records), (n_resamples, len(records)))
    with np.errstate(invalid="ignore"):
        boot = {key: np.abs(spearman(v[idx], success[idx])) for key, v in values.items()}
    rhos = {
        key: spearman_ci(v, success, n_resamples=n_resamples, seed=seed)
        for key, v in values.items()
    }
    out = {}
    for key, label in PREDICTORS:
        gap = None
        diff = boot["decision_regret"] - boot[key]
        diff = diff[np.isfinite(diff)]
        point = abs(rhos["decision_regret"].rho) - abs(rhos[key].rho)
        if key != "decision_regret" and diff.size and np.isfinite(point):
            low, high = np.percentile(diff, [2.5, 97.5])
            gap = {"mean": float(point), "low": float(low), "high": float(high)}
        out[key] = {"label": label, "spearman": rhos[key].to_dict(), "abs_rho_gap_of_regret": gap}
    return out


def table(corr: dict, n_models: int) -> list[str]:
    lines = [
        f"Spearman with closed-loop success over {n_models} models (95% bootstrap CI over models)",
        f"{'predictor':<26}{'rho':>8}  {'CI':<18}  |rho(regret)| - |rho| [CI]",
    ]
    for key, _ in PREDICTORS:
        row = corr[key]
        rho = row["spearman"]

        def num(x):
            return "n/a" if x is None else f"{x:+.3f}"

        ci = f"[{num(rho['low'])}, {num(rho['high'])}]"
        gap = row["abs_rho_gap_of_regret"]
        gap_text = (
            "" if gap is None else f"{gap['mean']:+.3f} [{gap['low']:+.3f}, {gap['high']:+.3f}]"
        )
        lines.append(f"{row['label']:<26}{num(rho['rho']):>8}  {ci:<18}  {gap_text}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", choices=list(LADDER_PROTOCOL), default="full")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", metavar="PATH", help="write records and correlations here")
    p.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    args = p.parse_args(argv)
    if args.json and Path(args.json).exists() and not args.force:
        p.error(f"{args.json} already exists; pass --force to overwrite it")
    device = torch.device(args.device)
    start = time.perf_counter()
    records = grid_records(args.profile, device, lambda m: print(m, flush=True))
    corr = correlations(records, E1[args.profile].n_resamples)
    print()
    print("\n".join(table(corr, len(records))))
    seconds = time.perf_counter() - start
    print(f"{len(records)} models in {seconds:.0f} s")
    if args.json:
        out = {
            "profile": args.profile,
            "protocol": ladder_spec(args.profile).to_dict(),
            "depth": E1[args.profile].protocol.depth,
            "levels": list(LEVELS),
            "records": records,
            "correlations": corr,
            "seconds": seconds,
        }
        Path(args.json).write_text(dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

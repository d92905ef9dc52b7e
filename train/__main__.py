"""``python -m train``: train learned world models from ``configs/`` (paper §5.4).

Examples::

    python -m train                                   # uniform loss, 20k balanced transitions
    python -m train variant=event_weighted data=12k
    python -m train data=12k data.policy=random trainer.max_epochs=50 seed=3
    python -m train seed=0,1,2,3,4 variant=uniform,rel_only   # a sweep: 10 runs at once
    python -m train seed=0,1,2,3,4 train.vectorize=false     # the same runs one by one
    python -m train seed=0,1,2,3,4,5,6,7 train.workers=2     # two groups in two processes
    python -m train model=ensemble5                 # 5 bootstrapped members, one checkpoint
    python -m train model.members=5 model.sampling=ts   # plans by trajectory sampling
    python -m train experiment=random_12k out_dir=/tmp/runs

Groups: variant, data, model, trainer (and experiment presets); any key can be overridden
with a dotted path. The runs of a sweep that share an architecture train as one vectorized
group (``gridplan.vectorized``): each run ends with the same checkpoint, metrics and run
folder as when trained alone, and one progress line per group shows the members still
training. Every resolved config is printed first (and saved as ``config.yaml`` in its run
folder); each run then reports a line ``checkpoint: PATH`` naming its best checkpoint, so the
last line of the output can be handed to ``python -m eval --ckpt``.
"""

from __future__ import annotations

import sys

from gridplan.config import compose, expand_sweeps, to_yaml

USAGE = __doc__


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    try:
        runs = [compose(overrides) for overrides in expand_sweeps(args)]
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from gridplan.runs import train_all

    try:
        _run_all(runs, train_all)
    except SIGTERMException:
        # Lightning's SIGTERM exception is a SystemExit without a code (exit status 0); a
        # preempted run must not look like a finished one.
        print("error: training was terminated (SIGTERM); no checkpoint line", file=sys.stderr)
        return 143
    return 0


def _run_all(runs, train_all) -> None:
    for i, cfg in enumerate(runs, 1):
        header = f"run {i}/{len(runs)}" if len(runs) > 1 else "run"
        print(f"=== {header}: resolved config ===\n{to_yaml(cfg)}", flush=True)
    for i, (metrics, artifacts) in enumerate(train_all(runs), 1):
        header = f"run {i}/{len(runs)}: " if len(runs) > 1 else ""
        print(
            f"{header}run folder: {artifacts['run_dir']}\n"
            f"epochs {metrics['epochs']}  {metrics['monitor']} {metrics['best_score']:.5f}  "
            f"E_tot {metrics['best/E_tot']:.4f}  DRPE_graded {metrics['best/DRPE_graded']:.4f}  "
            f"DRPE_binary {metrics['best/DRPE_binary']:.4f}  ({metrics['train_seconds']:.0f} s)"
        )
        if "uncertainty_spearman" in metrics:
            rho, low, high = (
                metrics[f"uncertainty_spearman{s}"] for s in ("", "_low", "_high")
            )
            print(
                f"ensemble disagreement vs rollout error: Spearman {rho:.3f} "
                f"[{low:.3f}, {high:.3f}], AURC {metrics['uncertainty_aurc']:.5f}"
            )
        print(f"checkpoint: {artifacts['best_checkpoint']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

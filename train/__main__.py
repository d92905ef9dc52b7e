"""``python -m train``: train learned world models from ``configs/``, composed by Hydra
(paper §5.4).

Examples::

    python -m train                                   # uniform loss, 20k balanced transitions
    python -m train variant=event_weighted data=12k
    python -m train data=12k data.policy=random trainer.max_epochs=50 seed=3
    python -m train -m seed=0,1,2,3,4 variant=uniform,rel_only   # 10 runs: vectorized groups
    python -m train -m seed=0,1,2,3,4 train.vectorize=false      # 5 runs, one after another
    python -m train -m seed=0,1,2,3 hydra/launcher=joblib hydra.launcher.n_jobs=2   # 2 groups
    python -m train experiment=random_12k out_dir=/tmp/runs
    python -m train resume=runs/uniform-balanced-20k-seed0/version_0
    python -m train threads=2                         # torch CPU threads (default: 1 a run)
    python -m train --config-dir ~/my_configs variant=mine   # a group choice kept elsewhere
    python -m train --cfg job --resolve variant=rel_only      # the config that would run

Groups: variant, data, model, trainer (and experiment presets); any key can be overridden
with a dotted path; ``--help`` lists them all. ``--config-dir DIR`` and
``hydra.searchpath=[file://DIR]`` add config folders (Hydra's search path). A command line
of one run is composed and validated before Hydra runs it (and before ``--cfg`` prints it),
so a bad argument trains nothing, makes no folder and prints ``error: ...`` (exit status 2);
every point of a ``-m`` sweep is composed and validated, with the same folders, before the
first one starts. Each run prints its resolved config (also saved as ``config.yaml`` in the run
folder, beside Hydra's ``.hydra/`` record; ``--cfg job --resolve`` prints the same text) and
ends with a line ``checkpoint: PATH`` naming its best checkpoint, so the last line of the
output can be handed to ``python -m eval --ckpt``. A sweep given without ``-m``
(``seed=0,1``) runs as ``-m``.
A sweep's points that share an architecture train as vectorized groups, one Hydra launcher
job per group (``train.sweep``, ``gridplan.training.dispatch``); ``train.vectorize=false``
makes a point one job trained alone.
``resume=<run folder>`` continues an interrupted run from its ``last.ckpt`` and takes no
other argument.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gridplan.util.allocator import retain_freed_memory
from gridplan.util.threads import set_wait_policy

set_wait_policy()  # before torch is imported: OpenMP reads it once (gridplan.util.threads)
retain_freed_memory()  # large temporaries stay mapped (gridplan.util.allocator)

import hydra  # noqa: E402
from hydra._internal.utils import get_args_parser  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: E402
from hydra.errors import HydraException  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from gridplan.training.config import (  # noqa: E402
    DEFAULT_CONFIG_DIR,
    compose,
    hydra_config_path,
    run_name,
    to_yaml,
)
from gridplan.training.run_status import requeued_run  # noqa: E402
from gridplan.util.threads import (  # noqa: E402
    configure_threads,
    describe,
    training_threads,
)
from train.sweep import plan  # noqa: E402

#: Exit status of a run stopped by SIGTERM or SIGINT (128 + SIGTERM), so it never looks done.
INTERRUPTED = 143
#: Hydra's searchpath key: ``--config-dir`` joins it at the front (``hydra.main``'s order).
SEARCHPATH = "hydra.searchpath"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    resume = [a for a in args if a.startswith("resume=")]
    if resume:
        return _resume(args, resume[0].split("=", 1)[1])
    try:
        parsed = get_args_parser().parse_args(args)
    except SystemExit as exit_:  # argparse has printed its usage error
        return int(exit_.code or 0)
    if not (parsed.help or parsed.hydra_help or parsed.info or parsed.shell_completion):
        try:
            overrides = OverridesParser.create().parse_overrides(parsed.overrides)
            if not parsed.multirun and any(o.is_sweep_override() for o in overrides):
                note = f"note: a sweep runs as: python -m train -m {' '.join(args)}"
                print(note, file=sys.stderr)
                args, parsed.multirun = ["-m", *args], True
            if parsed.multirun:
                return _sweep(*_search(parsed))
            _check(parsed)
        except (HydraException, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return _hydra(args)


def _search(parsed) -> tuple[Path, list[str], str]:
    """The primary config folder, the overrides (``--config-dir`` joined to
    ``hydra.searchpath`` at the front, ``hydra.main``'s order) and the primary config's name of
    a command line (Hydra's parsed arguments).

    Raises:
        ValueError: if the ``--config-dir`` folder does not exist.
    """
    primary = DEFAULT_CONFIG_DIR
    if parsed.config_path is not None:  # relative to this package, as Hydra reads it
        primary = Path(__file__).parent / parsed.config_path
    overrides = list(parsed.overrides)
    if parsed.config_dir is not None:
        extra = Path(parsed.config_dir).resolve()
        if not extra.is_dir():
            raise ValueError(f"additional config folder {extra} not found (--config-dir)")
        given = OverridesParser.create().parse_overrides(overrides)
        paths = [o.value() for o in given if o.get_key_element() == SEARCHPATH]
        overrides = [o.input_line for o in given if o.get_key_element() != SEARCHPATH]
        joined = [f"file://{extra}", *(paths[-1] if paths else [])]
        overrides.append(f"{SEARCHPATH}=[{','.join(repr(str(p)) for p in joined)}]")
    return primary, overrides, parsed.config_name or "config"


def _check(parsed) -> None:
    """Compose and validate the one run of a command line with the config folders, primary
    config and search path ``hydra.main`` uses.

    Raises:
        ValueError: on a bad argument, naming it.
    """
    primary, overrides, name = _search(parsed)
    training_threads(compose(overrides, primary, name).threads)


def _hydra(args: list[str]) -> int:
    """Run the Hydra app on ``args`` (Hydra reads ``sys.argv``); returns the exit status."""
    saved = sys.argv
    sys.argv = [saved[0] if saved else "train", *args]
    try:
        _app()
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = saved
    return 0


@hydra.main(
    version_base="1.3", config_path=hydra_config_path(DEFAULT_CONFIG_DIR), config_name="config"
)
def _app(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    print(describe(configure_threads(training_threads(cfg.threads))), flush=True)
    record = {
        ".hydra/config.yaml": OmegaConf.to_yaml(cfg),
        ".hydra/overrides.yaml": OmegaConf.to_yaml(hc.overrides.task),
        ".hydra/hydra.yaml": OmegaConf.to_yaml(hc),
    }
    header = f"run {hc.job.num}" if hc.mode.name == "MULTIRUN" else "run"
    previous = requeued_run(Path(cfg.out_dir) / run_name(cfg))
    if previous is not None:  # SLURM requeued this job: continue the run it left
        _run(cfg, f"{header} (requeued, resuming {previous})", resume=previous)
    else:
        _run(cfg, header, record)


def _run(cfg: DictConfig, header: str, record: dict[str, str] | None = None, resume=None) -> None:
    """Train (or resume) one run and print its summary; SIGTERM/SIGINT exit with
    ``INTERRUPTED``."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from gridplan.training import runs

    print(f"=== {header}: resolved config ===\n{to_yaml(cfg)}", flush=True)
    try:
        if resume is None:
            metrics, artifacts = runs.train(cfg, record=record)
        else:
            metrics, artifacts = runs.resume(resume)
    except ValueError as err:  # a config its data cannot satisfy (no run folder is left)
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except (SIGTERMException, KeyboardInterrupt):
        # Lightning's SIGTERM exception is a SystemExit without a code (exit status 0); a
        # preempted run must not look like a finished one.
        print("error: training was interrupted; no checkpoint line", file=sys.stderr)
        raise SystemExit(INTERRUPTED) from None
    _summary(metrics, artifacts, cfg.data.windows)


def _sweep(config_dir: Path, overrides: list[str], config_name: str) -> int:
    """Train the points of a ``-m`` sweep of ``overrides`` (``train.sweep``) and print each
    one's summary and ``checkpoint:`` line, in sweep order; returns the exit status.

    Raises:
        ValueError: on a bad point or setting (``train.sweep.plan``), before any training.
    """
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from gridplan.training import runs
    from gridplan.training.lightning_output import quiet_lightning_chatter

    sweep = plan(overrides, config_dir, config_name)
    cfgs = sweep.configs
    threads = describe(configure_threads(training_threads(cfgs[0].threads)))
    print(f"{threads} in this process; each training job's line gives its own", flush=True)
    quiet_lightning_chatter()
    for num, cfg in enumerate(cfgs):
        print(f"=== run {num}: resolved config ===\n{to_yaml(cfg)}", flush=True)
    grouped = [str(num) for num, cfg in enumerate(cfgs) if cfg.train.vectorize]
    if grouped:
        print(f"training runs {', '.join(grouped)} as vectorized groups", flush=True)
    try:
        results = runs.train_all(cfgs, records=sweep.records, launcher=sweep.launcher,
                                 record_dir=sweep.folder)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (SIGTERMException, KeyboardInterrupt):
        print("error: training was interrupted; no checkpoint line", file=sys.stderr)
        return INTERRUPTED
    for num, (metrics, artifacts) in enumerate(results):
        print(f"=== run {num} ===")
        _summary(metrics, artifacts, cfgs[num].data.windows)
    return 0


def _summary(metrics: dict, artifacts: dict, windows: int | None = None) -> None:
    """A run's folder, best scores and ``checkpoint: PATH`` line. E_tot and DRPE are labelled
    with ``windows``, the run's held-out windows they were measured on (``data.windows``, 256
    by default, where ``python -m eval`` measures its own 1,000: the numbers differ)."""
    names = ("E_tot", "DRPE_graded", "DRPE_binary")
    if "best/E_tot" not in metrics:  # a latent model: its one-step scores
        names, windows = ("latent_mse", "recon_mse", "pred_mse"), None
    scores = "  ".join(f"{n} {metrics[f'best/{n}']:.4f}" for n in names if f"best/{n}" in metrics)
    if windows is not None:
        scores += f" on {windows} held-out windows"
    print(
        f"run folder: {artifacts['run_dir']}\n"
        f"epochs {metrics['epochs']}  {metrics['monitor']} {metrics['best_score']:.5f}  "
        f"{scores}  ({metrics['train_seconds']:.0f} s)"
    )
    print(f"checkpoint: {artifacts['best_checkpoint']}", flush=True)


def _resume(args: list[str], run_dir: str) -> int:
    from gridplan.training import runs

    if len(args) != 1:
        print(f"error: resume= takes no other argument, got {args}", file=sys.stderr)
        return 2
    try:
        cfg = runs.resumable_config(run_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        _run(cfg, f"resume {run_dir}", resume=run_dir)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

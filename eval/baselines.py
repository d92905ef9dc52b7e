"""The built-in model families as baselines of a board (``gridplan-eval --suite NAME
--baselines --board DIR``): the oracle, points of the controlled family ``M(sigma_r,
sigma_i)`` (paper §4.2), and the learned families trained as ``python -m train`` trains them (the
MLP variants of Table 3, a 5-member ensemble, the latent reconstruction and JEPA families on
the state), each evaluated on every track of the suite like any other model.

The learned baselines are trained once into ``<board>/baselines/`` (``gridplan.training.runs.
train_all``: the MLPs and the ensemble's members train as vectorized groups) and reused while
their folder holds a complete run of the same overrides (``baselines.json`` records them);
``--baseline-override KEY=VALUE`` changes every baseline's training (``data=4k
trainer.max_epochs=3`` for a trial), which trains them again under the new overrides.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from gridplan.training.run_status import read_status

#: The controlled family's baselines, as ``--models`` names them: the oracle, the paper's
#: iso-error pair of Table 2 (relevant noise ``M(.35,.1)`` and irrelevant noise ``M(0,.3)``),
#: relevant noise alone and both at once.
BUILTIN_BASELINES = (
    "oracle",
    "noise,sigma_r=0.35,sigma_i=0.1",
    "noise,sigma_r=0.0,sigma_i=0.3",
    "noise,sigma_r=0.2,sigma_i=0.0",
    "noise,sigma_r=0.5,sigma_i=0.5",
)
#: The learned baselines: label -> ``python -m train`` overrides.
TRAINED_BASELINES = {
    "mlp-uniform": ("variant=uniform",),
    "mlp-rel-only": ("variant=rel_only",),
    "mlp-event-weighted": ("variant=event_weighted",),
    "mlp-anti-weighted": ("variant=anti_weighted",),
    "ensemble5": ("model=ensemble5",),
    "latent-recon-state": ("model=latent_recon", "obs=state"),
    "jepa-state": ("model=jepa", "obs=state"),
}
RECORD = "baselines.json"


def _reusable(folder: Path, overrides: dict[str, list[str]]) -> dict[str, str] | None:
    """The recorded run folders, if ``folder`` holds complete runs of exactly ``overrides``."""
    record = folder / RECORD
    if not record.is_file():
        return None
    data = json.loads(record.read_text())
    if data.get("overrides") != overrides:
        return None
    runs = data.get("runs", {})
    for run in runs.values():
        status = read_status(run)
        if status is None or status["status"] != "complete":
            return None
        if not (Path(run) / "checkpoints" / "best.ckpt").is_file():
            return None
    return runs if set(runs) == set(overrides) else None


def trained_baselines(board: str | Path, extra: list[str], device: str) -> dict[str, str]:
    """Label -> run folder of every learned baseline, trained into ``<board>/baselines/``
    unless a complete run of the same overrides is there.

    Raises:
        ValueError: as ``gridplan.training.config.compose`` on a bad override, or as
            ``gridplan.training.runs.train_all``.
    """
    from gridplan.training.config import compose
    from gridplan.training.runs import train_all
    from gridplan.util.files import write_text_atomic

    folder = Path(board) / "baselines"
    accelerator = "cpu" if str(device).startswith("cpu") else "gpu"
    overrides = {
        label: [*base, *extra, f"out_dir={folder}", f"trainer.accelerator={accelerator}",
                "trainer.progress_bar=false"]
        for label, base in TRAINED_BASELINES.items()
    }
    runs = _reusable(folder, overrides)
    if runs is not None:
        print(f"baselines: {len(runs)} trained model(s) reused from {folder}", flush=True)
        return runs
    start = time.perf_counter()
    print(f"baselines: training {len(overrides)} model(s) into {folder}", flush=True)
    cfgs = [compose(o) for o in overrides.values()]
    results = train_all(cfgs, progress=False)
    runs = {label: str(Path(artifacts["run_dir"]))
            for label, (_, artifacts) in zip(overrides, results, strict=True)}
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / RECORD, json.dumps({"overrides": overrides, "runs": runs},
                                                  indent=2) + "\n")
    print(f"baselines: trained in {time.perf_counter() - start:.0f} s", flush=True)
    return runs


def baseline_specs(board: str | Path, extra: list[str], device: str) -> list[tuple[str, str]]:
    """``(spec, label)`` of every baseline: the built-in ones (labelled as given), then the
    trained run folders (labelled by family)."""
    trained = trained_baselines(board, extra, device)
    return [*((s, s) for s in BUILTIN_BASELINES), *((run, f"{label} (trained)")
                                                      for label, run in trained.items())]

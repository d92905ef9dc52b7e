"""Training learned world models with Lightning, one run or many as vectorized groups.

``config`` (the typed config composed from ``configs/``), ``module`` (loss, data module,
dashboards), ``engine`` (the one ``LightningModule`` of the MLPs: a stack of ``K >= 1``
members), ``members`` (each member's data, initial weights and data stream), ``runs``
(``train(cfg)``, ``train_all(cfgs)``), ``vectorized`` (many runs as members of one stack),
``dispatch`` (every group or run alone as one Hydra launcher job), ``loggers`` (the run's
Lightning logger: TensorBoard, CSV, MLflow, W&B), ``hparams_summary`` (a run's TensorBoard
HParams session), ``lightning_output`` and ``run_status`` (console lines and a run folder's
status). Paper §5.4.

Its public names (``__all__``) are imported on first use: ``import gridplan.training``
imports none of its modules.
"""

from gridplan.util.lazy import lazy_exports

_EXPORTS = {
    "train": "runs",
    "train_all": "runs",
    "resume": "runs",
    "Config": "config",
    "TrainConfig": "config",
    "compose": "config",
    "validate": "config",
    "make_logger": "loggers",
    "LatentWorldModelModule": "latent_module",
    "STATUS_FILE": "run_status",
    "read_status": "run_status",
    "Launcher": "dispatch",
    "WorldModelModule": "engine",
    "TransitionDataModule": "module",
    "dimension_weights": "module",
    "sample_weights": "module",
    "weighted_mse": "module",
    "squared_error_sums": "module",
    "next_rows": "module",
    "rollout_rows": "module",
    "cache_path": "module",
    "cached_dataset": "module",
    "held_out_windows": "module",
    "relevance_order": "module",
    "metric_scalars": "module",
    "dashboard_layout": "module",
    "log_figures": "module",
    "log_report": "module",
    "score_best": "module",
    "lr_factor": "module",
    "adamw": "module",
    "figures_due": "module",
    "metrics_due": "module",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

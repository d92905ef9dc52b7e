"""Training learned world models with Lightning, one run or many as vectorized groups.

``config`` (the typed config composed from ``configs/``), ``module`` (losses, data module,
dashboards, the ``LightningModule``), ``runs`` (``train(cfg)``, ``train_all(cfgs)``), ``vectorized``
(many runs as members of one stacked network), ``dispatch`` (every group or run alone as one
Hydra launcher job), ``loggers`` (the run's Lightning logger: TensorBoard, CSV, MLflow, W&B),
``hparams_summary`` (a run's TensorBoard HParams session), ``lightning_output`` and
``run_status`` (console lines and a run folder's status). Paper §5.4.
"""

"""gridplan's config groups, installed as the package ``gridplan.conf`` (``pyproject.toml``'s
``package-dir``) so that Hydra finds them through the package (``pkg://gridplan.conf.train``)
from any working folder: ``train/`` (``python -m train``), ``experiments/`` (the experiment
groups' settings) and ``zoo/`` (the experiments' model zoos). No code lives here."""

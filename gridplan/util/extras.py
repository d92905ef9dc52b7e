"""Optional dependencies: the extras of ``pyproject.toml`` and the error naming their install.

``gridplan`` needs Gymnasium, TorchRL, MLflow or W&B only for the feature that uses it (the
adapters of ``gridplan.adapters``, ``logger=mlflow`` and ``logger=wandb`` of ``python -m
train``). A feature asked for without its package raises ``MissingExtraError`` with the exact
command that installs it, e.g. ``pip install "gridplan[gymnasium]"``.
"""

from __future__ import annotations

import importlib.util

#: The optional extras of ``pyproject.toml`` and the top-level modules each provides.
EXTRAS: dict[str, tuple[str, ...]] = {
    "gymnasium": ("gymnasium",),
    "torchrl": ("torchrl", "tensordict"),
    "mlflow": ("mlflow",),
    "wandb": ("wandb",),
    "minigrid": ("minigrid",),
}


class MissingExtraError(ModuleNotFoundError, ValueError):
    """A feature's optional package is not installed; the message names the install command.

    A ``ModuleNotFoundError`` (``name`` is the missing module) and, because choosing the
    feature is an argument the installation cannot satisfy (``logger=wandb``), a
    ``ValueError``: the command lines report it as a usage error (exit status 2).
    """


def install_command(extra: str) -> str:
    """The command that installs ``extra``: ``pip install "gridplan[<extra>]"``.

    Raises:
        ValueError: if ``extra`` is not one of ``EXTRAS``, listing them.
    """
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; gridplan's extras are {', '.join(EXTRAS)}")
    return f'pip install "gridplan[{extra}]"'


def require(extra: str, feature: str) -> None:
    """Check that every module of ``extra`` can be imported, without importing it.

    Args:
        extra: one of ``EXTRAS``, e.g. ``"torchrl"`` (modules ``torchrl`` and ``tensordict``).
        feature: what needs it, for the message, e.g. ``"logger=mlflow"``.

    Raises:
        MissingExtraError: naming ``feature``, the first missing module and
            ``install_command(extra)``, e.g. ``logger=wandb needs the 'wandb' package, which
            is not installed: pip install "gridplan[wandb]"``.
        ValueError: if ``extra`` is unknown.
    """
    command = install_command(extra)
    for module in EXTRAS[extra]:
        # find_spec is None for a module that is absent or blocked (sys.modules[name] = None).
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(
                f"{feature} needs the {module!r} package, which is not installed: {command} "
                f"(from a source checkout: pip install -e \".[{extra}]\")",
                name=module,
            )

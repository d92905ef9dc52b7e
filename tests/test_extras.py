"""A missing optional package names the exact command that installs it (``gridplan.util.extras``).

Each extra's modules are hidden with ``sys.modules[name] = None``, which makes Python refuse to
import them exactly as if they were not installed.
"""

from __future__ import annotations

import importlib
import sys
from importlib import metadata

import pytest

from gridplan.training import loggers
from gridplan.util.extras import EXTRAS, MissingExtraError, install_command, require

MODULES = [(extra, module) for extra, modules in EXTRAS.items() for module in modules]
#: What each adapter module needs.
ADAPTERS = {
    "gridplan.adapters.gymnasium": "gymnasium",
    "gridplan.adapters.torchrl": "torchrl",
}


def test_the_extras_are_those_of_the_package_metadata():
    """Every extra a feature can need; dev and docs serve the repository's own tests and site."""
    provided = set(metadata.metadata("gridplan").get_all("Provides-Extra"))
    assert set(EXTRAS) == provided - {"dev", "docs"}


def test_the_install_command_is_quoted_for_every_shell():
    assert install_command("gymnasium") == 'pip install "gridplan[gymnasium]"'
    with pytest.raises(ValueError, match="unknown extra 'gym'; gridplan's extras are gymnasium, "):
        install_command("gym")


@pytest.mark.parametrize("extra, module", MODULES)
def test_a_missing_module_names_its_extras_install_command(monkeypatch, extra, module):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError) as caught:
        require(extra, "the feature")
    assert str(caught.value) == (
        f"the feature needs the {module!r} package, which is not installed: "
        f'pip install "gridplan[{extra}]" (from a source checkout: pip install -e ".[{extra}]")'
    )
    assert caught.value.name == module
    assert isinstance(caught.value, ModuleNotFoundError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("adapter, extra", ADAPTERS.items())
def test_an_adapter_without_its_library_names_the_install_command(monkeypatch, adapter, extra):
    for module in EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)
        monkeypatch.delitem(sys.modules, adapter, raising=False)
        with pytest.raises(ImportError, match=rf'^{adapter} needs the {module!r} package.*'
                           rf'pip install "gridplan\[{extra}\]"'):
            importlib.import_module(adapter)
        monkeypatch.undo()


def test_the_lazy_adapter_exports_name_the_install_command(monkeypatch):
    import gridplan.adapters

    monkeypatch.setitem(sys.modules, "torchrl", None)
    monkeypatch.delitem(sys.modules, "gridplan.adapters.torchrl", raising=False)
    monkeypatch.delitem(vars(gridplan.adapters), "GridEnv", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gridplan\[torchrl\]"'):
        from gridplan.adapters import GridEnv  # noqa: F401


@pytest.mark.parametrize("logger", ["mlflow", "wandb"])
def test_an_optional_logger_without_its_package_names_the_install_command(monkeypatch, logger):
    monkeypatch.setitem(sys.modules, logger, None)
    with pytest.raises(MissingExtraError, match=rf'^logger={logger} needs the {logger!r} '
                       rf'package, which is not installed: pip install "gridplan\[{logger}\]"'):
        loggers.check_installed(logger)


def test_the_built_in_loggers_need_no_extra(monkeypatch):
    for module in ("mlflow", "wandb"):
        monkeypatch.setitem(sys.modules, module, None)
    loggers.check_installed("tensorboard")
    loggers.check_installed("csv")
    with pytest.raises(ValueError, match="unknown logger 'neptune'; valid: tensorboard, csv"):
        loggers.check_installed("neptune")

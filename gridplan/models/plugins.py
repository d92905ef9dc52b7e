"""Bring your own world model: load it by import path and hold it to its contract.

A plug-in is a factory, named ``pkg.module:factory`` (importable) or ``path/to/file.py:factory``
(a file, loaded under a private module name; the modules beside it are importable while it
and its factory run, ``sibling_imports``), called with keyword arguments (``--model-arg
key=value``, or inline ``TARGET,key=value,...``) and returning a model of one of two
contracts. If the factory has parameters named ``task`` or ``device`` that the arguments
leave unset, it receives the evaluation's ``Task`` and device. The page
``docs/how-to/plug-ins.md`` says the same with a worked latent model;
``gridplan.models.signatures.METHODS`` holds the signatures below as data.

Letter legend: ``N`` rows of a call, ``S`` state dims (``world.state_dim``: 12 in the default
world, 24 in ``g16-k8``), ``Z`` a latent model's ``latent_dim``, ``K`` ensemble members.

**The state contract** (``gridplan.models.contract.WorldModel``): the model predicts the
normalized state.

- ``predict(state, action, generator) -> next_state`` (required): ``state`` ``(N, S)``
  float32 in ``[0, 1]`` on the evaluation device (possibly the model's own previous output),
  ``action`` ``(N,)`` int64 in ``0..3``, ``generator`` a ``torch.Generator``, the only
  randomness it may use; returns ``(N, S)`` of the input's dtype and device;
- ``start_rollout(batch, generator) -> None``: ``batch`` int; called before each imagined
  rollout (a model with memory resets it here);
- ``predict_reward(state, action, next_state) -> (N,)``: ``next_state`` ``(N, S)`` its own
  prediction; the input's dtype and device. Where given, the planner
  (``gridplan.planning.scorers.RewardScorer``), the probes and the ladder's imagined rollouts
  use it instead of the true reward on predicted states (termination is still read from them);
- ``uncertainty(state, action) -> (N,)`` scores ``>= 0``, or
  ``predict_members(state, action) -> (K, N, S)``: see ``gridplan.evaluation.uncertainty``;
- attributes ``world`` (a ``gridplan.core.world.World``; default the task's) and
  ``n_settings`` (1).

**The latent contract** (``gridplan.models.latent_contract``): the model reads an observation
and rolls a latent.

- attributes ``obs_kind`` (``"state"``, ``"grid"`` or ``"pixels"``), ``latent_dim`` (int
  ``Z``), ``world`` (a ``World``), ``deterministic`` (bool: ``predict_latent`` ignores its
  generator), ``metadata`` (a dict), optionally ``bytes_per_row`` (int, working memory per row
  of one ``predict_latent`` call, for the planner's batch sizes);
- ``encode(obs) -> z`` (required): ``obs`` ``(N, *obs_shape)`` as
  ``gridplan.core.render.observe`` draws it (``state``: the ``(N, S)`` float32 state;
  ``grid``: ``(N, C, G, G)`` float32; ``pixels``: ``(N, 3, P, P)`` uint8, ``P = 4 G``, 32 in
  the default world); returns ``(N, Z)`` float32;
- ``predict_latent(z, action, generator) -> z_next`` (required): ``z`` ``(N, Z)`` float32,
  ``action`` ``(N,)`` int64 in ``0..3``, ``generator`` its only randomness; returns ``(N, Z)``
  float32;
- ``decode(z) -> state``: ``(N, Z)`` float32 -> ``(N, S)`` floating normalized states (without
  it the frozen protocol decoder reads the latent, ``gridplan.evaluation.latent_eval``);
- ``reward(z, action, z_next) -> (N,)``: ``z`` and ``z_next`` ``(N, Z)`` float32 (``z_next``
  its own prediction), ``action`` ``(N,)`` int64; finite;
- ``value(z) -> (N,)``: ``z`` ``(N, Z)`` float32; finite (the planner may score leaves with
  ``reward`` and ``value``, ``gridplan.planning.latent_scorer``);
- ``observe(state) -> obs``: ``(N, S)`` float32 true states -> ``(N, *obs_shape)``, when it reads
  more than ``gridplan.core.render.observe(state, world, obs_kind)`` draws (another tile size);
- ``filter_latent(z, action, obs) -> z_next``: ``(N, Z)`` float32 latents before a step, its
  ``(N,)`` int64 actions and ``(N, *obs_shape)`` observations of the states it reached ->
  ``(N, Z)`` float32: a recurrent model's latent of the actual next observation (without it,
  ``encode(obs)``; ``gridplan.models.latent_contract.next_latents``).

**The history contract** (``gridplan.models.opaque``): the model keeps an opaque state
filtered from a history (Dreamer's RSSM, a token model).

- the latent contract's attributes ``obs_kind``, ``world``, ``deterministic`` (``step``
  ignores its generator) and ``metadata``, plus ``history`` (int ``H >= 1``, the most
  observations ``init`` reads);
- ``init(observations, actions) -> state`` (required): ``observations`` ``(N, T + 1,
  *obs_shape)`` oldest first, as ``encode`` reads them, the last the current one; ``actions``
  ``(N, T)`` int64, the actions between them, ``T + 1 <= H``; ``state`` a tensor ``(N, ...)``,
  a tuple of tensors ``(N, ...)`` or a ``TensorDict`` of batch size ``[N]``, float leaves
  float32 and finite;
- ``step(state, action, generator) -> state`` (required): the same layout one imagined step
  on; it must not modify ``state`` (the planner branches many actions from one frozen state);
- ``decode(state) -> (N, S)``, ``reward(state, action) -> (N,)`` (of the step ``action``
  takes from ``state``) and ``value(state) -> (N,)``, as the latent contract's.

It is evaluated as a latent model whose latent is its state, flattened
(``gridplan.models.opaque.OpaqueLatent``); the closed loop gives it each episode's last ``H``
observations and actions, a level that decides at sampled states one observation.

Every call of a plug-in goes through a wrapper: ``CheckedModel`` for the state contract,
``CheckedLatentModel`` for the latent one, ``CheckedHistoryModel`` for the history one
(``admit`` picks). Errors are
``PluginError`` and name the factory and its file, the method and what is wrong: an
exception inside the method (with the ``file:line`` of the user's code and the shapes the
call passed), a signature that cannot take the contract's arguments (the signature it has,
the one expected with its shapes, and how to define it), wrong type, shape, dtype or device,
non-finite values (how many rows), a latent model of another world than the task's (and the
``--world`` that fits). Values of ``predict`` outside ``[0, 1]`` are clamped to it with one
``OutOfRangeWarning`` per model (how many values, their range, the step) and a note in the
report. The planner, V* and the anchor policies read a state through rounded, clamped cells
and flags thresholded at 0.5, so clamping never changes how a predicted state is read; the
model's next imagined step starts from the clamped state, and squared errors measure the
clamped prediction. A latent model is held to ``check_latent_model`` (attributes, shapes,
dtypes, finite values, declared determinism) and evaluated through its decoder, or the frozen
protocol decoder (``gridplan.evaluation.latent_eval``).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
import sysconfig
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from gridplan.core import dynamics
from gridplan.core.constants import N_ACTIONS
from gridplan.core.tasks import Task, TaskKind
from gridplan.models.capabilities import Declared, capabilities_of, checked_on, record_checked
from gridplan.models.contract import WorldModel, check_model_world
from gridplan.models.latent_contract import (
    LatentContractError,
    LatentThroughDecoder,
    check_latent_model,
)
from gridplan.models.learned import LearnedWorldModel
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel
from gridplan.models.opaque import admit_history
from gridplan.models.signatures import METHODS, binding_error, describe_call, mismatch_message

#: Model types evaluated as they are (already validated, and eligible for the fused rollout).
TRUSTED = (NoiseModel, OracleModel, AR1NoiseModel, LearnedWorldModel, LatentThroughDecoder)
#: Rows of the contract check's probe batch.
CHECK_ROWS = 8


class PluginError(ValueError):
    """A plug-in cannot be loaded or breaks the ``WorldModel`` contract."""


#: Folders whose frames are never the user's code: this package, the standard library and
#: installed packages (torch, numpy, ...).
_LIBRARY_DIRS = tuple(
    str(Path(p).resolve())
    for p in {
        Path(__file__).resolve().parents[1],
        *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
    }
)


def display_path(path: str | Path) -> str:
    """``path`` relative to the working directory when it lies inside it, else absolute."""
    resolved = Path(path).resolve()
    try:
        return os.path.relpath(resolved) if resolved.is_relative_to(Path.cwd()) else str(resolved)
    except ValueError:
        return str(resolved)


def user_location(err: BaseException) -> str | None:
    """``file:line in function: source`` of the innermost frame of ``err``'s traceback that is
    the user's code (outside gridplan, the standard library and installed packages), or
    None if there is none."""
    frames = traceback.extract_tb(err.__traceback__)
    for frame in reversed(frames):
        filename = str(Path(frame.filename).resolve())
        if frame.filename.startswith("<") or filename.startswith(_LIBRARY_DIRS):
            continue
        code = f": {frame.line.strip()}" if frame.line else ""
        return f"{display_path(frame.filename)}:{frame.lineno} in {frame.name}{code}"
    return None


def _raised(err: BaseException) -> str:
    """``"ZeroDivisionError at mine.py:12 in predict: x / 0"`` (the location when known)."""
    where = user_location(err)
    return type(err).__name__ + (f" at {where}" if where else "")


class OutOfRangeWarning(UserWarning):
    """A plug-in predicted values outside ``[0, 1]``; they were clamped."""


def parse_value(text: str):
    """A ``--model-arg`` value: a Python literal (number, bool, None, string, list, ...) if
    it parses as one, ``true``/``false``/``none`` in any case, else the text itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_args(items) -> dict:
    """``["key=value", ...]`` -> ``{key: value}``.

    Raises:
        PluginError: on an item without ``=``, an empty or non-identifier key, or a repeat.
    """
    out: dict = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise PluginError(f"model argument {item!r} must look like key=value")
        if key in out:
            raise PluginError(f"model argument {key!r} given twice")
        out[key] = parse_value(value)
    return out


def split_spec(spec: str) -> tuple[str, dict]:
    """``"TARGET,key=value,..."`` -> ``(TARGET, {key: value})``.

    Raises:
        PluginError: on an empty target or malformed arguments.
    """
    target, *items = spec.split(",")
    if not target.strip():
        raise PluginError(f"model spec {spec!r} names no model")
    return target.strip(), parse_args(items)


def is_plugin_target(target: str) -> bool:
    """Whether ``target`` names a factory (``module:factory`` or ``file.py:factory``)."""
    left, sep, right = target.rpartition(":")
    return bool(sep and left and right)


def _inside(module, folder: Path) -> bool:
    """Whether ``module`` was loaded from a file (or is a package) under ``folder``."""
    places = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or ())]
    return any(p and Path(p).resolve().is_relative_to(folder) for p in places)


def _sibling_names(folder: Path) -> set[str]:
    """Top-level module names ``folder`` provides: its ``*.py`` files and sub-folders."""
    return {p.stem for p in folder.glob("*.py")} | {
        p.name for p in folder.iterdir() if p.is_dir() and p.name.isidentifier()
    }


def _found_elsewhere(top: str) -> bool:
    """Whether ``import top`` finds the same files without the plug-in's folder on
    ``sys.path`` (an installed package, or the working folder): such modules stay imported, so
    one package never exists twice."""
    loaded = getattr(sys.modules.get(top), "__spec__", None)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(top, None) if callable(find) else None
        if spec is not None:
            return bool(
                loaded is not None
                and spec.origin
                and loaded.origin
                and Path(spec.origin).resolve() == Path(loaded.origin).resolve()
            )
    return False


#: The modules each plug-in folder provided, kept out of ``sys.modules`` between its uses.
_FOLDER_MODULES: dict[Path, dict[str, object]] = {}


@contextmanager
def sibling_imports(folder: Path) -> Iterator[None]:
    """Make the modules beside a plug-in file importable while its file and its factory run.

    The rule: ``folder`` goes first on ``sys.path`` for the duration, so ``import wm`` finds
    ``folder/wm.py`` (or the package ``folder/wm/``) before anything installed. A module
    already imported under a sibling's name from elsewhere is set aside meanwhile and put back
    afterwards. The modules imported from ``folder`` are taken out of ``sys.modules`` again
    afterwards (the plug-in keeps its references to them) and put back, the same objects, the
    next time the folder's plug-in runs (its factory, ``build``: an unpickled checkpoint of a
    sibling's class finds that class), unless the same files are importable without
    ``folder`` (an installed package: it stays, so it never exists twice). So two plug-ins in
    two folders that each ``import wm`` get their own ``wm``, and nothing of one folder is
    found by a later import elsewhere. The price: a method called during evaluation must not
    import a sibling it did not import when its file ran.
    """
    folder = folder.resolve()
    siblings = _sibling_names(folder)
    hidden = {
        name: sys.modules.pop(name)
        for name in list(sys.modules)
        if name.partition(".")[0] in siblings and not _inside(sys.modules[name], folder)
    }
    sys.modules.update(_FOLDER_MODULES.get(folder, {}))
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        if entry in sys.path:
            sys.path.remove(entry)
        own = {
            name: module
            for name, module in sys.modules.items()
            if name.partition(".")[0] in siblings
            and _inside(module, folder)
            and not _found_elsewhere(name.partition(".")[0])
        }
        for name in own:
            del sys.modules[name]
        _FOLDER_MODULES[folder] = own
        sys.modules.update(hidden)


def _load_file(path: Path):
    """The module of a plug-in file, under a private name (its folder importable while it runs,
    ``sibling_imports``)."""
    if not path.is_file():
        raise PluginError(f"plug-in file {str(path)!r} does not exist")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"gridplan_plugin_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"{str(path)!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with sibling_imports(path.parent):
            spec.loader.exec_module(module)
    except Exception as err:
        sys.modules.pop(name, None)
        raise PluginError(f"importing {str(path)!r} failed: {_raised(err)}: {err}") from err
    return module


def _load_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        raise PluginError(
            f"cannot import module {name!r}: {err} (give an importable pkg.module:factory, or "
            "a file path ending in .py)"
        ) from err
    except Exception as err:
        raise PluginError(f"importing module {name!r} failed: {_raised(err)}: {err}") from err


def load_factory(target: str):
    """The factory named by ``module:factory`` or ``path/file.py:factory``.

    Raises:
        PluginError: if the target is malformed, the module or file cannot be imported, it has
            no such attribute (the message lists the callables it has), or the attribute is
            not callable.
    """
    left, sep, attr = target.rpartition(":")
    if not sep or not left or not attr:
        raise PluginError(
            f"--model {target!r} is neither a built-in model nor pkg.module:factory / "
            "path/file.py:factory"
        )
    module = _load_file(Path(left)) if left.endswith(".py") else _load_module(left)
    if not hasattr(module, attr):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise PluginError(
            f"{left!r} has no attribute {attr!r}; its public callables are: "
            f"{', '.join(found) or 'none'}"
        )
    factory = getattr(module, attr)
    if not callable(factory):
        raise PluginError(f"{target!r} is a {type(factory).__name__}, not a callable factory")
    return factory


def build(target: str, args: dict, task: Task, device: torch.device | str) -> object:
    """Call the factory of ``target`` with ``args`` (plus ``task``/``device`` where it takes them
    and they are unset) and return its model, unchecked.

    Raises:
        PluginError: if loading fails, the factory rejects its arguments or raises, or it
            returns something without a callable ``predict``.
    """
    factory = load_factory(target)
    module = target.rpartition(":")[0]
    folder = Path(module).parent if module.endswith(".py") else None
    kwargs = dict(args)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    for name, value in (("task", task), ("device", torch.device(device))):
        if name in params and name not in kwargs:
            kwargs[name] = value
    try:
        with sibling_imports(folder) if folder is not None else nullcontext():
            model = factory(**kwargs)
    except TypeError as err:
        raise PluginError(f"factory {target!r} rejected its arguments {args}: {err}") from err
    except Exception as err:
        raise PluginError(f"factory {target!r} raised {_raised(err)}: {err}") from err
    offers = capabilities_of(model)
    if not offers.transition and not offers.latent and not offers.history_state:
        raise PluginError(
            f"factory {target!r} returned a {type(model).__name__} without a callable "
            "predict(state, action, generator), a latent model's encode(obs) and "
            "predict_latent(z, action, generator), or a history model's init(observations, "
            "actions) and step(state, action, generator)"
        )
    return model


def _describe_rows(bad: torch.Tensor) -> str:
    rows = bad.reshape(bad.shape[0], -1).any(dim=1) if bad.dim() > 1 else bad
    idx = rows.nonzero().flatten()
    return f"{idx.numel()} of {rows.numel()} rows (first rows {idx[:5].tolist()})"


class _PluginCalls(Declared):
    """What the plug-in wrappers share: how errors name the plug-in, and guarded calls.

    Attributes:
        name: what to call the plug-in in messages (``file.factory``).
        source: the file it comes from, or None.
        contract: ``"state"`` or ``"latent"``: which table of ``signatures.METHODS`` its
            methods are checked against.
    """

    contract = "state"
    name = "model"
    source: str | None = None

    def who(self, method: str | None = None) -> str:
        """``name.method`` (or ``name``), and the file it comes from when known."""
        base = f"{self.name}.{method}" if method else self.name
        return base + (f" (from {self.source})" if self.source else "")

    def _where(self) -> str:
        """Where in a rollout a call happened, for messages ("" when not in one)."""
        return ""

    #: A wrapper's optional methods by their ``Capabilities`` flag, and the declarations it
    #: copies (``_wrap``).
    _OPTIONAL: dict[str, str] = {}
    _ATTRIBUTES: tuple[str, ...] = ()

    def _wrap(self, model, offers, name: str, source: str | None) -> None:
        """Hold ``model``: its declarations in ``_ATTRIBUTES`` copied from ``offers`` (its
        ``Capabilities``), and each optional method it has behind a guarded call."""
        self.inner = model
        self.name = name
        self.source = source
        for attr in self._ATTRIBUTES:
            setattr(self, attr, getattr(offers, attr))
        for flag, method in self._OPTIONAL.items():
            if getattr(offers, flag):
                setattr(self, method, self._guarded(method, getattr(model, method)))

    def _guarded(self, method: str, fn):
        def call(*args):
            return self._call(method, fn, *args)

        call.__name__ = method
        return call

    def _call(self, method: str, fn, *args):
        """``fn(*args)``; any exception becomes a ``PluginError`` naming the plug-in, the
        method and the shapes passed, and a call the method's signature cannot take names
        the signature expected (``signatures.mismatch_message``)."""
        try:
            return fn(*args)
        except PluginError:
            raise
        except Exception as err:
            spec = METHODS[(self.contract, method)]
            who = self.who(method) + (f" ({self._where()})" if self._where() else "")
            why = binding_error(fn, args) if isinstance(err, TypeError) else None
            if why is not None:
                raise PluginError(mismatch_message(who, spec, fn, args, why)) from err
            raise PluginError(
                f"{who} raised {_raised(err)}: {err} (called with {describe_call(spec, args)})"
            ) from err


class CheckedModel(_PluginCalls, WorldModel):
    """A plug-in behind the contract checks of the module docstring.

    Optional methods (``start_rollout``, ``predict_reward``, ``predict_members``,
    ``uncertainty``) exist on the wrapper exactly when the wrapped model has them;
    ``clamped`` counts the predicted values clamped into ``[0, 1]`` so far, ``predicted``
    every value ``predict`` returned.

    Args:
        model: the plug-in.
        name: what to call it in messages.
        source: where it is defined (a file path), named in messages beside ``name`` so two
            plug-ins of the same file name are told apart.

    Raises:
        PluginError: if the object has no callable ``predict``, or the model declares
            ``n_settings`` other than 1.
    """

    n_settings = 1

    def __init__(self, model, name: str = "model", source: str | None = None) -> None:
        offers = capabilities_of(model)
        if not offers.transition:
            hint = ""
            if isinstance(model, str):
                hint = (
                    "; a name such as 'oracle' or 'file.py:factory' is for python -m eval "
                    "--model, in Python pass the model (gridplan.models.plugins.build loads one)"
                )
            raise PluginError(
                f"{name} is a {type(model).__name__} without a callable "
                f"predict(state, action, generator){hint}"
            )
        if offers.n_settings != 1:
            raise PluginError(
                f"{name} declares n_settings={offers.n_settings!r}; plug-ins have one"
            )
        self.inner = model
        self.name = name
        self.source = source
        self.step = 0
        self.clamped = 0
        self.predicted = 0
        self._warned = False
        self._inner_starts = offers.rollout_start
        if offers.reward:
            self.predict_reward = self._checked_predict_reward
        if offers.ensemble:
            self.predict_members = self._checked_predict_members
        if offers.uncertainty:
            self.uncertainty = self._checked_uncertainty
        if isinstance(offers.members, int):
            self.members = offers.members
        # The world a plug-in declares decides the spec's world (evaluation.spec.fitted_to).
        if offers.world is not None:
            self.world = offers.world

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        self.step = 0
        if self._inner_starts:
            self._call("start_rollout", self.inner.start_rollout, batch, generator)

    def _where(self) -> str:
        return f"at imagined step {self.step}"

    def _check_tensor(
        self, method: str, out, shape: tuple, like: torch.Tensor
    ) -> tuple[float, float]:
        """Check type, shape, dtype, device and finiteness; returns ``(min, max)``."""
        if not isinstance(out, torch.Tensor):
            raise PluginError(
                f"{self.who(method)} must return a torch.Tensor, got {type(out).__name__}"
            )
        if tuple(out.shape) != shape:
            raise PluginError(
                f"{self.who(method)} returned shape {tuple(out.shape)}, expected {shape} "
                f"{self._where()}"
            )
        if out.dtype != like.dtype:
            raise PluginError(
                f"{self.who(method)} returned dtype {out.dtype}, expected {like.dtype} "
                f"(the input's) {self._where()}"
            )
        if out.device != like.device:
            raise PluginError(
                f"{self.who(method)} returned a tensor on {out.device}, expected "
                f"{like.device} (the input's device) {self._where()}"
            )
        return self._range(method, out)

    def _range(self, method: str, out: torch.Tensor) -> tuple[float, float]:
        """``(min, max)`` of a checked output, in one pass (NaN and inf propagate into them);
        only when they are not finite is the output scanned for the rows to name.

        Raises:
            PluginError: if ``out`` holds NaN or inf.
        """
        if out.numel() == 0:
            return 0.0, 0.0
        lo, hi = (float(v) for v in torch.aminmax(out))
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi
        bad = ~torch.isfinite(out)
        raise PluginError(
            f"{self.who(method)} returned non-finite values (NaN or inf) in "
            f"{_describe_rows(bad)} {self._where()}"
        )

    def predict(self, state, action, generator):
        self.step += 1
        out = self._call("predict", self.inner.predict, state, action, generator)
        lo, hi = self._check_tensor("predict", out, tuple(state.shape), state)
        self.predicted += out.numel()
        if lo < 0.0 or hi > 1.0:
            outside = int(((out < 0) | (out > 1)).sum())
            self.clamped += outside
            if not self._warned:
                warnings.warn(
                    f"{self.who('predict')} returned {outside} values outside [0, 1] "
                    f"(range [{lo:.4g}, {hi:.4g}]) {self._where()}; clamped to [0, 1] "
                    "(warned once per model)",
                    OutOfRangeWarning,
                    stacklevel=2,
                )
                self._warned = True
            out = out.clamp(0.0, 1.0)
        return out

    def _checked_predict_reward(self, state, action, next_state):
        out = self._call("predict_reward", self.inner.predict_reward, state, action, next_state)
        self._check_tensor("predict_reward", out, (state.shape[0],), state)
        return out

    def _checked_predict_members(self, state, action):
        out = self._call("predict_members", self.inner.predict_members, state, action)
        rows, width = state.shape
        if not isinstance(out, torch.Tensor) or out.dim() != 3:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise PluginError(
                f"{self.who('predict_members')} must return (K, {rows}, {width}), got {got}"
            )
        self._check_tensor("predict_members", out, (out.shape[0], rows, width), state)
        return out

    def _checked_uncertainty(self, state, action):
        out = self._call("uncertainty", self.inner.uncertainty, state, action)
        lowest, _ = self._check_tensor("uncertainty", out, (state.shape[0],), state)
        if lowest < 0:
            raise PluginError(
                f"{self.who('uncertainty')} returned negative scores in {_describe_rows(out < 0)}"
            )
        return out


class CheckedLatentModel(_PluginCalls):
    """A latent plug-in (``gridplan.models.latent_contract``) behind guarded calls: an
    exception in any of its methods, or a call its signature cannot take, becomes a
    ``PluginError`` naming the factory, its file, the method, the signature expected and the
    shapes passed; the latent contract's own checks (``check_latent_model``, and every output
    checked during evaluation) name it the same way through ``who``.

    The attributes ``obs_kind``, ``latent_dim``, ``world``, ``deterministic``, ``metadata``
    and ``bytes_per_row`` read the plug-in's (None where it has none); the optional methods
    (``decode``, ``reward``, ``value``, ``observe``) exist on the wrapper exactly when the
    plug-in has them.

    Args:
        model: the plug-in (callable ``encode`` and ``predict_latent``).
        name, source: as ``CheckedModel``.

    Raises:
        PluginError: if ``model`` lacks a callable ``encode`` or ``predict_latent``.
    """

    contract = "latent"
    #: The optional methods, by their ``Capabilities`` flag.
    _OPTIONAL = {
        "decoder": "decode",
        "latent_reward": "reward",
        "value": "value",
        "observer": "observe",
        "history_filter": "filter_latent",
    }
    _ATTRIBUTES = ("obs_kind", "latent_dim", "world", "deterministic", "metadata")

    def __init__(self, model, name: str = "model", source: str | None = None) -> None:
        offers = capabilities_of(model)
        if not offers.latent:
            raise PluginError(
                f"{name} is a {type(model).__name__} without callable encode(obs) and "
                "predict_latent(z, action, generator)"
            )
        self._wrap(model, offers, name, source)
        if offers.bytes_per_row is not None:
            self.bytes_per_row = offers.bytes_per_row

    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        return self._call("encode", self.inner.encode, obs)

    def predict_latent(
        self, z: torch.Tensor, action: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        return self._call("predict_latent", self.inner.predict_latent, z, action, generator)


class CheckedHistoryModel(_PluginCalls):
    """A history plug-in (``gridplan.models.opaque``) behind guarded calls, as
    ``CheckedLatentModel``: its attributes read the plug-in's (``history`` too), and
    ``decode``, ``reward`` and ``value`` exist on the wrapper exactly when the plug-in has
    them.

    Raises:
        PluginError: if ``model`` lacks a callable ``init`` or ``step``.
    """

    contract = "history"
    #: The optional methods, by their ``Capabilities`` flag.
    _OPTIONAL = {"decoder": "decode", "latent_reward": "reward", "value": "value"}
    _ATTRIBUTES = ("obs_kind", "world", "deterministic", "metadata", "history")

    def __init__(self, model, name: str = "model", source: str | None = None) -> None:
        offers = capabilities_of(model)
        if not offers.history_state:
            raise PluginError(
                f"{name} is a {type(model).__name__} without callable init(observations, "
                "actions) and step(state, action, generator)"
            )
        self._wrap(model, offers, name, source)

    def init(self, observations: torch.Tensor, actions: torch.Tensor):
        return self._call("init", self.inner.init, observations, actions)

    def step(self, state, action: torch.Tensor, generator: torch.Generator):
        return self._call("step", self.inner.step, state, action, generator)


def admit(
    model,
    task: TaskKind,
    device: torch.device | str = "cpu",
    name: str = "model",
    source: str | None = None,
):
    """``model`` checked once against its contract, each method exercised once on reset
    states of ``task``: the one boundary a model crosses (``docs/DESIGN.md``, "The interfaces
    a user implements").

    A latent model (``encode`` and ``predict_latent``, no ``predict``) goes behind a
    ``CheckedLatentModel`` held to the latent contract on ``task.world``
    (``check_latent_model``: declarations, world, shapes, dtypes, finite values, declared
    determinism); any other model goes behind ``checked``, is held to its declared world
    (``gridplan.models.contract.check_model_world``) and to ``check_contract`` (shapes,
    dtypes, devices, finite values, randomness only from its generator). The model returned
    carries its ``Capabilities`` (``gridplan.models.capabilities``) with the world and device
    it was checked on, so admitting it again there checks nothing twice (``python -m eval``
    admits a plug-in when it loads it, then ``gridplan.evaluate`` does).

    Args:
        model: a state or latent model.
        task: whose reset states exercise the model, and whose world the model declares.
        device: where the checks run.
        name, source: what errors call the model and the file it comes from.

    Returns:
        A built-in model itself, a plug-in behind its wrapper.

    Raises:
        PluginError: naming the plug-in (``name`` and ``source``), the first broken method or
            attribute and what is wrong with it.
        ValueError: if a state model declares another world than ``task``'s, naming both.
    """
    if checked_on(model, task.world, device):
        return model
    offers = capabilities_of(model)
    if offers.history_only:
        history = model
        if not isinstance(model, CheckedHistoryModel):
            history = CheckedHistoryModel(model, name, source)
        try:
            return record_checked(admit_history(history, task.world, device), task.world, device)
        except LatentContractError as err:
            raise PluginError(str(err)) from err
    if offers.latent_only:
        latent = model
        if not isinstance(model, CheckedLatentModel):
            latent = CheckedLatentModel(model, name, source)
        try:
            check_latent_model(latent, task.world, device)
        except LatentContractError as err:
            raise PluginError(str(err)) from err
        return record_checked(latent, task.world, device)
    model = checked(model, name, source)
    check_model_world(model, task.world)
    check_contract(model, task, device, name)
    return record_checked(model, task.world, device)


def check_plugin(
    model,
    task: TaskKind,
    device: torch.device | str,
    name: str = "model",
    source: str | None = None,
):
    """``admit``, under the name ``python -m eval`` and ``docs/how-to/plug-ins.md`` use."""
    return admit(model, task, device, name, source)


def checked(model, name: str = "model", source: str | None = None):
    """``model`` itself if it is a built-in type (``TRUSTED``), else a ``CheckedModel``."""
    if type(model) in TRUSTED or isinstance(model, CheckedModel):
        return model
    return CheckedModel(model, name, source)


def check_contract(model, task: Task, device: torch.device | str, name: str = "model") -> None:
    """Exercise every method ``model`` offers once on a small batch of reset states, and
    check that ``predict``'s randomness comes from its generator alone (``check_randomness``).

    Raises:
        PluginError: naming the first broken method and what is wrong with it.
    """
    model = checked(model, name)
    offers = capabilities_of(model)
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(0)
    state = dynamics.reset(task, CHECK_ROWS, gen)
    action = torch.arange(CHECK_ROWS, device=dev) % N_ACTIONS
    if offers.rollout_start:
        model.start_rollout(CHECK_ROWS, gen)
    nxt = model.predict(state, action, gen)
    check_randomness(model, state, action, name)
    if offers.reward:
        model.predict_reward(state, action, nxt)
    if offers.ensemble:
        model.predict_members(state, action)
    if offers.uncertainty:
        model.uncertainty(state, action)


def _label(model, name: str, method: str) -> str:
    who = getattr(model, "who", None)
    return who(method) if callable(who) else f"{name}.{method}"


def _global_generators(device: torch.device) -> list[torch.Generator]:
    """torch's global generators a model on ``device`` may draw from by mistake: the CPU's
    and, on a GPU, that device's."""
    gens = [torch.default_generator]
    if device.type == "cuda":
        gens.append(torch.cuda.default_generators[device.index or 0])
    return gens


def _global_seeds(seed: int, device: torch.device) -> None:
    import random

    import numpy as np

    for gen in _global_generators(device):
        gen.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def _one_step(model, state, action, seed: int, global_seed: int) -> torch.Tensor:
    """``predict`` from a fresh generator seeded ``seed``, the global generators (torch,
    NumPy, ``random``) seeded ``global_seed``."""
    _global_seeds(global_seed, state.device)
    gen = torch.Generator(device=state.device).manual_seed(seed)
    if capabilities_of(model).rollout_start:
        model.start_rollout(state.shape[0], gen)
    return model.predict(state, action, gen)


def check_randomness(model, state: torch.Tensor, action: torch.Tensor, name: str = "model"):
    """Check that ``predict``'s randomness comes only from the generator it is given: two
    calls from identically seeded generators must agree, with the global random generators
    (torch's, NumPy's, Python's ``random``) seeded alike and then seeded differently. The
    global generators' states are restored afterwards, and the clamp counts are left as
    they were.

    Raises:
        PluginError: if the same generator gives different outputs (naming whether the
            model reads a global random generator or another source, e.g. the clock or its
            own state that ``start_rollout`` does not reset).
    """
    import random

    import numpy as np

    gens = _global_generators(state.device)
    saved = ([g.get_state() for g in gens], random.getstate(), np.random.get_state())
    counts = {}
    if isinstance(model, CheckedModel):
        counts = {"clamped": model.clamped, "predicted": model.predicted}
    try:
        first = _one_step(model, state, action, 0, 1)
        again = _one_step(model, state, action, 0, 1)
        other = _one_step(model, state, action, 0, 2)
    finally:
        for gen, gen_state in zip(gens, saved[0], strict=True):
            gen.set_state(gen_state)
        random.setstate(saved[1])
        np.random.set_state(saved[2])
        for k, v in counts.items():
            setattr(model, k, v)
    if not torch.equal(first, again):
        raise PluginError(
            f"{_label(model, name, 'predict')} gave different outputs for identically "
            "seeded generators and global random generators: its randomness comes from "
            "elsewhere (the clock, the OS, or internal state that start_rollout does not "
            "reset); draw every random number from the generator argument"
        )
    if not torch.equal(first, other):
        raise PluginError(
            f"{_label(model, name, 'predict')} depends on a global random generator "
            "(torch.rand/randn/randint without generator=, numpy.random or random): the "
            "same generator gave different outputs once the global generators were "
            "reseeded. Pass the generator argument to every draw, e.g. "
            "torch.randn(shape, generator=generator, device=state.device)"
        )

"""Bring your own world model: load it by import path and hold it to the ``WorldModel`` contract.

A plug-in is a factory, named ``pkg.module:factory`` (importable) or ``path/to/file.py:factory``
(a file, loaded under a private module name), called with keyword arguments
(``--model-arg key=value``, or inline ``TARGET,key=value,...``) and returning a model:

- ``predict(state (N, 12), action (N,), generator) -> (N, 12)`` (required): one imagined step;
  ``state`` is float32 in ``[0, 1]`` on the evaluation device (possibly the model's own previous
  output), ``action`` long in ``0..3``, ``generator`` the only randomness it may use. The output
  must be a tensor of the input's shape, dtype and device;
- ``start_rollout(batch, generator)`` (optional): called before each imagined rollout;
- ``predict_reward(state, action, next_state) -> (N,)`` (optional): the model's own reward;
  where given, the planner (``gridplan.planning.scorers.RewardScorer``, the scorer it picks for
  a ``CheckedModel`` that predicts its reward), the probes and the ladder's imagined rollouts
  use it instead of the true reward on predicted states (termination is still read from them);
- ``uncertainty(state, action) -> (N,)`` or ``predict_members(state, action) -> (K, N, 12)``
  (optional): see ``gridplan.evaluation.uncertainty``.

A factory may instead return a latent model (``gridplan.models.latent_contract``: ``encode(obs)``,
``predict_latent(z, action, generator)``, optional ``decode``, ``reward``, ``value``). It is held
to the latent contract (``check_latent_model``: attributes, shapes, dtypes, finite values,
declared determinism) and evaluated through its decoder, or the frozen protocol decoder
(``gridplan.evaluation.latent_eval``).

If the factory has parameters named ``task`` or ``device`` that the arguments leave unset, it
receives the evaluation's ``Task`` and device.

Every call of a plug-in goes through ``CheckedModel``, which turns a broken output into an error
that names the method, the imagined step and the rows: wrong type, shape, dtype or device, and
non-finite values are errors. Values outside ``[0, 1]`` are clamped to it with one
``OutOfRangeWarning`` per model (how many values, their range, the step) and a note in the
report. The planner, V* and the anchor policies read a state through rounded, clamped cells and
flags thresholded at 0.5, so clamping never changes how a predicted state is read; the model's
next imagined step starts from the clamped state, and squared errors measure the clamped
prediction.
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
from pathlib import Path

import torch

from gridplan.core.constants import N_ACTIONS
from gridplan.core.env import reset
from gridplan.core.tasks import Task
from gridplan.models.contract import WorldModel
from gridplan.models.latent_contract import LatentThroughDecoder, is_latent_model
from gridplan.models.learned import LearnedWorldModel
from gridplan.models.noise import AR1NoiseModel, NoiseModel, OracleModel

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


def _load_file(path: Path):
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
    kwargs = dict(args)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    for name, value in (("task", task), ("device", torch.device(device))):
        if name in params and name not in kwargs:
            kwargs[name] = value
    try:
        model = factory(**kwargs)
    except TypeError as err:
        raise PluginError(f"factory {target!r} rejected its arguments {args}: {err}") from err
    except Exception as err:
        raise PluginError(f"factory {target!r} raised {_raised(err)}: {err}") from err
    if not callable(getattr(model, "predict", None)) and not is_latent_model(model):
        raise PluginError(
            f"factory {target!r} returned a {type(model).__name__} without a callable "
            "predict(state, action, generator), nor a latent model's encode(obs) and "
            "predict_latent(z, action, generator)"
        )
    return model


def _describe_rows(bad: torch.Tensor) -> str:
    rows = bad.reshape(bad.shape[0], -1).any(dim=1) if bad.dim() > 1 else bad
    idx = rows.nonzero().flatten()
    return f"{idx.numel()} of {rows.numel()} rows (first rows {idx[:5].tolist()})"


class CheckedModel(WorldModel):
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
        if not callable(getattr(model, "predict", None)):
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
        settings = getattr(model, "n_settings", 1)
        if settings != 1:
            raise PluginError(f"{name} declares n_settings={settings!r}; plug-ins have one")
        self.inner = model
        self.name = name
        self.source = source
        self.step = 0
        self.clamped = 0
        self.predicted = 0
        self._warned = False
        for method in ("predict_reward", "predict_members", "uncertainty"):
            if callable(getattr(model, method, None)):
                setattr(self, method, getattr(self, f"_checked_{method}"))
        members = getattr(model, "members", None)
        if isinstance(members, int):
            self.members = members

    def start_rollout(self, batch: int, generator: torch.Generator) -> None:
        self.step = 0
        start = getattr(self.inner, "start_rollout", None)
        if callable(start):
            self._call("start_rollout", start, batch, generator)

    def _call(self, method: str, fn, *args):
        try:
            return fn(*args)
        except PluginError:
            raise
        except Exception as err:
            raise PluginError(
                f"{self._who(method)} raised {_raised(err)} (imagined step {self.step}): {err}"
            ) from err

    def _who(self, method: str) -> str:
        """``name.method``, and the file it comes from when known."""
        return f"{self.name}.{method}" + (f" (from {self.source})" if self.source else "")

    def _where(self) -> str:
        return f"at imagined step {self.step}"

    def _check_tensor(
        self, method: str, out, shape: tuple, like: torch.Tensor
    ) -> tuple[float, float]:
        """Check type, shape, dtype, device and finiteness; returns ``(min, max)``."""
        if not isinstance(out, torch.Tensor):
            raise PluginError(
                f"{self._who(method)} must return a torch.Tensor, got {type(out).__name__}"
            )
        if tuple(out.shape) != shape:
            raise PluginError(
                f"{self._who(method)} returned shape {tuple(out.shape)}, expected {shape} "
                f"{self._where()}"
            )
        if out.dtype != like.dtype:
            raise PluginError(
                f"{self._who(method)} returned dtype {out.dtype}, expected {like.dtype} "
                f"(the input's) {self._where()}"
            )
        if out.device != like.device:
            raise PluginError(
                f"{self._who(method)} returned a tensor on {out.device}, expected "
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
            f"{self._who(method)} returned non-finite values (NaN or inf) in "
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
                    f"{self._who('predict')} returned {outside} values outside [0, 1] "
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
                f"{self._who('predict_members')} must return (K, {rows}, {width}), got {got}"
            )
        self._check_tensor("predict_members", out, (out.shape[0], rows, width), state)
        return out

    def _checked_uncertainty(self, state, action):
        out = self._call("uncertainty", self.inner.uncertainty, state, action)
        lowest, _ = self._check_tensor("uncertainty", out, (state.shape[0],), state)
        if lowest < 0:
            raise PluginError(
                f"{self._who('uncertainty')} returned negative scores in {_describe_rows(out < 0)}"
            )
        return out


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
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(0)
    state = reset(CHECK_ROWS, gen, task)
    action = torch.arange(CHECK_ROWS, device=dev) % N_ACTIONS
    if callable(getattr(model, "start_rollout", None)):
        model.start_rollout(CHECK_ROWS, gen)
    nxt = model.predict(state, action, gen)
    check_randomness(model, state, action, name)
    if callable(getattr(model, "predict_reward", None)):
        model.predict_reward(state, action, nxt)
    if callable(getattr(model, "predict_members", None)):
        model.predict_members(state, action)
    if callable(getattr(model, "uncertainty", None)):
        model.uncertainty(state, action)


def _label(model, name: str, method: str) -> str:
    who = getattr(model, "_who", None)
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
    if callable(getattr(model, "start_rollout", None)):
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
    counts = {k: getattr(model, k) for k in ("clamped", "predicted") if hasattr(model, k)}
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

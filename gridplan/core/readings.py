"""Readings of the paper's ambiguous choices about the controlled family and the planner.

The paper (§3 "Planner", §4.2, appendix D) describes the oracle, the family
``M(sigma_r, sigma_i)`` and the planner in words that admit more than one implementation.
Each place where the text leaves a choice open is one switch of a ``Reading``; a reading is
one value for every switch. The world models (``gridplan.models.noise``), the fused leaf scorer
(``gridplan.planning.fused``) and the experiments take a reading; ``project`` (the default) is the
implementation this repository started from (with the tie rule of ``docs/PREREGISTERED.md``,
Rule 1), ``paper`` the combination whose measurements
come closest to the paper's Tables 1-2 and §5.3 (``docs/RESULTS.md`` argues the choice).

The switches (first value: ``project``):

* ``clamp`` -- ``True``: every prediction is clamped to ``[0, 1]``; ``False``: it is not
  (§3 says the state lies in ``[0, 1]``, §4.2 only that noise is added). Either way the
  true transition and the V* lookup read positions through cells clamped to the grid.
* ``transition`` -- ``"cells"``: the true transition outputs the clean cells and flags of the
  rounded belief, so noise below half a cell is snapped away before the next imagined step;
  ``"belief"``: it outputs the belief plus the move, so the sub-cell offset of agent, key
  and ``d1`` is carried (``d2`` is redrawn, flags stay clean).
* ``bits`` -- ``"thresholded"``: the static ``c1`` and the toggling ``c2`` come out of the
  transition as clean bits; ``"carried"``: their noisy value is carried (``c1 -> c1``,
  ``c2 -> 1 - c2``), so their noise compounds like a position's.
* ``flags`` -- ``"thresholded"``: the carrying and door flags come out of the transition as
  clean bits; ``"carried"``: their noisy value is carried until their event (a pickup, a
  door opening) sets them to 1, so their noise compounds until it flips them (§4.2).
* ``flag_noise`` -- ``"sigma_r/7"``: the carrying and door flags get ``sigma_r / 7``, the
  normalized size of ``sigma_r`` grid cells, like the positions; ``"sigma_r"``: they get
  ``sigma_r`` itself (a flag is a unit-range dimension; §4.2 has flag noise flip the flags
  in time, which ``sigma_r / 7 <= 0.05`` never does at a 0.5 threshold).
* ``distractors`` -- ``"sampled"``: the oracle and the family sample the random walk of
  ``d1`` and the uniform redraw of ``d2``; ``"expected"``: they predict each at its expected
  next position (``d2`` at the grid's centre).
* ``tree`` -- ``"independent"``: the planner rolls every leaf with its own draws;
  ``"shared-prefix"``: one draw per tree node, so leaves share the noise of their common
  path (``4 + 16 + ... + 4^D`` draws per dim and decision). It is only the default of the
  planner's one tree knob: ``Planner(tree=None)`` reads it from the model's reading, an
  explicit ``Planner(tree=...)`` wins over it (``gridplan.planning.registry``).
* ``ties`` -- ``"first"``: among first actions tied for the best value the planner takes the
  lowest index in ``gridplan.core.constants``' action order; ``"random"``: it takes one
  uniformly at random (the implementation's earlier default). §3 "Planner" executes "the first
  action of the best plan" and §5.4 (ii) speaks of "the closed-loop deterministic policy", so
  ``project`` and ``paper`` take ``"first"`` (``docs/PREREGISTERED.md``, Rule 1). The tie-break
  uniforms are drawn under both rules, so the model's noise stream is the same and only exact
  ties decide differently. Like ``tree`` it is the default of a planner knob:
  ``Planner(ties=None)`` reads it from the model's reading (a model without one gets
  ``project``'s), an explicit ``Planner(ties=...)`` wins (``gridplan.planning.planner``).

Presets are registered by name (``get``, ``names``, ``register``); a results folder of a
reading other than ``project`` is named after it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

Transition = Literal["cells", "belief"]
Bits = Literal["thresholded", "carried"]
Flags = Literal["thresholded", "carried"]
FlagNoise = Literal["sigma_r/7", "sigma_r"]
Distractors = Literal["sampled", "expected"]
Tree = Literal["independent", "shared-prefix"]
Ties = Literal["first", "random"]

#: Allowed values of every switch, first value the ``project`` one.
CHOICES: dict[str, tuple] = {
    "clamp": (True, False),
    "transition": ("cells", "belief"),
    "bits": ("thresholded", "carried"),
    "flags": ("thresholded", "carried"),
    "flag_noise": ("sigma_r/7", "sigma_r"),
    "distractors": ("sampled", "expected"),
    "tree": ("independent", "shared-prefix"),
    "ties": ("first", "random"),
}
#: A reading's name becomes a folder name: lower-case letters, digits and dashes.
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class Reading:
    """One value for every ambiguous choice (the module docstring describes them).

    Attributes:
        name: registry and folder name (``NAME_PATTERN``).
        clamp: clamp predictions to ``[0, 1]``.
        transition: ``"cells"`` or ``"belief"``.
        bits: ``"thresholded"`` or ``"carried"`` (``c1``, ``c2``).
        flags: ``"thresholded"`` or ``"carried"`` (carrying and door flags).
        flag_noise: ``"sigma_r/7"`` or ``"sigma_r"`` (carrying and door flags).
        distractors: ``"sampled"`` or ``"expected"``.
        tree: ``"independent"`` or ``"shared-prefix"``.
        ties: ``"first"`` or ``"random"`` (the planner's tie rule among best first actions).

    Raises:
        ValueError: on a malformed name or a value outside ``CHOICES``.
    """

    name: str
    clamp: bool = True
    transition: Transition = "cells"
    bits: Bits = "thresholded"
    flags: Flags = "thresholded"
    flag_noise: FlagNoise = "sigma_r/7"
    distractors: Distractors = "sampled"
    tree: Tree = "independent"
    ties: Ties = "first"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"reading name must be lower-case letters, digits and dashes, got {self.name!r}"
            )
        for key, allowed in CHOICES.items():
            value = getattr(self, key)
            if value not in allowed or type(value) is not type(allowed[0]):
                raise ValueError(
                    f"reading {self.name!r}: {key} must be one of {allowed}, got {value!r}"
                )

    def switches(self) -> dict[str, bool | str]:
        """The switch values by name (for reports and JSON)."""
        return {key: getattr(self, key) for key in CHOICES}

    def differences(self, other: Reading) -> dict[str, bool | str]:
        """Switches whose value differs from ``other``'s, with this reading's value."""
        mine, theirs = self.switches(), other.switches()
        return {k: v for k, v in mine.items() if v != theirs[k]}

    def replace(self, name: str, **switches) -> Reading:
        """A new reading called ``name`` with some switches changed.

        Raises:
            ValueError: on an unknown switch or a bad value.
        """
        unknown = set(switches) - set(CHOICES)
        if unknown:
            raise ValueError(f"unknown reading switches {sorted(unknown)}; valid: {list(CHOICES)}")
        return dataclasses.replace(self, name=name, **switches)


def with_ties(reading: Reading, ties: str | None) -> Reading:
    """``reading`` under the tie rule ``ties``: ``reading`` itself when ``ties`` is None or its
    own value, else a reading named ``<name>-ties-<ties>`` that differs only in ``ties`` (so its
    results get a folder of their own, ``gridplan.experiments.runner.reading_root``).

    Raises:
        ValueError: if ``ties`` is not one of ``CHOICES["ties"]``.
    """
    check(reading)
    if ties is not None and ties not in CHOICES["ties"]:
        raise ValueError(f"ties must be one of {CHOICES['ties']}, got {ties!r}")
    if ties is None or ties == reading.ties:
        return reading
    return reading.replace(f"{reading.name}-ties-{ties}", ties=ties)


def check(reading: Reading) -> Reading:
    """Return ``reading`` if it is a ``Reading``.

    Raises:
        TypeError: naming what was passed instead (resolve a name with ``get``).
    """
    if not isinstance(reading, Reading):
        hint = f" {reading!r}; resolve a name with gridplan.core.readings.get" if isinstance(
            reading, str
        ) else ""
        raise TypeError(f"reading must be a gridplan.core.readings.Reading, got "
                        f"{type(reading).__name__}{hint}")
    return reading


#: The implementation this repository started from (the default everywhere).
PROJECT = Reading("project")
#: The measured ladder: each reading changes one switch of the one before it, in the order
#: the evidence of ``docs/RESULTS.md`` ("Readings") takes them.
UNCLAMPED = PROJECT.replace("unclamped", clamp=False)
NOISY_BITS = UNCLAMPED.replace("noisy-bits", bits="carried")
EXPECTED_DISTRACTORS = NOISY_BITS.replace("expected-distractors", distractors="expected")
FLAG_SIGMA_R = EXPECTED_DISTRACTORS.replace("flag-sigma-r", flag_noise="sigma_r")
CARRIED_FLAGS = FLAG_SIGMA_R.replace("carried-flags", flags="carried")
BELIEF = CARRIED_FLAGS.replace("belief", transition="belief")
SHARED_PREFIX = BELIEF.replace("shared-prefix", tree="shared-prefix")
LADDER = (
    PROJECT,
    UNCLAMPED,
    NOISY_BITS,
    EXPECTED_DISTRACTORS,
    FLAG_SIGMA_R,
    CARRIED_FLAGS,
    BELIEF,
    SHARED_PREFIX,
)
#: The tree alone, beside today's model: what the search changes by itself.
PROJECT_SHARED_PREFIX = PROJECT.replace("project-shared-prefix", tree="shared-prefix")
#: The reading that best matches the paper's Tables 1-2 and §5.3: no measured reading
#: reproduces more of the paper's effects, its model switches are what §4.2 describes, and
#: its tree brings E5's Task B closest to the paper's (the argument and the numbers:
#: ``docs/RESULTS.md``, "Readings").
PAPER = SHARED_PREFIX.replace("paper")

_REGISTRY: dict[str, Reading] = {}


def register(reading: Reading, *, overwrite: bool = False) -> Reading:
    """Add ``reading`` to the registry under its name and return it.

    Raises:
        TypeError: if ``reading`` is not a ``Reading``.
        ValueError: if the name is taken by a different reading and ``overwrite`` is false.
    """
    check(reading)
    old = _REGISTRY.get(reading.name)
    if old is not None and old != reading and not overwrite:
        raise ValueError(f"reading {reading.name!r} is already registered; pass overwrite=True")
    _REGISTRY[reading.name] = reading
    return reading


def unregister(name: str) -> None:
    """Remove a reading from the registry (tests that register temporary ones use it)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """Registered reading names, in registration order."""
    return tuple(_REGISTRY)


def get(reading: str | Reading) -> Reading:
    """Resolve a reading name (or pass a ``Reading`` through).

    Raises:
        ValueError: if the name is not registered (the message lists the valid names).
        TypeError: if ``reading`` is neither a string nor a ``Reading``.
    """
    if isinstance(reading, Reading):
        return reading
    if not isinstance(reading, str):
        raise TypeError(f"reading must be a name or a Reading, got {type(reading).__name__}")
    try:
        return _REGISTRY[reading]
    except KeyError:
        raise ValueError(
            f"unknown reading {reading!r}; valid readings are {', '.join(_REGISTRY)}"
        ) from None


for _reading in (*LADDER, PROJECT_SHARED_PREFIX, PAPER):
    register(_reading)

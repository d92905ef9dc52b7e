"""The experiment settings composed by Hydra from configs/experiments/
(gridplan/experiments/settings.py): profiles' protocols interpolated, per-profile files
holding only their changes, each dataclass checking itself."""

import pytest

from gridplan.experiments import settings
from gridplan.experiments.profiles import PROFILES
from gridplan.experiments.settings import E6Config, load_settings


@pytest.mark.parametrize("name", list(PROFILES))
def test_groups_take_the_profiles_protocols(name):
    p = PROFILES[name]
    assert settings.E1[name].protocol == p.controlled
    assert settings.E3[name].protocol == p.learned
    assert settings.E4[name].model_seeds == p.learned.seeds
    assert settings.E7[name].depths == (p.learned.depth, p.controlled.depth)
    assert settings.E2[name].protocol.n_windows == p.controlled.n_windows
    assert all(getattr(settings, g)[name].n_resamples == p.n_resamples for g in ("E1", "E6"))


def _loop(spec) -> tuple:
    """The closed loop and windows of a spec: what a group's protocol sets."""
    return (spec.depth, spec.seeds, spec.episodes, spec.n_windows, spec.horizon)


def test_profiles_change_only_what_their_files_set():
    assert settings.E2["tiny"].sweep_sigma_r == settings.E1["tiny"].sigma_r == (0.0, 0.35)
    assert settings.E2["quick"].protocol.seeds == (100, 101)
    assert settings.E2["quick"].protocol.episodes == 6
    assert settings.E5["full"].protocol.seeds == tuple(range(8))
    quick = PROFILES["quick"].controlled
    assert _loop(settings.E5["quick"].protocol) == _loop(quick.replace(episodes=15))
    assert _loop(settings.E6["quick"].protocol) == _loop(quick.replace(episodes=8))
    assert settings.E3["quick"].rows == settings.E3["full"].rows
    assert [r.budget for r in settings.E3["tiny"].settings] == ["600", "600", "200", "400"]
    assert settings.E7["quick"].zoo.seeds == settings.E7["full"].zoo.seeds[:1]


def test_overrides_compose_and_tuples_stay_tuples():
    s = load_settings("tiny", ["+e6.fan_seed=4", "e1.sigma_r=[0.0,0.2]"])
    assert s.e6.fan_seed == 4
    assert s.e1.sigma_r == (0.0, 0.2)
    assert isinstance(s.e6.models[0], tuple) and isinstance(s.e4.fvi.hidden, tuple)
    assert isinstance(s.e6, E6Config)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["e6.ar1_models=[[0.1,0.1]]"], "ar1_models"),
        (["e6.depths=[1]"], "must end at the protocol's depth"),
        (["e1.n_resamples=many"], "could not be converted to Integer at e1.n_resamples"),
        (["profile.learned.episodes=0"], "EvalSpec.episodes must be an integer >= 1"),
        (["+e2.sweep=1"], "sweep"),
    ],
)
def test_bad_settings_are_refused_naming_the_problem(overrides, message):
    with pytest.raises(ValueError, match=message):
        load_settings("tiny", overrides)


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(ValueError, match="full"):
        load_settings("nope")

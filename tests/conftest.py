"""Shared test helpers: hand-built states, random discrete states, replayed distractor draws."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch
from paper_layout import CELL_SCALE, DOOR_CELL, GRID_SIZE, STATE_DIM, WALL_X

from gridplan.planning.reference import RefState, ref_decode

# The tiers (core/, planning/, evaluation/, training/, experiments/, adapters/) share the
# helper modules beside this file.
sys.path.insert(0, str(Path(__file__).resolve().parent))


def build_state(
    agent=(0, 0),
    key=(0, 1),
    carrying=False,
    door_open=False,
    c1=False,
    c2=False,
    d1=(0, 0),
    d2=(0, 0),
    rows=1,
) -> torch.Tensor:
    """``(rows, 12)`` float32 copies of one state given by cells ``(x, y)`` and bool flags.

    A carried key sits on the agent's cell, as the environment keeps it.
    """
    key = agent if carrying else key
    cells = [*agent, *key]
    flags = [carrying, door_open, c1, c2]
    row = [c / CELL_SCALE for c in cells] + [float(f) for f in flags]
    row += [c / CELL_SCALE for c in (*d1, *d2)]
    return torch.tensor([row] * rows, dtype=torch.float32)


def random_discrete_states(batch: int, generator: torch.Generator) -> torch.Tensor:
    """``(batch, 12)`` states on exact cells anywhere the agent can stand (off the wall column
    except the door), the key on a western cell or carried, all four flags random."""
    free = [(x, y) for x in range(GRID_SIZE) for y in range(GRID_SIZE) if x != WALL_X]
    free = torch.tensor([*free, DOOR_CELL])
    agent = free[torch.randint(0, len(free), (batch,), generator=generator)]
    key = torch.randint(0, GRID_SIZE, (batch, 2), generator=generator)
    key[:, 0] %= WALL_X
    flags = torch.randint(0, 2, (batch, 4), generator=generator).bool()
    key = torch.where(flags[:, :1], agent, key)
    dist = torch.randint(0, GRID_SIZE, (batch, 4), generator=generator)
    cols = [agent / CELL_SCALE, key / CELL_SCALE, flags.float(), dist / CELL_SCALE]
    return torch.cat(cols, dim=1).float()


def replay_distractor_draws(
    generator: torch.Generator, batch: int
) -> tuple[list[int], list[tuple[int, int]]]:
    """The d1 move indices ``(B,)`` and d2 cells ``(B, 2)`` that the next ``env.step`` of
    ``batch`` rows will draw from ``generator``, read from a copy so the original is untouched.

    Mirrors the documented draw order of ``gridplan.core.env.transition``: first the d1 walk, then
    the d2 cell. If that order changes, the reference comparisons fail loudly.
    """
    copy = torch.Generator(device=generator.device).set_state(generator.get_state())
    moves = torch.randint(0, 5, (batch,), generator=copy, device=generator.device)
    cells = torch.randint(0, GRID_SIZE, (batch, 2), generator=copy, device=generator.device)
    return moves.tolist(), [tuple(c) for c in cells.tolist()]


def to_ref(row: torch.Tensor) -> RefState:
    """One ``(12,)`` state row as the reference's discrete state."""
    assert row.shape == (STATE_DIM,)
    return ref_decode(row.tolist())


@pytest.fixture(autouse=True)
def reports_match_their_schema(monkeypatch):
    """Every JSON report a test writes (``.eval.json``, ``--json``, ``.card.json``, a
    comparison) is validated against its published schema (``docs/schema/``) as it is
    written; ``helpers_schema`` tells the kinds apart."""
    import json as _json

    from helpers_schema import validate

    import gridplan.evaluation.card as card
    import gridplan.evaluation.schema as schema

    original = schema.write_text

    def checked_write(path, text):
        if str(path).endswith(".json"):
            validate(_json.loads(text))
        original(path, text)

    monkeypatch.setattr(schema, "write_text", checked_write)
    monkeypatch.setattr(card, "write_text", checked_write)


@pytest.fixture
def make_state():
    """Factory for hand-built ``(rows, 12)`` states; see ``build_state``."""
    return build_state


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator seeded 0."""
    return torch.Generator().manual_seed(0)


@pytest.fixture
def random_states():
    """Factory ``(batch, generator) -> (batch, 12)`` random discrete states."""
    return random_discrete_states


@pytest.fixture
def replay_draws():
    """``(generator, batch) -> (d1 moves, d2 cells)`` of the next ``env.step``."""
    return replay_distractor_draws


@pytest.fixture
def ref_of():
    """``(12,) row -> RefState``."""
    return to_ref


@pytest.fixture
def browser():
    """Headless Chromium driven by Selenium (Debian's ``chromium`` and ``chromium-driver``);
    skips the test where they are not installed."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed "
            "(GRIDPLAN_BROWSER=1 bash scripts/setup.sh installs them)"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(chromedriver))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()

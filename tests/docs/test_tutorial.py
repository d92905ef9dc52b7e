"""The tutorial docs/tutorials/evaluate_your_model.py runs: Jupytext reads the percent script
into a notebook and nbclient executes every cell in a fresh kernel, as a reader would; its own
asserts check the comparison it draws."""

from __future__ import annotations

import os
import time

import pytest
from helpers_docs import REPO

TUTORIAL = REPO / "docs" / "tutorials" / "evaluate_your_model.py"
#: The tutorial's budget on 2 CPU cores.
BUDGET_S = 120


@pytest.mark.slow
def test_the_tutorial_executes_every_cell_within_its_budget(tmp_path, monkeypatch):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    notebook = jupytext.read(TUTORIAL)
    assert [c.cell_type for c in notebook.cells].count("code") >= 5
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    client = nbclient.NotebookClient(
        notebook,
        timeout=BUDGET_S,
        kernel_name="python3",
        resources={"metadata": {"path": tmp_path}},
    )
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    outputs = "".join(
        out.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.outputs
    )
    assert "success A - B = -" in outputs and " forgetful: E_tot " in outputs
    assert wall < BUDGET_S, f"the tutorial took {wall:.0f} s"

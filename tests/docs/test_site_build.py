"""The documentation site builds with warnings as errors (``mkdocs build --strict``): every
page of the nav exists, every relative link and anchor resolves, every module of the API
reference renders."""

from __future__ import annotations

import pytest
from helpers_docs import build_site

pytest.importorskip("mkdocs", reason="the site's packages are the `docs` extra")


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page(tmp_path):
    site = tmp_path / "site"
    done = build_site(site)
    assert done.returncode == 0, done.stderr[-4000:]
    for page in (
        "index.html",
        "results/e1/index.html",
        "api/models/index.html",
        "tutorials/evaluate_your_model/index.html",
        "PERFORMANCE/index.html",
    ):
        assert (site / page).is_file(), page
    assert "gridplan.models.noise.NoiseModel" in (site / "api/models/index.html").read_text()

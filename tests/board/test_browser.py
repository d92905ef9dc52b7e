"""The leaderboard site in a real browser (headless Chromium, the ``browser`` fixture of
``tests/conftest.py``), opened from the file system: the suite table renders, a click on a
column title sorts its rows, every image loads and every link of every page reaches a file."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest
from helpers_board import filled_board

from gridplan.board import render_site

MODELS_SHOWN = "return [...document.querySelectorAll('#leaderboard tbody tr td:first-child')]" \
    ".map(td => td.textContent)"


def _click(browser, col: int) -> list[str]:
    browser.find_element("css selector", f'#leaderboard th[data-col="{col}"]').click()
    return browser.execute_script(MODELS_SHOWN)


@pytest.mark.slow
def test_the_suite_table_sorts_on_click_and_every_link_reaches_a_file(tmp_path, browser):
    site = render_site(filled_board(tmp_path / "board"), tmp_path / "site").parent
    browser.get((site / "suite-quick.html").as_uri())
    assert browser.title == "suite quick - gridplan leaderboard"
    assert browser.execute_script(MODELS_SHOWN) == ["oracle", "mlp-20k", "noise(0.35,0.1)"]
    # quick-a's E_tot (column 5): lowest first, then reversed; quick-b's DRPE (column 8):
    # lowest first with the MLP's n/a last; the model column: alphabetical.
    assert _click(browser, 5) == ["noise(0.35,0.1)", "oracle", "mlp-20k"]
    assert _click(browser, 5) == ["mlp-20k", "oracle", "noise(0.35,0.1)"]
    assert _click(browser, 8) == ["oracle", "noise(0.35,0.1)", "mlp-20k"]
    assert _click(browser, 2) == ["oracle", "mlp-20k", "noise(0.35,0.1)"]
    assert _click(browser, 0) == ["mlp-20k", "noise(0.35,0.1)", "oracle"]
    title = browser.find_element("css selector", '#leaderboard th[data-col="0"]')
    title.send_keys("\ue007")  # Enter, on the focused title: the order reverses
    assert browser.execute_script(MODELS_SHOWN) == ["oracle", "noise(0.35,0.1)", "mlp-20k"]
    sorted_by = browser.execute_script(
        "return [...document.querySelectorAll('th[aria-sort]')].map(th => th.dataset.col)")
    assert sorted_by == ["0"]

    pages, seen = [site / "index.html"], set()
    while pages:
        page = pages.pop()
        if page in seen:
            continue
        seen.add(page)
        browser.get(page.as_uri())
        images = browser.execute_script(
            "return [...document.images].map(i => [i.src, i.complete, i.naturalWidth])")
        assert [src for src, done, width in images if not done or width == 0] == [], page
        for href in browser.execute_script("return [...document.links].map(a => a.href)"):
            url = urlparse(urldefrag(href)[0])
            target = Path(unquote(url.path))
            assert url.scheme == "file" and target.is_file(), (page, href)
            if target.suffix == ".html":
                pages.append(target)
    cards = {p.name for p in seen if p.parent.name == "models"}
    assert len(cards) == 3 and site / "suite-quick.html" in seen


BASELINES = Path(__file__).resolve().parents[2] / "docs" / "board-site"
CELL = "return [...document.querySelectorAll('#leaderboard tbody tr')].map(tr => " \
    "tr.children[{col}].dataset.sort ?? tr.children[{col}].textContent)"


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["quick", "paper"])
def test_the_published_baseline_board_renders_and_sorts(browser, suite):
    # The baseline board of docs/board-site (gridplan-eval --suite NAME --baselines): at least
    # ten models, and a click on a track's E_tot title orders the rows by that number.
    page = BASELINES / f"suite-{suite}.html"
    browser.get(page.as_uri())
    models = browser.execute_script(MODELS_SHOWN)
    assert len(models) >= 10 and "oracle" in models
    header = browser.find_element("css selector", '#leaderboard th[data-col="5"]')
    assert header.text.strip() == "E_tot"
    _click(browser, 5)
    shown = [float(v) for v in browser.execute_script(CELL.format(col=5)) if v not in ("", "n/a")]
    assert shown == sorted(shown) and len(shown) >= 10
    for href in browser.execute_script("return [...document.links].map(a => a.href)"):
        target = Path(unquote(urlparse(urldefrag(href)[0]).path))
        assert target.is_file(), href

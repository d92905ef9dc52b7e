"""The built site in a real browser: `mkdocs build --strict` into a temporary folder, served on
127.0.0.1 by ``http.server``, opened in headless Chromium (the ``browser`` fixture of
``tests/conftest.py``). The home page and a results page render with their headings, every
image of the results page loaded, and every internal link they hold answers 200.
"""

from __future__ import annotations

import functools
import http.server
import threading
import urllib.error
import urllib.request
from urllib.parse import urldefrag, urlparse

import pytest
from helpers_docs import build_site

#: Pages opened in the browser, with a heading each must show.
PAGES = {"": "gridplan", "results/e1/": "E1 — matched total error"}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's signature)
        pass


@pytest.fixture
def served_site(tmp_path):
    """The site built into ``tmp_path`` and served on 127.0.0.1; its base URL."""
    site = tmp_path / "site"
    done = build_site(site)
    assert done.returncode == 0, done.stderr[-4000:]
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


@pytest.mark.slow
def test_the_home_and_a_results_page_render_with_images_and_working_links(served_site, browser):
    for path, heading in PAGES.items():
        browser.get(served_site + path)
        assert "gridplan" in browser.title
        headings = browser.execute_script(
            "return [...document.querySelectorAll('h1, h2')].map(h => h.textContent)"
        )
        assert any(heading in h for h in headings), (path, headings[:5])
        images = browser.execute_script(
            "return [...document.images].map(i => [i.src, i.complete, i.naturalWidth])"
        )
        if path.startswith("results/"):
            assert images, "a results page shows its figures"
            assert [src for src, complete, width in images if not complete or width == 0] == []
        hrefs = browser.execute_script("return [...document.links].map(a => a.href)")
        internal = sorted(
            {urldefrag(h)[0] for h in hrefs if urlparse(h).netloc == urlparse(served_site).netloc}
        )
        assert len(internal) > 10, path
        assert [h for h in internal if _status(h) != 200] == []

"""The static site of a board: the suite table holds every model x track cell with its
numbers, the rankings and their rho, escaped text from rows, the figures and the cards; the
site folder is never written over when it holds something else."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from helpers_board import MODELS, VALUES, filled_board, make_row

from gridplan.board import Board, BoardError, render_site
from gridplan.board.site import MARKER


class _Tables(HTMLParser):
    """The text of every cell of every table of a page, and the attributes of its tags."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.tags: list[tuple[str, dict]] = []
        self._table, self._cell = None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id", str(len(self.tables))), [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(path) -> _Tables:
    parser = _Tables()
    parser.feed(path.read_text())
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site of ``filled_board``, rendered once for the tests that only read it."""
    tmp = tmp_path_factory.mktemp("board")
    index = render_site(filled_board(tmp / "board"), tmp / "site")
    assert index == tmp / "site" / "index.html"
    return index.parent


def test_the_suite_table_holds_every_model_and_track_with_its_numbers(site):
    table = parse(site / "suite-quick.html").tables["leaderboard"]
    assert table[0][:4] == ["model", "mean success", f"quick-a v2 {_hash('quick-a')}",
                            f"quick-b v1 {_hash('quick-b')}"]
    assert table[1] == ["success", "decision regret", "DRPE", "E_tot"] * 2
    body = {cells[0]: cells[1:] for cells in table[2:]}
    assert list(body) == ["oracle", "mlp-20k", "noise(0.35,0.1)"]  # by mean success
    assert body["oracle"] == ["0.9", "0.92 [0.87, 0.97]", "0 [0, 0.03]", "0.0012", "0.21",
                              "0.88 [0.83, 0.93]", "0 [0, 0.03]", "0.0009", "0.2"]
    assert body["mlp-20k"][5:] == ["0.7 [0.65, 0.75]", "0.09 [0.06, 0.12]", "n/a", "0.27"]
    assert body["noise(0.35,0.1)"][0] == "0.58"
    for (model, track), values in VALUES.items():
        column = 1 + 4 * ["quick-a", "quick-b"].index(track)
        assert body[model][column].split(" ")[0] == f"{values[0]:.3g}"


def _hash(track: str) -> str:
    return make_row("oracle", track)["track"]["hash"][:12]


def test_the_rankings_and_their_rho_are_shown_per_track(site):
    text = (site / "suite-quick.html").read_text()
    assert "success vs E_tot: rho = -0.5 over 3 models" in text
    assert "success vs DRPE: rho = 1 over 3 models" in text
    assert "success vs DRPE: n/a (2 models with both, fewer than 3)" in text
    by_e_tot = text.split('<div class="ranking" data-metric="e_tot">')[1].split("</ol>")[0]
    names = [part.split("</a>")[0] for part in by_e_tot.split('.html">')[1:]]
    assert names == ["noise(0.35,0.1)", "oracle", "mlp-20k"]
    assert "Track quick-a: 1 row of other versions (hashes) of this track left out" in text


def test_the_figures_and_cards_are_written_and_linked(site):
    page = parse(site / "suite-quick.html")
    images = [a["src"] for tag, a in page.tags if tag == "img"]
    assert images == ["figures/quick-success-vs-e_tot.png", "figures/quick-success-vs-drpe.png"]
    for image in images:
        assert (site / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    links = {a["href"] for tag, a in page.tags if tag == "a"}
    cards = {f"models/{fp[:16]}.html" for _, fp in MODELS.values()}
    assert links == {"index.html"} | cards
    assert all((site / card).is_file() for card in cards)


def test_a_card_holds_every_metric_of_every_track_of_its_model(site):
    card = site / f"models/{MODELS['oracle'][1][:16]}.html"
    rows = parse(card).tables["0"]
    assert rows[0] == ["suite", "track", "version", "hash", "success", "decision regret",
                       "DRPE", "E_tot", "VPE", "wall s", "created", "full report"]
    assert [r[1:3] for r in rows[1:]] == [["quick-a", "2"], ["quick-a (older version, left out)",
                                                             "1"], ["quick-b", "1"]]
    assert rows[2][4] == "0.9 [0.85, 0.95]" and rows[3][8] == "0.5 [0.4, 0.6]"
    assert rows[1][-1].endswith("(not in the board folder)")
    report = f"files/reports/{MODELS['oracle'][1][:12]}-quick-b.json"
    assert rows[3][-1] == "report" and (site / report).read_text() == '{"schema_version": "2.0"}\n'
    assert f'href="../{report}"' in card.read_text()
    assert MODELS["oracle"][1] in card.read_text()


def test_text_from_rows_is_html_escaped(tmp_path):
    row = make_row("oracle", "quick-a")
    evil = '<script>alert("x")</script>&'
    row["model"]["name"] = evil
    row["model"]["info"] = {"note": "<b>bold</b>"}
    row["track"]["spec"] = {"tag": "<i>"}
    row["metrics"]["<em>m</em>"] = {"value": 1.0, "ci": None}
    Board(tmp_path / "board").write(row)
    site = render_site(Board(tmp_path / "board"), tmp_path / "site").parent
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "<script>alert" not in text and "<b>bold" not in text and "<em>m" not in text
        assert "<i>" not in text
    suite = (site / "suite-quick.html").read_text()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in suite


def test_a_folder_that_is_not_a_board_site_is_left_alone_unless_forced(tmp_path):
    board = filled_board(tmp_path / "board")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BoardError, match="is not empty and is not a board site"):
        render_site(board, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    render_site(board, out, force=True)
    assert (out / "notes.txt").read_text() == "mine" and (out / "index.html").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(BoardError, match="is a file"):
        render_site(board, tmp_path / "file")


def test_a_second_render_replaces_the_previous_site_and_drops_its_stale_pages(tmp_path):
    board = filled_board(tmp_path / "board")
    site = render_site(board, tmp_path / "site").parent
    gone = site / f"models/{MODELS['mlp-20k'][1][:16]}.html"
    assert gone.is_file()
    for path in (board.folder / "rows").glob(f"{MODELS['mlp-20k'][1][:16]}-*.json"):
        path.unlink()
    (site / "extra.txt").write_text("kept")
    render_site(board, site)
    assert not gone.exists() and (site / "extra.txt").read_text() == "kept"
    listed = json.loads((site / MARKER).read_text())["files"]
    assert sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()) == sorted(
        [*listed, MARKER, "extra.txt"])


def test_an_empty_or_missing_board_is_refused(tmp_path):
    with pytest.raises(BoardError, match="no such board folder"):
        render_site(tmp_path / "absent", tmp_path / "site")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BoardError, match="holds no rows"):
        render_site(tmp_path / "empty", tmp_path / "site")
    assert not (tmp_path / "site").exists()

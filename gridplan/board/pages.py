"""The HTML pages of the leaderboard site: the index, one page per suite, one card per model.

Every text that comes from a row (names, descriptions, specs, metric names) is HTML-escaped.
Links are relative, so the site opens from the file system or any server. File names: suite
``S`` at ``suite-S.html``, a model at ``models/<fingerprint[:16]>.html``, figures under
``figures/`` (``figure_name``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape

from gridplan.board.leaderboard import (
    MIN_RANKED,
    RANKED_ERRORS,
    TABLE_METRICS,
    SuiteTable,
    TrackRanking,
    model_labels,
    newest_tracks,
    value,
)

#: Metric key -> its title on the pages (``"regret"`` -> ``"decision regret"``).
TITLES = {key: title for key, title, _ in TABLE_METRICS}
#: The figures of a suite page: error metric -> its axis title.
FIGURE_METRICS = {"e_tot": "E_tot", "drpe": "DRPE"}


def suite_file(suite: str) -> str:
    """The page of suite ``suite``, relative to the site's top."""
    return f"suite-{suite}.html"


def model_file(fingerprint: str) -> str:
    """The card of the model of ``fingerprint``, relative to the site's top."""
    return f"models/{fingerprint[:16]}.html"


def figure_name(suite: str, metric: str) -> str:
    """The figure of success against ``metric`` of suite ``suite``, relative to the top."""
    return f"figures/{suite}-success-vs-{metric}.png"


def fmt(x: float | None) -> str:
    """A number with 3 significant digits, or ``n/a``."""
    return "n/a" if x is None else f"{x:.3g}"


def plural(n: int, noun: str) -> str:
    """``"1 model"``, ``"3 models"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def summary(table: SuiteTable) -> str:
    """``"3 models, 2 tracks, 6 rows"`` of a suite, and the rows of older track versions left
    out, if any."""
    left = sum(table.left_out.values())
    return (f"{plural(len(table.models), 'model')}, {plural(len(table.tracks), 'track')}, "
            f"{plural(len(table.cells), 'row')}"
            + (f" ({plural(left, 'row')} of older track versions left out)" if left else ""))


def page(title: str, body: str, root: str = "") -> str:
    """A whole HTML document; ``root`` is the relative path to the site's top (``"../"``)."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(title)} - gridplan leaderboard</title>\n"
        f"<link rel=\"stylesheet\" href=\"{root}style.css\">\n</head>\n<body>\n{body}\n"
        f"<script src=\"{root}sort.js\"></script>\n</body>\n</html>\n"
    )


def metric_cell(row: dict | None, metric: str) -> str:
    """``<td>`` of one metric: value and 95% interval, its raw value in ``data-sort``."""
    x = value(row, metric)
    if x is None:
        return '<td class="num na" data-sort="">n/a</td>'
    ci = row["metrics"][metric].get("ci")
    interval = "" if ci is None else f' <span class="ci">[{fmt(ci[0])}, {fmt(ci[1])}]</span>'
    return f'<td class="num" data-sort="{x!r}">{fmt(x)}{interval}</td>'


def _model_link(table: SuiteTable, fp: str, root: str = "") -> str:
    return f'<a href="{root}{model_file(fp)}">{escape(table.labels[fp])}</a>'


def leaderboard_table(table: SuiteTable) -> str:
    """The sortable models x tracks table of a suite (``assets.SORT_JS`` sorts it)."""
    groups = "".join(
        f'<th colspan="{len(TABLE_METRICS)}">{escape(t["name"])} v{t["version"]} '
        f'<code>{t["hash"][:12]}</code></th>' for t in table.tracks
    )
    titles, col = [], 2
    for _ in table.tracks:
        for _key, title, higher in TABLE_METRICS:
            kind = "high" if higher else "low"
            titles.append(f'<th data-col="{col}" data-kind="{kind}">{title}</th>')
            col += 1
    lines = [
        '<table class="sortable" id="leaderboard">\n<thead>\n<tr>'
        '<th rowspan="2" data-col="0" data-kind="text">model</th>'
        '<th rowspan="2" data-col="1" data-kind="high">mean success</th>'
        f"{groups}</tr>\n<tr>{''.join(titles)}</tr>\n</thead>\n<tbody>"
    ]
    for fp in table.models:
        mean = table.mean_success(fp)
        sort = "" if mean is None else repr(mean)
        cells = [
            f'<td data-sort="{escape(table.labels[fp].lower())}">{_model_link(table, fp)}</td>',
            f'<td class="num{"" if mean is not None else " na"}" data-sort="{sort}">'
            f"{fmt(mean)}</td>",
        ]
        for track in table.tracks:
            row = table.cells.get((fp, track["name"]))
            cells += [metric_cell(row, key) for key, _, _ in TABLE_METRICS]
        lines.append(f'<tr data-fingerprint="{fp}">{"".join(cells)}</tr>')
    lines.append("</tbody>\n</table>")
    return "\n".join(lines)


def rho_text(ranking: TrackRanking, metric: str) -> str:
    """``"rho = 0.5 over 3 models"`` or ``"n/a (...)"`` saying why it is undefined."""
    rho, n = ranking.rho[metric], ranking.n[metric]
    if rho is not None:
        return f"rho = {rho:.3g} over {n} models"
    if n < MIN_RANKED:
        return f"n/a ({n} models with both, fewer than {MIN_RANKED})"
    return f"n/a (constant over the {n} models)"


def rankings_section(table: SuiteTable) -> str:
    """Per track: the models by success beside by E_tot and by DRPE, with rank agreements."""
    parts = ["<h2>Rankings per track</h2>",
             "<p>Success: highest first; E_tot, DRPE: lowest first. Rank agreement: Spearman's "
             "rho of (success, -error) over the models with both; 1 when the error ranks the "
             "models as their success does.</p>"]
    for ranking in table.rankings:
        columns = []
        for metric in ("success", *RANKED_ERRORS):
            items = "".join(
                f"<li>{_model_link(table, fp)} "
                f"{fmt(value(table.cells[(fp, ranking.track)], metric))}</li>"
                for fp in ranking.by[metric]
            )
            columns.append(f'<div class="ranking" data-metric="{metric}"><h4>by '
                           f"{TITLES[metric]}</h4><ol>{items}</ol></div>")
        agreement = "".join(
            f'<li data-metric="{m}">success vs {TITLES[m]}: {rho_text(ranking, m)}</li>'
            for m in RANKED_ERRORS
        )
        parts.append(f'<h3 id="rank-{escape(ranking.track)}">Track {escape(ranking.track)}</h3>'
                     f'<div class="rankings">{"".join(columns)}</div>'
                     f'<ul class="agreement">{agreement}</ul>')
    return "\n".join(parts)


def suite_page(table: SuiteTable, figures: Mapping[str, str | None]) -> str:
    """The page of one suite; ``figures``: error metric -> figure file (None: no points)."""
    notes = "".join(
        f'<p class="note">Track {escape(name)}: {plural(n, "row")} of other '
        "versions (hashes) of this track left out: only its newest version is compared.</p>"
        for name, n in sorted(table.left_out.items())
    )
    shown = []
    for metric, name in figures.items():
        title = FIGURE_METRICS[metric]
        shown.append(f'<img src="{name}" alt="success vs {title}, suite '
                     f'{escape(table.suite)}">' if name else
                     f"<p>No row has both success and {title}.</p>")
    specs = "".join(
        f"<details><summary>{escape(t['name'])} v{t['version']} <code>{t['hash']}</code>"
        f"</summary><pre>{escape(json.dumps(t['spec'], indent=2, sort_keys=True))}</pre>"
        "</details>" for t in table.tracks
    )
    body = (
        '<nav><a href="index.html">All suites</a></nav>\n'
        f"<h1>Suite {escape(table.suite)}</h1>\n"
        f"<p>{escape(summary(table))}. "
        "Cells: value [95% interval]; click a column title to sort.</p>\n"
        f"{notes}\n{leaderboard_table(table)}\n{rankings_section(table)}\n"
        f'<h2>Figures</h2>\n<div class="figures">{"".join(shown)}</div>\n'
        f"<h2>Tracks</h2>\n{specs}"
    )
    return page(f"suite {table.suite}", body)


def index_page(tables: Sequence[SuiteTable], rows: Sequence[dict]) -> str:
    """The site's front page: every suite with its counts, every model's card."""
    suites = "".join(
        f'<tr><td><a href="{suite_file(t.suite)}">{escape(t.suite)}</a></td>'
        f'<td class="num">{len(t.models)}</td><td class="num">{len(t.tracks)}</td>'
        f'<td class="num">{len(t.cells)}</td><td class="num">{sum(t.left_out.values())}</td>'
        "</tr>" for t in tables
    )
    labels = model_labels(rows)
    models = {row["model"]["fingerprint"]: row["model"]["kind"] for row in rows}
    cards = "".join(
        f'<li><a href="{model_file(fp)}">{escape(labels[fp])}</a> ({escape(kind)})</li>'
        for fp, kind in sorted(models.items(), key=lambda item: labels[item[0]])
    )
    body = (
        "<h1>gridplan leaderboard</h1>\n<h2>Suites</h2>\n<table><thead><tr><th>suite</th>"
        "<th>models</th><th>tracks</th><th>rows</th><th>rows of older track versions left out"
        f"</th></tr></thead><tbody>{suites}</tbody></table>\n<h2>Models</h2>\n<ul>{cards}</ul>"
    )
    return page("leaderboard", body)


def _metric_names(rows: Sequence[dict]) -> list[str]:
    """The metrics of ``rows``: the table's first, then the others alphabetically."""
    names = {name for row in rows for name in row["metrics"]}
    first = [key for key, _, _ in TABLE_METRICS if key in names]
    return first + sorted(names - set(first))


def model_page(fp: str, rows: Sequence[dict], tables: Sequence[SuiteTable],
               reports: Mapping[str, str]) -> str:
    """The card of model ``fp``: its description and every metric of every row it has.

    ``rows``: the whole board; ``reports``: a row's ``report`` -> its copy in the site.
    """
    mine = sorted((r for r in rows if r["model"]["fingerprint"] == fp),
                  key=lambda r: (r["track"]["name"], -r["track"]["version"], r["suite"]))
    model, newest, label = mine[0]["model"], newest_tracks(rows), model_labels(rows)[fp]
    suites = " ".join(f'<a href="../{suite_file(t.suite)}">{escape(t.suite)}</a>'
                      for t in tables if fp in t.models)
    names = _metric_names(mine)
    head = "".join(f"<th>{escape(TITLES.get(n, n))}</th>" for n in names)
    lines = []
    for row in mine:
        track = row["track"]
        old = track["hash"] != newest[track["name"]]["hash"]
        report = reports.get(row.get("report"))
        link = f'<a href="../{escape(report)}">report</a>' if report else (
            escape(row["report"]) + " (not in the board folder)" if row.get("report") else "")
        marks = (' class="outdated"', " (older version, left out)") if old else ("", "")
        lines.append(
            f'<tr{marks[0]}><td>{escape(row["suite"])}</td>'
            f'<td>{escape(track["name"])}{marks[1]}</td>'
            f'<td class="num">{track["version"]}</td><td><code>{track["hash"][:12]}</code></td>'
            + "".join(metric_cell(row, n) for n in names)
            + f'<td class="num">{fmt(row["wall_s"])}</td><td>{escape(row["created"])}</td>'
            f"<td>{link}</td></tr>"
        )
    body = (
        f'<nav><a href="../index.html">All suites</a> | suites: {suites}</nav>\n'
        f"<h1>{escape(label)}</h1>\n<dl><dt>kind</dt><dd>{escape(model['kind'])}</dd>"
        f"<dt>fingerprint</dt><dd><code>{fp}</code></dd><dt>gridplan</dt>"
        f"<dd>{escape(mine[0]['gridplan_version'])}</dd></dl>\n<h2>Description</h2>\n"
        f"<pre>{escape(json.dumps(model['info'], indent=2, sort_keys=True))}</pre>\n"
        "<h2>Every track</h2>\n<table><thead><tr><th>suite</th><th>track</th><th>version</th>"
        f"<th>hash</th>{head}<th>wall s</th><th>created</th><th>full report</th></tr></thead>"
        f"<tbody>{''.join(lines)}</tbody></table>"
    )
    return page(f"model {label}", body, root="../")

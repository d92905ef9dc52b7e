"""The leaderboard site's stylesheet and script: plain CSS and vanilla JavaScript, written
beside the pages (no CDN, no server: the site opens from the file system).

``SORT_JS`` sorts every ``table.sortable`` by the column whose title is clicked: a cell's
``data-sort`` holds its raw value (empty: n/a, always last); a title's ``data-kind`` says how
to compare (``text``; ``high``: highest first on the first click; ``low``: lowest first), and a
second click reverses the order; Enter or Space on a focused title does the same. The title's
``aria-sort`` records the order shown.
"""

STYLE_CSS = """\
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 80rem;
       padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th[data-col] { cursor: pointer; background: #f3f3f3; }
th[aria-sort="ascending"]::after { content: " \\25B2"; }
th[aria-sort="descending"]::after { content: " \\25BC"; }
.ci { color: #666; font-size: 0.85em; }
.na { color: #999; }
.note { color: #8a4b00; }
.outdated { color: #888; }
.rankings { display: flex; flex-wrap: wrap; gap: 2rem; }
.rankings ol { margin-top: 0.25rem; }
.figures { display: flex; flex-wrap: wrap; gap: 1rem; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 0.5rem; overflow-x: auto; }
code { font-size: 0.9em; }
"""

SORT_JS = """\
"use strict";
function sortTable(table, title) {
  const col = Number(title.dataset.col);
  const kind = title.dataset.kind;
  const wasFirst = title.dataset.order === "first";
  for (const other of table.querySelectorAll("th[data-col]")) {
    delete other.dataset.order;
    other.removeAttribute("aria-sort");
  }
  const order = wasFirst ? -1 : 1;
  title.dataset.order = wasFirst ? "reversed" : "first";
  const ascending = (kind === "high") === (order === -1);
  title.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort(function (a, b) {
    const x = a.cells[col].dataset.sort;
    const y = b.cells[col].dataset.sort;
    if (x === "" || y === "") {
      return (x === "") - (y === "");
    }
    const c = kind === "text" ? x.localeCompare(y) : Number(x) - Number(y);
    return ascending ? c : -c;
  });
  for (const row of rows) {
    body.appendChild(row);
  }
}
for (const table of document.querySelectorAll("table.sortable")) {
  for (const title of table.querySelectorAll("th[data-col]")) {
    title.tabIndex = 0;
    title.addEventListener("click", function () { sortTable(table, title); });
    title.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        sortTable(table, title);
      }
    });
  }
}
"""

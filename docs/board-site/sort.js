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

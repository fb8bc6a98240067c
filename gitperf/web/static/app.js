// git perf dashboard: draw the figures embedded in the page, make timeline points open their
// commit, and sort tables by a click on a column heading.  No framework, no network access.
"use strict";

function drawPlots() {
  const shas = JSON.parse(document.getElementById("shas")?.textContent || "[]");
  const commitUrl = document.body.dataset.commitUrl;
  document.querySelectorAll("div.plot").forEach((div) => {
    const fig = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    Plotly.newPlot(div, fig.data, fig.layout, {responsive: true, displaylogo: false}).then(() => {
      div.dataset.rendered = "true";
    });
    if (div.dataset.clickCommits !== undefined && commitUrl) {
      div.on("plotly_click", (ev) => {
        const sha = shas[ev.points[0].x];
        if (sha) window.location.href = commitUrl.replace("SHA", sha);
      });
    }
  });
}

function sortable(table) {
  table.querySelectorAll("th").forEach((th, col) => {
    th.addEventListener("click", () => {
      const body = table.tBodies[0];
      const asc = th.dataset.dir !== "asc";
      table.querySelectorAll("th").forEach((h) => delete h.dataset.dir);
      th.dataset.dir = asc ? "asc" : "desc";
      const key = (row) => {
        const cell = row.cells[col];
        const v = cell.dataset.sort ?? cell.textContent.trim();
        const n = parseFloat(v);
        return Number.isNaN(n) || cell.dataset.sort === undefined ? v.toLowerCase() : n;
      };
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      });
      rows.forEach((r) => body.appendChild(r));
    });
  });
}

// Flame graphs: outline every frame whose function name contains the search text.
function searchFlames(input) {
  const text = input.value.trim().toLowerCase();
  let frames = 0;
  document.querySelectorAll("div.plot").forEach((div) => {
    const trace = div.data && div.data[0];
    if (!trace || trace.type !== "icicle") return;
    const hit = trace.labels.map((l, i) => i > 0 && text !== "" &&
      l.replace(/^◆ /, "").toLowerCase().includes(text));
    frames += hit.filter(Boolean).length;
    Plotly.restyle(div, {"marker.line.width": [hit.map((h) => (h ? 3 : 0.5))],
                         "marker.line.color": [hit.map((h) => (h ? "#000" : "#fff"))]});
  });
  const found = input.closest("p")?.querySelector(".flame-found");
  if (found) found.textContent = text ? `${frames} frame(s) outlined` : "";
}

document.addEventListener("DOMContentLoaded", () => {
  drawPlots();
  document.querySelectorAll("table.sortable").forEach(sortable);
  document.querySelectorAll("input.flame-search").forEach((input) => {
    input.addEventListener("input", () => searchFlames(input));
  });
});

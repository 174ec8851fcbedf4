// otel-agents ui: live updates of the runs list, folding the trace, a span's details in place, and
// sorting tables. The page reads without it; nothing here builds markup from stored text (what is
// inserted is HTML the server escaped).
"use strict";

function pollRuns(table) {
  const poll = table.dataset.poll;
  const rowsUrl = table.dataset.rows;
  const shown = () => {
    const first = table.querySelector("tbody tr");
    return first ? first.dataset.runId : "";
  };
  const total = document.getElementById("total");
  async function tick() {
    try {
      const answer = await fetch(poll, { headers: { Accept: "application/json" } });
      if (answer.ok) {
        const data = await answer.json();
        const newest = data.runs.length ? data.runs[0].run_id : "";
        if (newest !== shown() || (total && String(data.total) !== total.textContent)) {
          const rows = await fetch(rowsUrl);
          if (rows.ok) {
            table.querySelector("tbody").innerHTML = await rows.text();
            if (total) total.textContent = String(data.total);
          }
        }
      }
    } catch (error) {
      // the server stopped, or the network blinked: try again at the next tick
    }
    setTimeout(tick, 1000);
  }
  setTimeout(tick, 1000);
}

function foldable(table) {
  table.addEventListener("click", (event) => {
    const button = event.target.closest("button.fold");
    if (!button) return;
    const row = button.closest("tr");
    const depth = Number(row.dataset.depth);
    const open = button.getAttribute("aria-expanded") === "true";
    button.setAttribute("aria-expanded", open ? "false" : "true");
    button.textContent = open ? "▸" : "▾";
    let next = row.nextElementSibling;
    while (next && Number(next.dataset.depth) > depth) {
      if (open) {
        next.hidden = true;
      } else {
        next.hidden = false;
        const inner = next.querySelector("button.fold");
        if (inner) {
          inner.setAttribute("aria-expanded", "true");
          inner.textContent = "▾";
        }
      }
      next = next.nextElementSibling;
    }
  });
  table.addEventListener("click", async (event) => {
    const link = event.target.closest("a.span-link");
    if (!link || !link.dataset.part) return;
    event.preventDefault();
    const answer = await fetch(link.dataset.part);
    if (!answer.ok) {
      window.location.href = link.href;
      return;
    }
    const holder = document.getElementById("span-detail");
    const box = document.createElement("div");
    box.innerHTML = await answer.text();
    const detail = box.firstElementChild;
    holder.replaceWith(detail);
    table.querySelectorAll("tr.selected").forEach((r) => r.classList.remove("selected"));
    link.closest("tr").classList.add("selected");
    detail.scrollIntoView({ block: "nearest" });
  });
}

function sortable(table) {
  table.querySelectorAll("thead th").forEach((th, column) => {
    th.classList.add("sorts");
    th.addEventListener("click", () => {
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const down = th.dataset.order !== "down";
      const value = (row) => {
        const cell = row.cells[column];
        if (cell && cell.dataset.value !== undefined) return Number(cell.dataset.value); // the figure unrounded
        const text = cell ? cell.textContent.trim() : "";
        // a figure as the page writes it: "$0.0012", "1,234", "12%", "850 ms", "1.20 s", "+0.5 s"
        const figure = text.replace(/[$,%\s±]/g, "").match(/^([+-]?\d*\.?\d+)(ms|s)?$/);
        return figure ? Number(figure[1]) / (figure[2] === "ms" ? 1000 : 1) : text;
      };
      rows.sort((a, b) => {
        const x = value(a), y = value(b);
        const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return down ? -order : order;
      });
      table.querySelectorAll("thead th").forEach((other) => delete other.dataset.order);
      th.dataset.order = down ? "down" : "up";
      rows.forEach((row) => body.appendChild(row));
    });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const runs = document.querySelector("table.runs[data-poll]");
  if (runs) pollRuns(runs);
  const trace = document.getElementById("waterfall");
  if (trace) foldable(trace);
  document.querySelectorAll("table.sortable").forEach(sortable);
});

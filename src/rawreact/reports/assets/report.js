// The question table of a rawreact report: filters, sorting, and transcripts that open on a click.
// It reads only the page's own elements; every value it compares was written there, escaped, by rawreact.
(function () {
  "use strict";
  const table = document.getElementById("questions");
  if (!table) return;
  const body = table.tBodies[0];
  const pairs = Array.from(body.querySelectorAll("tr.question")).map((row) => [row, row.nextElementSibling]);
  const controls = {
    wrong: document.getElementById("f-wrong"),
    invalid: document.getElementById("f-invalid"),
    steps: document.getElementById("f-steps"),
    run: document.getElementById("f-run"),
    text: document.getElementById("f-text"),
  };
  const shown = document.getElementById("shown");

  function keep(row) {
    const d = row.dataset;
    if (controls.wrong.checked && d.em !== "0") return false;  // "-": no gold answer, neither right nor wrong
    if (controls.invalid.checked && d.invalid === "0") return false;
    if (controls.steps.checked && d.ended !== "max_steps") return false;
    if (controls.run && controls.run.value && d.run !== controls.run.value) return false;
    const needle = controls.text.value.trim().toLowerCase();
    return !needle || row.textContent.toLowerCase().includes(needle);
  }

  function filter() {
    let count = 0;
    for (const [row, detail] of pairs) {
      const visible = keep(row);
      row.hidden = !visible;
      detail.hidden = !visible || !row.classList.contains("open");
      count += visible;
    }
    shown.textContent = count + " of " + pairs.length + " questions";
  }

  function sort(index, numeric, descending) {
    const value = (row) => row.cells[index].dataset.v ?? row.cells[index].textContent;
    pairs.sort((a, b) => {
      const x = value(a[0]), y = value(b[0]);
      const order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      return descending ? -order : order;
    });
    for (const [row, detail] of pairs) body.append(row, detail);
  }

  for (const [row, detail] of pairs) {
    row.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;  // the row's own link opens it (see reveal)
      row.classList.toggle("open");
      detail.hidden = !row.classList.contains("open");
    });
  }
  Array.from(table.tHead.rows[0].cells).forEach((cell, index) => {
    cell.addEventListener("click", () => {
      const descending = cell.getAttribute("aria-sort") === "ascending";
      for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
      cell.setAttribute("aria-sort", descending ? "descending" : "ascending");
      sort(index, cell.dataset.type === "number", descending);
    });
  });
  for (const control of Object.values(controls)) {
    if (control) control.addEventListener("input", filter);
  }
  document.getElementById("f-raw").addEventListener("input", (event) => {
    document.body.classList.toggle("show-raw", event.target.checked);
  });
  // A link to a folded prompt unfolds it, and a link to a question (`#RUN/ID`) shows and opens its
  // row, as does opening the page at either address.
  function reveal(id) {
    const target = document.getElementById(id);
    if (target && target.tagName === "DETAILS") target.open = true;
    if (target && target.classList.contains("question")) {
      target.hidden = false;
      target.classList.add("open");
      target.nextElementSibling.hidden = false;
      target.scrollIntoView({ block: "start" });
    }
  }
  document.addEventListener("click", (event) => {
    const link = event.target.closest('a[href^="#"]');
    if (link) reveal(link.getAttribute("href").slice(1));
  });
  window.addEventListener("hashchange", () => reveal(decodeURIComponent(location.hash.slice(1))));
  filter();
  if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
})();

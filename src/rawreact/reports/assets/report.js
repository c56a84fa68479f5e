// The question (game, problem) table of a rawreact report: filters, sorting, and transcripts that open on a click.
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
    if (controls.invalid && controls.invalid.checked && d.invalid === "0") return false;  // none for programs
    if (controls.steps && controls.steps.checked && d.ended !== "max_steps") return false;  // none for programs
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
    shown.textContent = count + " of " + pairs.length + " " + table.dataset.unit + "s";  // questions, problems
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
    if (target && target.classList.contains("pair")) {
      openPair(target);
      target.scrollIntoView({ block: "start" });
    }
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
  // Runs side by side: a question shared by two runs or more opens the left and right runs' transcripts
  // (copied from the question table) next to each other, the first step where they differ marked.
  const pairTable = document.getElementById("pairs");
  const left = document.getElementById("p-left"), right = document.getElementById("p-right");
  const differ = document.getElementById("p-differ"), pairShown = document.getElementById("p-shown");
  const pairRows = pairTable ? Array.from(pairTable.tBodies[0].querySelectorAll("tr.pair")) : [];

  function answerOf(row, run) {
    return Array.from(row.querySelectorAll("td.answer")).find((cell) => cell.dataset.run === run);
  }

  function fill(row) {
    const sides = row.nextElementSibling.querySelectorAll(".side");
    const steps = [];
    [left.value, right.value].forEach((run, k) => {
      const side = sides[k];
      side.replaceChildren();
      const heading = document.createElement("h4");
      heading.textContent = run;
      side.append(heading);
      const cell = answerOf(row, run);
      const origin = cell && cell.dataset.anchor ? document.getElementById(cell.dataset.anchor) : null;
      const found = origin ? origin.nextElementSibling.querySelector(".transcript") : null;
      if (!found) {
        const none = document.createElement("p");
        none.className = "note";
        none.textContent = "This run has no such question.";
        side.append(none);
        steps.push(null);
        return;
      }
      side.append(found.cloneNode(true));
      steps.push(Array.from(side.querySelectorAll(".step")));
    });
    if (!steps[0] || !steps[1]) return;
    let i = 0;
    while (i < steps[0].length && i < steps[1].length && steps[0][i].dataset.key === steps[1][i].dataset.key) i++;
    if (i === steps[0].length && i === steps[1].length) {
      const same = document.createElement("p");
      same.className = "same";
      same.textContent = steps[0].length ? "The two trajectories are the same, step by step." : "Neither run took a step.";
      sides[0].parentNode.before(same);
      return;
    }
    // The badge goes on the first line of the step that differs (thought, action or observation), not on a
    // line the two runs share.
    const text = (step, part) => (step && step.querySelector(part) ? step.querySelector(part).textContent : null);
    const differs = [".thought", ".action", ".observation"].find(
      (part) => text(steps[0][i], part) !== text(steps[1][i], part)
    );
    for (const list of steps) {
      const step = list[i];
      if (!step) continue;
      step.classList.add("first-difference");
      const badge = document.createElement("span");
      badge.className = "badge warn";
      badge.textContent = "first difference";
      ((differs && step.querySelector(differs)) || step.querySelector(".action") || step).append(badge);
    }
  }

  function refreshPairs() {
    let count = 0;
    for (const row of pairRows) {
      const a = answerOf(row, left.value), b = answerOf(row, right.value);
      const visible = !differ.checked || !a || !b || a.dataset.prediction !== b.dataset.prediction;
      row.hidden = !visible;
      row.nextElementSibling.hidden = !visible || !row.classList.contains("open");
      if (row.classList.contains("open")) {
        row.nextElementSibling.querySelectorAll(".same").forEach((p) => p.remove());
        fill(row);
      }
      for (const cell of row.querySelectorAll("td.answer")) {
        cell.classList.toggle("left-run", cell.dataset.run === left.value);
        cell.classList.toggle("right-run", cell.dataset.run === right.value);
      }
      count += visible;
    }
    pairShown.textContent = count + " of " + pairRows.length + " " + table.dataset.unit + "s";
  }

  function openPair(row) {
    row.hidden = false;
    row.classList.add("open");
    row.nextElementSibling.hidden = false;
    row.nextElementSibling.querySelectorAll(".same").forEach((p) => p.remove());
    fill(row);
  }

  for (const row of pairRows) {
    row.addEventListener("click", (event) => {
      if (event.target.closest("a")) return;
      if (row.classList.contains("open")) {
        row.classList.remove("open");
        row.nextElementSibling.hidden = true;
      } else {
        openPair(row);
      }
    });
  }
  for (const control of [left, right, differ]) {
    if (control) control.addEventListener("input", refreshPairs);
  }
  if (pairTable) refreshPairs();

  filter();
  if (location.hash) reveal(decodeURIComponent(location.hash.slice(1)));
})();

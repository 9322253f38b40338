// marin browse: table sorting and searching, JSON tree expand/collapse, log follow. No dependencies.
(function () {
  "use strict";

  function cellValue(td) {
    if (!td) return "";
    return td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent.trim();
  }

  function compare(a, b) {
    const na = parseFloat(a), nb = parseFloat(b);
    const numeric = a !== "" && b !== "" && !isNaN(na) && !isNaN(nb) && /^-?[\d.]/.test(a) && /^-?[\d.]/.test(b);
    if (numeric && String(na).length > 0 && !/[a-z]/i.test(a + b)) return na - nb;
    return a.localeCompare(b, undefined, { numeric: true, sensitivity: "base" });
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    const heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        const asc = !th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (r1, r2) {
          const c = compare(cellValue(r1.cells[col]), cellValue(r2.cells[col]));
          return asc ? c : -c;
        });
        const frag = document.createDocumentFragment();
        rows.forEach(function (r) { frag.appendChild(r); });
        body.appendChild(frag);
      });
    });
  });

  function updateCount(id) {
    const table = document.getElementById(id);
    const out = document.querySelector('[data-count-for="' + id + '"]');
    if (!table || !out) return;
    const rows = Array.from(table.tBodies[0].rows);
    const shown = rows.filter(function (r) { return r.style.display !== "none"; }).length;
    out.textContent = shown === rows.length ? rows.length + " shown" : shown + " of " + rows.length + " shown";
  }

  document.querySelectorAll("input.search").forEach(function (input) {
    const id = input.getAttribute("data-table");
    const table = document.getElementById(id);
    if (!table) return;
    const rows = Array.from(table.tBodies[0].rows);
    const texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
    function apply() {
      const terms = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      rows.forEach(function (r, i) {
        const ok = terms.every(function (t) { return texts[i].indexOf(t) >= 0; });
        r.style.display = ok ? "" : "none";
      });
      updateCount(id);
      if (window.history && window.history.replaceState) {
        const url = new URL(window.location.href);
        if (input.value) url.searchParams.set("q", input.value); else url.searchParams.delete("q");
        window.history.replaceState(null, "", url);
      }
    }
    const q = new URL(window.location.href).searchParams.get("q");
    if (q && id === "exps") input.value = q;
    input.addEventListener("input", apply);
    apply();
  });

  document.querySelectorAll("[data-tree]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      const open = btn.getAttribute("data-tree") === "open";
      document.querySelectorAll(".json details").forEach(function (d) { d.open = open; });
    });
  });

  document.querySelectorAll("[data-only-diff]").forEach(function (box) {
    const table = document.getElementById(box.getAttribute("data-only-diff"));
    box.addEventListener("change", function () { table.classList.toggle("only-diff", box.checked); });
  });

  // The runs table's "compare selected": exactly two ticked runs of one root open the compare page.
  document.querySelectorAll("form[data-compare]").forEach(function (form) {
    const msg = form.querySelector(".compare-msg");
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      const picked = Array.from(form.querySelectorAll("input[name=a]:checked"));
      if (picked.length !== 2) { msg.textContent = "tick two runs to compare (" + picked.length + " ticked)"; return; }
      const root = picked[0].getAttribute("data-root");
      if (picked[1].getAttribute("data-root") !== root) { msg.textContent = "these runs are in different labs"; return; }
      const q = new URLSearchParams({ a: picked[0].value, b: picked[1].value });
      window.location.href = "/compare/" + root + "?" + q.toString();
    });
  });

  document.querySelectorAll("pre.log[data-follow='1']").forEach(function (pre) {
    const box = document.querySelector("[data-follow]");
    let offset = parseInt(pre.getAttribute("data-offset"), 10) || 0;
    const url = pre.getAttribute("data-log-url");
    pre.scrollTop = pre.scrollHeight;
    function poll() {
      if (box && !box.checked) { setTimeout(poll, 2000); return; }
      fetch(url + "?offset=" + offset, { headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (d) {
          if (d.text) {
            if (d.skipped) pre.textContent += "\n[… skipped …]\n";
            pre.textContent += d.text;
            pre.scrollTop = pre.scrollHeight;
          }
          offset = d.offset;
          pre.setAttribute("data-offset", String(offset));
          if (d.state === "RUNNING") setTimeout(poll, 2000);
          else {
            const div = document.createElement("div");
            div.className = "note";
            div.textContent = "step is now " + d.state + " (reload for the full page)";
            pre.after(div);
          }
        })
        .catch(function () { setTimeout(poll, 5000); });
    }
    setTimeout(poll, 2000);
  });

  document.querySelectorAll("pre.log").forEach(function (pre) { pre.scrollTop = pre.scrollHeight; });

  // Pages with running steps reload themselves (keeping the scroll position) while the box is ticked.
  const auto = document.querySelector("input[data-autorefresh]");
  const key = "marin-scroll:" + window.location.pathname + window.location.search;
  const saved = window.sessionStorage ? sessionStorage.getItem(key) : null;
  if (saved !== null) { window.scrollTo(0, parseInt(saved, 10) || 0); sessionStorage.removeItem(key); }
  if (auto) {
    const seconds = parseInt(auto.getAttribute("data-autorefresh"), 10) || 15;
    let timer = null;
    function arm() {
      if (timer) clearTimeout(timer);
      timer = auto.checked ? setTimeout(function () {
        if (window.sessionStorage) sessionStorage.setItem(key, String(window.scrollY));
        window.location.reload();
      }, seconds * 1000) : null;
    }
    auto.addEventListener("change", arm);
    arm();
  }
})();

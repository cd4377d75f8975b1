// Find and compare on the Tasks page (issue 24): the search box, the tag and status filters
// apply as you type or choose (rows are hidden at once), the column headers sort (click or
// Enter; they are links, so without script the server sorts). The address keeps ?q=, tag,
// status, sort and dir (replaceState), so a reload, a shared link and the live refresh (which
// fetches this address) show the same rows; the server applies the same rules.
(function () {
  "use strict";
  var form = document.getElementById("find");
  if (!form) return;
  document.documentElement.classList.add("js");
  var q = document.getElementById("q"), tag = document.getElementById("f-tag"),
    status = document.getElementById("f-status"), shown = document.getElementById("shown");
  var params = new URLSearchParams(window.location.search);
  var sort = params.get("sort"), desc = params.get("dir") === "desc";

  function rows() {
    var t = document.getElementById("tasks");
    return t ? Array.prototype.slice.call(t.querySelectorAll("tr[data-task]")) : [];
  }
  function cell(row, label) { return row.querySelector('td[data-label="' + label + '"]'); }
  function stamp(td) {
    var t = td && td.querySelector("time[datetime]");
    return t ? Date.parse(t.getAttribute("datetime")) / 1000 : null;
  }
  function title(row) {
    if (row.getAttribute("data-status") === "invalid") return "";
    var td = row.querySelector("td.c-title");
    return td ? td.textContent.trim().toLowerCase() : "";
  }
  function keyOf(row, by) {  // as the server's find.sort_keys
    if (by === "id") return row.getAttribute("data-task").toLowerCase();
    if (by === "title") return title(row);
    if (by === "status") return row.getAttribute("data-status");
    if (by === "last") return stamp(cell(row, "last run")) || 0;
    if (by === "next") { var n = stamp(cell(row, "next run")); return n === null ? Infinity : n; }
    if (by === "fails") return parseInt((cell(row, "fails") || {}).textContent, 10) || 0;
    return "";
  }
  function matches(row, words, wantTag, wantStatus) {
    var tags = (row.getAttribute("data-tags") || "").split(" ");
    if (wantTag && tags.indexOf(wantTag) < 0) return false;
    if (wantStatus && row.getAttribute("data-status") !== wantStatus) return false;
    var hay = [row.getAttribute("data-task"), title(row)].concat(tags).join(" ").toLowerCase();
    for (var i = 0; i < words.length; i++) if (hay.indexOf(words[i]) < 0) return false;
    return true;
  }
  function filter() {
    var words = q.value.toLowerCase().split(/\s+/).filter(Boolean), all = rows(), n = 0;
    all.forEach(function (row) {
      var ok = matches(row, words, tag.value, status.value);
      if (row.hidden === ok) row.hidden = !ok;
      if (ok) n++;
    });
    if (shown) shown.textContent = n + " of " + all.length + " shown";
  }
  function order() {
    var all = rows();
    if (!sort || !all.length) return;
    var keyed = all.map(function (r) { return [keyOf(r, sort), r.getAttribute("data-task"), r]; });
    keyed.sort(function (a, b) {
      var c = a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0);
      return desc ? -c : c;
    });
    var parent = all[0].parentNode, changed = keyed.some(function (k, i) { return k[2] !== all[i]; });
    if (changed) keyed.forEach(function (k) { parent.appendChild(k[2]); });
    var heads = document.querySelectorAll("#tasks a.sort");
    for (var i = 0; i < heads.length; i++) {
      var by = heads[i].getAttribute("data-sort"), th = heads[i].parentNode;
      th.setAttribute("aria-sort", by === sort ? (desc ? "descending" : "ascending") : "none");
    }
  }
  function remember() {  // the address says what the page shows
    var p = new URLSearchParams();
    if (q.value.trim()) p.set("q", q.value.trim());
    if (tag.value) p.set("tag", tag.value);
    if (status.value) p.set("status", status.value);
    if (sort) { p.set("sort", sort); if (desc) p.set("dir", "desc"); }
    var s = p.toString(), url = window.location.pathname + (s ? "?" + s : "");
    if (url !== window.location.pathname + window.location.search) {
      window.history.replaceState(null, "", url);
      return true;
    }
    return false;
  }
  var pending = null;
  function changed() {
    filter();
    order();
    if (remember()) {  // the server may have rows this page never got (a wider search)
      clearTimeout(pending);
      pending = setTimeout(function () {
        document.dispatchEvent(new CustomEvent("mdcron:refresh"));
      }, 250);
    }
  }
  q.addEventListener("input", changed);
  tag.addEventListener("change", changed);
  status.addEventListener("change", changed);
  form.addEventListener("submit", function (e) { e.preventDefault(); changed(); });
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("#tasks a.sort");
    if (!a) return;
    e.preventDefault();
    var by = a.getAttribute("data-sort");
    desc = by === sort ? !desc : false;
    sort = by;
    changed();
  });
  document.addEventListener("mdcron:live", function () { filter(); order(); });
  if (window.location.hash === "#q") q.focus();
  filter();
})();

// Times people read (issue 24): every <time datetime> is shown in the browser's zone, relative
// ("in 4 min", "3 min ago") when it has data-rel, with the absolute time and zone on hover.
// The zone is named in the header. A running run's elapsed time is counted against its timeout.
// Pause forms get the browser's zone as their default. live.js calls mdcronTimes(root) on each
// fresh live part before it is compared, so unchanged times never count as a change.
(function () {
  "use strict";
  var zone = "local";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local"; } catch (e) { /* old */ }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function offset(d) {
    var m = -d.getTimezoneOffset(), s = m < 0 ? "-" : "+";
    m = Math.abs(m);
    return "UTC" + s + pad(Math.floor(m / 60)) + ":" + pad(m % 60);
  }
  function absolute(d, seconds) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + (seconds ? ":" + pad(d.getSeconds()) : "");
  }
  function span(s) {  // seconds, >= 0, in words
    if (s < 60) return Math.round(s) + " s";
    if (s < 90 * 60) return Math.round(s / 60) + " min";
    if (s < 36 * 3600) {
      var h = Math.floor(s / 3600), m = Math.round((s % 3600) / 60);
      return h + " h" + (m && h < 10 ? " " + m + " min" : "");
    }
    return Math.round(s / 86400) + " days";
  }
  function relative(d, now) {
    var delta = (d.getTime() - now) / 1000;
    if (Math.abs(delta) < 5) return "now";
    return delta > 0 ? "in " + span(delta) : span(-delta) + " ago";
  }
  function duration(s) {
    s = Math.max(0, Math.floor(s));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + " h " + pad(m) + " min " : m ? m + " min " : "") + (h || m ? pad(r) : r) + " s";
  }

  function set(el, prop, value) { if (el[prop] !== value) el[prop] = value; }

  function render(root, elapsedOnly) {
    var now = Date.now();
    var times = elapsedOnly ? [] : root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var el = times[i], d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      var abs = absolute(d, false), full = absolute(d, true) + " " + zone + " (" + offset(d) + ")";
      var rel = el.hasAttribute("data-rel");
      set(el, "textContent", rel ? relative(d, now) : abs);
      set(el, "title", rel ? full : full + ", " + relative(d, now));
    }
    var runs = root.querySelectorAll(".elapsed[data-since]");
    for (var j = 0; j < runs.length; j++) {
      var e = runs[j], since = new Date(e.getAttribute("data-since")).getTime();
      if (isNaN(since)) continue;
      var took = (now - since) / 1000, limit = parseFloat(e.getAttribute("data-timeout"));
      set(e, "textContent", "running for " + duration(took) +
        (limit > 0 ? " of its " + duration(limit) + " timeout" : ""));
      e.classList.toggle("late", limit > 0 && took > 0.8 * limit);
    }
  }
  window.mdcronTimes = render;
  window.mdcronZone = zone;

  function zoneSelects() {
    var selects = document.querySelectorAll("select[data-zone-select]");
    var all = [];
    try { all = Intl.supportedValuesOf("timeZone"); } catch (e) { all = []; }
    for (var i = 0; i < selects.length; i++) {
      var sel = selects[i], have = {};
      for (var k = 0; k < sel.options.length; k++) have[sel.options[k].value || ""] = true;
      if (zone !== "local" && !have[zone]) {
        sel.insertBefore(new Option(zone + " (this browser)", zone), sel.firstChild);
        have[zone] = true;
      }
      for (var z = 0; z < all.length; z++) if (!have[all[z]]) sel.add(new Option(all[z], all[z]));
      if (zone !== "local") sel.value = zone;
    }
  }

  function start() {
    var label = document.getElementById("zone");
    if (label) label.textContent = "times: " + zone;
    zoneSelects();
    render(document);
    var ticks = 0;
    setInterval(function () { render(document, ++ticks % 15 !== 0); }, 1000);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

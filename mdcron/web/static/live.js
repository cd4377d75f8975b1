// Keeps the open page true without a reload (issue 24: without disturbing it). Every 3 s while
// the tab is visible (1 s while a run is running, 30 s when hidden) it asks for the page's live
// part (X-Live: 1) with the tag of the last one (If-None-Match): an unchanged part is a 304 of
// a few bytes. A changed part is merged into the page node by node: unchanged elements stay
// the same elements, so keyboard focus, selection and hover stay where they were; rows are
// matched by their id (data-task, data-run). While the pointer is over the live part, an update
// that adds, removes or reorders rows waits a little, so rows do not move under the mouse.
// When updates stop (signed out, page gone, server unreachable) a notice says so.
(function () {
  "use strict";
  // confirm() for buttons that say so (disable, revert, pause everything, stop)
  document.addEventListener("submit", function (e) {
    var q = e.target.getAttribute("data-confirm");
    if (q && !window.confirm(q)) e.preventDefault();
  });
  var box = document.querySelector("[data-live]");
  if (!box) return;
  var notice = document.getElementById("live-status");
  var timer = null, busy = false, stopped = false, failures = 0, waited = 0, tag = null;
  var since = "";

  function delay() {
    if (failures) return Math.min(30000, 3000 * Math.pow(2, failures - 1));
    if (document.hidden) return 30000;
    return box.querySelector("[data-running]") ? 1000 : 3000;
  }
  function schedule() {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(refresh, delay());
  }
  function say(text) {
    if (!notice) return;
    if (notice.textContent !== text) notice.textContent = text;
    notice.hidden = !text;
    box.classList.toggle("stale", !!text);
  }
  function stop(text) {
    stopped = true;
    say(text);
  }

  function key(n) {
    if (n.nodeType !== 1) return null;
    return n.getAttribute("data-task") || n.getAttribute("data-run") ||
      n.getAttribute("data-host") || n.id || null;
  }
  function morph(a, b) {
    if (a.nodeType !== 1) {
      if (a.nodeValue !== b.nodeValue) a.nodeValue = b.nodeValue;
      return;
    }
    var i, name;
    for (i = a.attributes.length - 1; i >= 0; i--) {
      name = a.attributes[i].name;
      if (!b.hasAttribute(name)) a.removeAttribute(name);
    }
    for (i = 0; i < b.attributes.length; i++) {
      name = b.attributes[i].name;
      if (a.getAttribute(name) !== b.attributes[i].value) a.setAttribute(name, b.attributes[i].value);
    }
    if (a.nodeName === "TEXTAREA" || (a === document.activeElement &&
        (a.nodeName === "INPUT" || a.nodeName === "SELECT"))) return;  // what the person types
    morphChildren(a, b);
  }
  function morphChildren(from, to) {
    var want = Array.prototype.slice.call(to.childNodes), keyed = {}, c, k;
    for (c = from.firstChild; c; c = c.nextSibling) if ((k = key(c))) keyed[k] = c;
    var cur = from.firstChild;
    for (var i = 0; i < want.length; i++) {
      var n = want[i], match = null;
      k = key(n);
      if (k && keyed[k] && keyed[k].nodeName === n.nodeName) match = keyed[k];
      else if (cur && !key(cur) && !k && cur.nodeType === n.nodeType && cur.nodeName === n.nodeName) {
        match = cur;
      }
      if (!match) {
        from.insertBefore(n, cur);
        continue;
      }
      if (k) delete keyed[k];
      if (match === cur) cur = cur.nextSibling;
      else from.insertBefore(match, cur);
      morph(match, n);
    }
    while (cur) {
      var next = cur.nextSibling;
      from.removeChild(cur);
      cur = next;
    }
  }
  function rows(root) {
    var out = [], all = root.querySelectorAll("[data-task],[data-run]");
    for (var i = 0; i < all.length; i++) out.push(key(all[i]));
    return out.join(" ");
  }
  function apply(html, newTag) {
    var t = document.createElement("template");
    t.innerHTML = html;
    if (window.mdcronTimes) window.mdcronTimes(t.content);  // as the page shows them
    if (box.matches(":hover") && rows(t.content) !== rows(box) && waited < 3) {
      waited++;  // not under the mouse: try again on the next poll (at most ~10 s later)
      return;
    }
    waited = 0;
    morphChildren(box, t.content);
    tag = newTag;
    document.dispatchEvent(new CustomEvent("mdcron:live"));
  }

  function refresh() {
    if (busy || stopped) return schedule();
    busy = true;
    var headers = {"X-Live": "1"};
    if (tag) headers["If-None-Match"] = tag;
    fetch(window.location.href, {headers: headers, credentials: "same-origin", cache: "no-store"})
      .then(function (r) {
        if (r.status === 401 || r.status === 403) {
          stop("Live updates stopped: the server no longer accepts this page's sign-in (" +
               r.status + "). Open the address `scheduler.py web` printed, then reload.");
          return;
        }
        if (r.status === 404) {
          stop("Live updates stopped: this page no longer exists (404). Go back to Tasks.");
          return;
        }
        failures = 0;
        say("");
        if (r.status === 304) return;
        if (!r.ok) throw new Error("the server answered " + r.status);
        var newTag = r.headers.get("ETag");
        return r.text().then(function (html) { apply(html, newTag); });
      })
      .catch(function (err) {
        if (!failures++) since = new Date().toLocaleTimeString();
        var why = err && /^the server/.test(err.message) ? err.message : "the server cannot be reached";
        say("Live updates paused: " + why + " (since " + since + "); trying again.");
      })
      .then(function () { busy = false; schedule(); });
  }
  document.addEventListener("mdcron:refresh", function () {  // find.js: the address changed
    tag = null;
    clearTimeout(timer);
    refresh();
  });
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) refresh(); else schedule();
  });
  schedule();
})();

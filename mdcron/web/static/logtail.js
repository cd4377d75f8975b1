// A run's output, followed (issue 24): the page opens at the latest lines; while the run runs,
// the bytes written since are fetched (/api/runs/<n>/log?offset=K) and appended as text, so a
// selection in what is already there stays, and the view stays at the bottom unless the
// person scrolled up to read. The page keeps at most ~2 MB of it; the file has everything.
(function () {
  "use strict";
  var pre = document.getElementById("log");
  if (!pre) return;
  var KEEP = 2000000;
  function atBottom() { return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24; }
  pre.scrollTop = pre.scrollHeight;
  if (!pre.hasAttribute("data-follow")) return;
  var run = pre.getAttribute("data-run");
  var offset = parseInt(pre.getAttribute("data-offset"), 10) || 0;
  var kept = pre.textContent.length;
  function append(text) {
    pre.appendChild(document.createTextNode(text));
    kept += text.length;
    while (kept > KEEP && pre.firstChild && pre.firstChild !== pre.lastChild) {
      kept -= pre.firstChild.nodeValue ? pre.firstChild.nodeValue.length : 0;
      pre.removeChild(pre.firstChild);
    }
  }
  function poll() {
    fetch("/api/runs/" + encodeURIComponent(run) + "/log?offset=" + offset,
          {credentials: "same-origin", cache: "no-store"})
      .then(function (r) {
        if (!r.ok) throw new Error("the server answered " + r.status);
        return r.json();
      })
      .then(function (d) {
        var stick = atBottom();
        if (d.skipped) {
          pre.textContent = "… (earlier output left out: the log file has it)\n";
          kept = pre.textContent.length;
        }
        if (d.text) append(d.text);
        offset = d.offset;
        if (stick) pre.scrollTop = pre.scrollHeight;
        if (d.finished) {
          pre.removeAttribute("data-follow");
          return;
        }
        setTimeout(poll, d.text ? 500 : 1000);
      })
      .catch(function () { setTimeout(poll, 5000); });
  }
  setTimeout(poll, 500);
})();

// Keyboard shortcuts (issue 24): "/" search (the Tasks page's box), "g t" Tasks, "g r" History
// (runs), "g i" Incidents, "g u" Upcoming, "g h" Health, "?" shows them, Esc closes. Keys
// typed into a field are the field's, and a key with Ctrl, Alt or Meta is the browser's.
(function () {
  "use strict";
  var go = {t: "/", r: "/history", i: "/incidents", u: "/upcoming", h: "/health"};
  var help = document.getElementById("keys-help"), g = 0;
  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.nodeName));
  }
  function show(on) { if (help) help.hidden = !on; }
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { show(false); if (typing(e.target)) e.target.blur(); return; }
    if (e.ctrlKey || e.altKey || e.metaKey || typing(e.target)) return;
    if (g && Date.now() - g < 1500 && go[e.key]) {
      g = 0;
      e.preventDefault();
      window.location.href = go[e.key];
      return;
    }
    g = 0;
    if (e.key === "g") { g = Date.now(); return; }
    if (e.key === "?") { e.preventDefault(); show(help && help.hidden); return; }
    if (e.key === "/") {
      e.preventDefault();
      var box = document.getElementById("q");
      if (box) { box.focus(); box.select(); } else window.location.href = "/#q";
    }
  });
  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("[data-close-help]")) show(false);
  });
})();

// approvalbot: live updates. The page works without this; with it, the inbox follows the
// service (an SSE feed), and deadlines count down.
(function () {
  "use strict";
  var body = document.body;
  var offset = Date.parse(body.dataset.now) - Date.now(); // the service's clock, not this one

  function duration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    var m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (d) return h ? d + " d " + h + " h" : d + " d";
    if (h) return m ? h + " h " + m + " min" : h + " h";
    if (m) return m + " min";
    return sec + " s";
  }

  function tick() {
    var now = Date.now() + offset;
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Date.parse(el.dataset.deadline) - now;
      el.textContent = left > 0 ? "expires in " + duration(left) : "expiring now";
      el.classList.toggle("soon", left < 10 * 60 * 1000);
    });
  }
  tick();
  setInterval(tick, 1000);

  if (!body.dataset.stream || !window.EventSource) return;

  function keysOf(list) {
    try { return JSON.parse(list.dataset.keys || "[]"); } catch (e) { return []; }
  }

  // Swap the list for the server's, keeping cards that stay (and what is typed into them).
  function morph(list, fresh) {
    var keep = {};
    list.querySelectorAll("article[data-id]").forEach(function (el) { keep[el.dataset.id] = el; });
    var next = [];
    fresh.childNodes.forEach(function (node) {
      if (node.nodeType !== 1) return;
      var id = node.dataset && node.dataset.id;
      next.push(id && keep[id] ? keep[id] : node);
    });
    list.replaceChildren.apply(list, next);
    list.dataset.keys = fresh.dataset.keys;
  }

  var busy = false, again = false;
  function refresh() {
    var list = document.getElementById("inbox-list");
    if (!list) return;
    if (busy) { again = true; return; }
    busy = true;
    fetch("/web/inbox", { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var box = document.createElement("div");
        box.innerHTML = html;
        var fresh = box.querySelector("#inbox-list");
        if (fresh) morph(list, fresh);
        var total = document.getElementById("inbox-total");
        if (total) total.textContent = "(" + keysOf(list).length + ")";
        tick();
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }

  var source = new EventSource(body.dataset.stream);
  source.addEventListener("open", function () { body.dataset.live = "1"; });
  source.addEventListener("error", function () { body.dataset.live = "0"; });
  source.addEventListener("inbox", function (event) {
    var data = JSON.parse(event.data);
    body.dataset.live = "1";
    if (data.now) offset = Date.parse(data.now) - Date.now();
    var count = document.getElementById("inbox-count");
    if (count) count.textContent = data.count ? String(data.count) : "";
    var list = document.getElementById("inbox-list");
    if (list && JSON.stringify(keysOf(list)) !== JSON.stringify(data.keys)) refresh();
    var watch = body.dataset.watch;
    if (watch && data.keys.indexOf(watch) < 0) {
      delete body.dataset.watch;
      location.reload(); // this decision ended elsewhere: show how
    }
  });
})();

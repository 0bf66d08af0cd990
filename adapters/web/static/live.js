// approvalbot: live updates and the keyboard. The page works without this; with it, the inbox
// follows the service (an SSE feed), times count, the tab's title counts what waits, and the
// queue can be worked from the keyboard (press ? on the inbox).
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

  function ago(ms) {
    if (ms < 10000) return "just now";
    return duration(ms).split(" ").slice(0, 2).join(" ") + " ago";
  }

  function tick() {
    var now = Date.now() + offset;
    document.querySelectorAll("[data-deadline]").forEach(function (el) {
      var left = Date.parse(el.dataset.deadline) - now;
      el.textContent = left > 0 ? "expires in " + duration(left) : "expiring now";
      el.classList.toggle("soon", left < 10 * 60 * 1000);
    });
    document.querySelectorAll("time.ago[datetime]").forEach(function (el) {
      var text = ago(now - Date.parse(el.getAttribute("datetime")));
      if (el.textContent !== text) el.textContent = text;
    });
  }
  tick();
  setInterval(tick, 1000);

  // The tab's title counts what waits for this person: "(3) Inbox · approvalbot".
  var baseTitle = document.title.replace(/^\(\d+\) /, "");
  function showCount(count) {
    document.title = (count ? "(" + count + ") " : "") + baseTitle;
    var badge = document.getElementById("inbox-count");
    if (badge) badge.textContent = count ? String(count) : "";
  }

  // Desktop notifications: off until the person turns them on with the button (the browser
  // asks for permission on that click only).
  var NOTIFY = "approvalbot.notify";
  var notifyButton = document.getElementById("notify-button");
  function notifyOn() {
    return window.Notification && Notification.permission === "granted" &&
      localStorage.getItem(NOTIFY) === "1";
  }
  function labelNotify() {
    if (!notifyButton) return;
    notifyButton.hidden = !window.Notification || Notification.permission === "denied";
    notifyButton.textContent = notifyOn() ? "Desktop notifications: on (turn off)"
      : "Notify me of new decisions";
    notifyButton.setAttribute("aria-pressed", notifyOn() ? "true" : "false");
  }
  if (notifyButton && window.Notification) {
    notifyButton.addEventListener("click", function () {
      if (notifyOn()) { localStorage.removeItem(NOTIFY); labelNotify(); return; }
      Notification.requestPermission().then(function (permission) {
        if (permission === "granted") localStorage.setItem(NOTIFY, "1");
        labelNotify();
      });
    });
  }
  labelNotify();

  var opened = {}; // the groups opened in place ("Show N more"), by run
  keyboard();
  document.addEventListener("click", openInPlace);

  if (!body.dataset.stream || !window.EventSource) return;

  // Swap the list for the server's, keeping cards that stay (and what is typed into them),
  // the groups a person folded, and the keyboard's place.
  function morph(list, fresh) {
    var keep = {}, folded = {};
    list.querySelectorAll("article[data-id]").forEach(function (el) { keep[el.dataset.id] = el; });
    list.querySelectorAll("details.group[data-run]").forEach(function (el) {
      if (!el.open) folded[el.dataset.run] = true;
    });
    var active = document.activeElement;
    var place = cards().indexOf(current());
    fresh.querySelectorAll("article[data-id]").forEach(function (node) {
      var old = keep[node.dataset.id];
      if (old) node.replaceWith(old);
    });
    fresh.querySelectorAll("details.group[data-run]").forEach(function (el) {
      if (folded[el.dataset.run]) el.open = false;
    });
    list.replaceChildren.apply(list, Array.prototype.slice.call(fresh.childNodes));
    ["keys", "version", "total"].forEach(function (name) { list.dataset[name] = fresh.dataset[name]; });
    if (active && active !== document.activeElement && document.contains(active)) {
      active.focus({ preventScroll: true });
    } else if (place >= 0 && !current()) {
      var now = cards();
      if (now.length) select(now[Math.min(place, now.length - 1)], false);
    }
  }

  var busy = false, again = false;
  function refresh() {
    var list = document.getElementById("inbox-list");
    if (!list) return;
    if (busy) { again = true; return; }
    busy = true;
    // The groups opened in place stay open: the server shows as many of their cards.
    var query = new URLSearchParams(location.search);
    Object.keys(opened).forEach(function (run) {
      var group = groupOf(run);
      if (group) query.append("open", shownIn(group) + "~" + run);
      else delete opened[run];
    });
    var search = query.toString();
    fetch("/web/inbox" + (search ? "?" + search : ""), { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var box = document.createElement("div");
        box.innerHTML = html;
        var fresh = box.querySelector("#inbox-list");
        if (fresh) morph(list, fresh);
        var total = document.getElementById("inbox-total");
        if (total) total.textContent = "(" + list.dataset.total + ")";
        tick();
      })
      .catch(function () { /* the next event tries again */ })
      .then(function () { busy = false; if (again) { again = false; refresh(); } });
  }

  var seen = null, lastCount = null;
  function announce(data) {
    var fresh = data.keys.filter(function (k) { return !seen[k]; });
    data.keys.forEach(function (k) { seen[k] = true; });
    if (!fresh.length || lastCount === null || data.count <= lastCount) return;
    if (!notifyOn() || document.visibilityState === "visible") return;
    // Named by the newest call as its card shows it: masked by the server, as on the page.
    cardFor(fresh[0]).then(function (card) {
      var said = describe(card);
      var more = fresh.length > 1 ? " (and " + (fresh.length - 1) + " more)" : "";
      var n = new Notification("approvalbot: " + said.what + " waits for you" + more, {
        body: (said.text ? said.text + "\n" : "") + data.count + " waiting in all",
        tag: "approvalbot-inbox",
      });
      n.onclick = function () { window.focus(); n.close(); };
    });
  }

  // The card of a decision: on this page, else in the inbox's first page (the newest are).
  function cardFor(id) {
    var here = cardIn(document, id);
    if (here) return Promise.resolve(here);
    return fetch("/web/inbox", { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : ""; })
      .then(function (html) {
        var box = document.createElement("div");
        box.innerHTML = html;
        return cardIn(box, id);
      })
      .catch(function () { return null; });
  }
  function cardIn(root, id) {
    var found = null;
    root.querySelectorAll("article.card[data-id]").forEach(function (el) {
      if (el.dataset.id === id) found = el;
    });
    return found;
  }
  function describe(card) {
    if (!card) return { what: "a new decision", text: "" };
    function text(selector) {
      var el = card.querySelector(selector);
      return el ? el.textContent.replace(/\s+/g, " ").trim() : "";
    }
    var tool = text("header .tool");
    var what = tool ? tool : "a question";
    var said = tool ? text("p.summary") || text("figure.block pre") : text("p.prompt");
    return { what: what, text: said.length > 140 ? said.slice(0, 139) + "…" : said };
  }

  // Someone else's approval counted on a decision's page: the count, in place (a reload would
  // lose what a person is typing into the deny reason or the edit).
  function showApprovals(approvals) {
    var line = document.querySelector("main p.approvals[data-given]");
    if (!line || line.dataset.given === String(approvals.given.length)) return;
    line.dataset.given = String(approvals.given.length);
    line.textContent = "";
    var count = document.createElement("span");
    count.className = "approvals-count";
    count.textContent = approvals.given.length + " of " + approvals.required + " approvals";
    line.appendChild(count);
    approvals.given.forEach(function (name) {
      line.appendChild(document.createTextNode(" · "));
      var who = document.createElement("span");
      who.className = "given";
      who.textContent = name + " ✓";
      line.appendChild(who);
    });
  }

  var watch = body.dataset.watch;
  var url = body.dataset.stream + (watch ? "?watch=" + encodeURIComponent(watch) : "");
  var source = new EventSource(url);
  source.addEventListener("open", function () { body.dataset.live = "1"; });
  source.addEventListener("error", function () { body.dataset.live = "0"; });
  source.addEventListener("inbox", function (event) {
    var data = JSON.parse(event.data);
    body.dataset.live = "1";
    if (data.now) offset = Date.parse(data.now) - Date.now();
    showCount(data.count);
    if (seen === null) {
      seen = {};
      data.keys.forEach(function (k) { seen[k] = true; });
    } else {
      announce(data);
    }
    lastCount = data.count;
    var list = document.getElementById("inbox-list");
    if (list && list.dataset.version !== data.version) refresh();
    if (body.dataset.watch && data.watched === false) {
      delete body.dataset.watch;
      location.reload(); // this decision ended elsewhere: show how
    } else if (body.dataset.watch && data.approvals) {
      showApprovals(data.approvals);
    }
  });

  // "Show N more", opened in place ----------------------------------------------------------
  // The link leads to the run's own queue; with the script, its next cards come into the group
  // instead (a fragment of the same cards), the count stays true, and focus goes to the first
  // new card, so j/k/a/d carry on from there. A modified click still opens the link.
  function groupOf(run) {
    var found = null;
    document.querySelectorAll("details.group[data-run]").forEach(function (el) {
      if (el.dataset.run === run) found = el;
    });
    return found;
  }
  function shownIn(group) { return group.querySelectorAll("article.card[data-id]").length; }

  function openInPlace(event) {
    var link = event.target.closest && event.target.closest("a.more[data-cards]");
    if (!link || event.defaultPrevented || event.button !== 0) return;
    if (event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    var group = link.closest("details.group[data-run]");
    if (!group || !window.fetch) return;
    event.preventDefault();
    if (link.getAttribute("aria-busy") === "true") return;
    link.setAttribute("aria-busy", "true");
    fetch(link.dataset.cards, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var box = document.createElement("div");
        box.innerHTML = html;
        var more = box.querySelector("#more-cards");
        if (!more) return Promise.reject("no cards");
        group = groupOf(group.dataset.run) || group; // a live refresh may have swapped it
        link = group.querySelector("a.more") || link;
        var foot = group.querySelector(".group-foot");
        var added = [];
        Array.prototype.slice.call(more.querySelectorAll("article.card[data-id]")).forEach(function (card) {
          if (cardIn(group, card.dataset.id)) return; // shown already (a refresh came first)
          group.insertBefore(card, foot);
          added.push(card);
        });
        opened[group.dataset.run] = true;
        var waiting = Number(more.dataset.waiting);
        var count = group.querySelector("summary .waiting");
        if (count) count.textContent = waiting + " waiting";
        var left = waiting - shownIn(group);
        var next = more.querySelector("a.more[data-cards]");
        var wrap = link.closest(".more-wrap") || link;
        if (left > 0 && next) {
          link.dataset.cards = next.dataset.cards;
          link.textContent = "Show " + left + " more";
          link.removeAttribute("aria-busy");
        } else if (left > 0) {
          link.textContent = "Show " + left + " more"; // newer than these: the run's queue has them
          link.removeAttribute("data-cards");
          link.removeAttribute("aria-busy");
        } else {
          wrap.remove();
        }
        tick();
        if (added.length) select(added[0]);
        else if (!document.contains(link)) group.querySelector("summary").focus();
      })
      .catch(function () { location.href = link.href; }); // the run's own queue, as without the script
  }

  // The keyboard ------------------------------------------------------------------------------
  function cards() {
    return Array.prototype.filter.call(
      document.querySelectorAll("main article.card[data-id]"),
      function (el) { return el.offsetParent !== null; } // not in a folded group
    );
  }
  function current() {
    var el = document.querySelector("main article.card.current");
    return el && document.contains(el) ? el : null;
  }
  function select(el, scroll) {
    var was = current();
    if (was) was.classList.remove("current");
    el.classList.add("current");
    el.focus({ preventScroll: true });
    if (scroll !== false) el.scrollIntoView({ block: "nearest" });
  }

  function keyboard() {
    var all = cards();
    if (!all.length && !document.getElementById("inbox-list")) return;
    if (window.matchMedia && matchMedia("(pointer: fine)").matches) body.dataset.keys = "1";
    var help = document.getElementById("keys-help");
    var helpButton = document.getElementById("keys-button");
    function toggleHelp(show) {
      if (!help) return;
      help.hidden = show === undefined ? !help.hidden : !show;
      if (helpButton) helpButton.setAttribute("aria-expanded", help.hidden ? "false" : "true");
    }
    if (helpButton) {
      helpButton.hidden = false;
      helpButton.addEventListener("click", function () { toggleHelp(); });
    }
    // After a decision made by key the page comes back here: carry on where the person was.
    var place = sessionStorage.getItem("approvalbot.place");
    if (place !== null) {
      sessionStorage.removeItem("approvalbot.place");
      if (all.length) select(all[Math.min(Number(place) || 0, all.length - 1)]);
    }

    function typing(el) {
      if (!el || !el.tagName) return false;
      if (el.isContentEditable) return true;
      var tag = el.tagName.toLowerCase();
      if (tag === "textarea" || tag === "select") return true;
      return tag === "input" && !/^(checkbox|radio|button|submit|reset)$/i.test(el.type);
    }
    function target() {
      var el = current();
      if (el) return el;
      var list = cards();
      return list.length === 1 ? list[0] : null;
    }
    function remember(el) {
      sessionStorage.setItem("approvalbot.place", String(Math.max(0, cards().indexOf(el))));
    }
    function press(el, button) {
      if (!button) return false;
      remember(el);
      button.click();
      return true;
    }

    document.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
      if (event.key === "Escape") {
        if (typing(event.target)) {
          var holder = event.target.closest("article.card");
          if (holder) { event.preventDefault(); select(holder); }
        } else if (help && !help.hidden) {
          toggleHelp(false);
        }
        return;
      }
      if (typing(event.target)) return; // never steal what is typed into a field
      var list = cards(), el = current(), handled = true;
      if (event.key === "j" || event.key === "k") {
        if (!list.length) return;
        var at = list.indexOf(el);
        var next = event.key === "j" ? (at < 0 ? 0 : Math.min(at + 1, list.length - 1))
          : (at < 0 ? 0 : Math.max(at - 1, 0));
        select(list[next]);
      } else if (event.key === "?") {
        toggleHelp();
      } else if (event.key === "a") {
        el = target();
        handled = !!el && press(el, el.querySelector("form.approve button.approve"));
      } else if (event.key === "A") {
        el = target(); // approve & allow like this: its page shows the rule before anything
        handled = !!el && press(el, el.querySelector("a.button.allow"));
      } else if (event.key === "d") {
        el = target();
        var reason = el && el.querySelector('form.deny input[name="reason"]');
        if (reason) { select(el, false); remember(el); reason.focus(); } else { handled = false; }
      } else if (/^[1-9]$/.test(event.key)) {
        el = target();
        var n = Number(event.key) - 1;
        var option = el && el.querySelectorAll("form.options button.option")[n];
        var box = el && el.querySelectorAll('form.multi input[type="checkbox"]')[n];
        if (option) handled = press(el, option);
        else if (box) box.click();
        else handled = false;
      } else if (event.key === "Enter" && event.target === el && el) {
        var link = el.querySelector("a.full-view");
        if (link) link.click(); else handled = false;
      } else {
        handled = false;
      }
      if (handled) event.preventDefault();
    });
  }
})();

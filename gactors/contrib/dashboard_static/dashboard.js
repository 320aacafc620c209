// The gactors dashboard page: polls api/state (relative to the page) and renders it.
// Plain DOM, no framework; every text from the server goes in through textContent.
(function () {
  "use strict";
  var POLL_MS = __POLL_MS__;
  var HIDDEN_POLL_MS = 5000;
  var params = new URLSearchParams(location.search);
  var token = params.get("token");
  var storeKey = "gactors-dashboard-open:" + location.pathname;
  var open = new Set(["/", "/user"]);
  try {
    (JSON.parse(sessionStorage.getItem(storeKey) || "[]") || []).forEach(function (p) { open.add(p); });
  } catch (e) { /* a corrupt entry only loses the expansion state */ }
  var limit = 100;
  var prev = {};         // path -> {mailbox, restarts} of the previous poll
  var flash = {};        // path -> time until which a restart stays highlighted
  var timer = null;

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmt(n) { return typeof n === "number" ? n.toLocaleString("en-US") : "–"; }
  function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }
  function saveOpen() {
    try { sessionStorage.setItem(storeKey, JSON.stringify(Array.from(open))); } catch (e) { /* private mode */ }
  }

  function poll() {
    var q = new URLSearchParams();
    open.forEach(function (p) { q.append("open", p); });
    q.set("limit", String(limit));
    var headers = token ? { "Authorization": "Bearer " + token } : {};
    fetch("api/state?" + q.toString(), { headers: headers, cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          return r.json().catch(function () { return {}; }).then(function (body) {
            throw new Error(r.status + (body.error ? ": " + body.error : ""));
          });
        }
        return r.json();
      })
      .then(function (state) {
        render(state);
        var s = $("status");
        s.className = "status live";
        s.textContent = "live · " + clock(state.time);
      })
      .catch(function (err) {
        var s = $("status");
        s.className = "status error";
        s.textContent = "not updating: " + err.message;
      })
      .then(schedule);
  }
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, document.hidden ? HIDDEN_POLL_MS : POLL_MS);
  }
  function refreshNow() { clearTimeout(timer); poll(); }

  function render(state) {
    $("system-name").textContent = state.system.name + " · pid " + state.system.pid +
      (state.system.terminated ? " · terminated" : "");
    var t = state.totals;
    $("c-actors").textContent = fmt(t.actors) + (t.truncated ? "+" : "");
    $("c-mailbox").textContent = fmt(t.mailbox);
    $("c-rate").textContent = fmt(Math.round(state.messages.per_second));
    $("c-restarts").textContent = fmt(t.restarts);
    $("c-dl").textContent = fmt(state.dead_letters.per_second);
    $("c-dl").parentNode.classList.toggle("alert", state.dead_letters.per_second > 0);
    $("c-dl-spark").textContent = spark(state.dead_letters.history.slice(-30));
    $("c-blocked").textContent = state.hub_blocked.total + " · " + state.hub_blocked.seconds.toFixed(2) + " s";
    $("c-blocked").parentNode.classList.toggle("alert", state.hub_blocked.total > 0);
    $("tree-note").textContent = "(" + fmt(t.actors) + " actors; click ▸ to expand)";
    renderTree($("tree"), state.tree, true);
    renderFailures(state.failures);
    renderBlocks(state.hub_blocked.recent);
    renderHot(state.hot);
    renderCluster(state.cluster);
  }

  function spark(values) {
    var bars = "▁▂▃▄▅▆▇█";
    var max = Math.max.apply(null, values.concat([1]));
    if (values.every(function (v) { return v === 0; })) return "";
    return values.map(function (v) { return v ? bars[Math.min(7, Math.floor(v / max * 7.99))] : " "; }).join("");
  }

  // nodes: flat, parents first (each has path, parent, children, more).
  function renderTree(root, nodes, local) {
    var now = Date.now();
    var lists = {};
    var frag = document.createDocumentFragment();
    var seen = {};
    nodes.forEach(function (n) {
      var li = el("li");
      li.dataset.path = n.path;
      var row = el("div", "row");
      var toggle = el("button", "toggle", n.children ? (open.has(n.path) ? "▾" : "▸") : "");
      toggle.type = "button";
      if (n.children && local) {
        toggle.title = open.has(n.path) ? "collapse" : "expand " + n.children + " children";
        toggle.addEventListener("click", function () {
          if (open.has(n.path)) open.delete(n.path); else open.add(n.path);
          saveOpen();
          refreshNow();
        });
      }
      row.appendChild(toggle);
      row.appendChild(el("span", "name", n.path === "/" ? "/" : n.name));
      row.appendChild(el("span", "cls", n.actor));
      row.appendChild(el("span", "badge " + n.state, n.state));
      var mb = el("span", "num mailbox", "mailbox " + n.mailbox);
      var rs = el("span", "num restarts", "restarts " + n.restarts);
      row.appendChild(mb);
      row.appendChild(rs);
      if (n.children && !open.has(n.path)) row.appendChild(el("span", "num", n.children + " children"));
      var p = prev[n.path];
      if (n.mailbox > 0 && p && n.mailbox > p.mailbox) row.classList.add("growing");
      if (p && n.restarts > p.restarts) flash[n.path] = now + 10000;
      if (n.recent_restart || (flash[n.path] && flash[n.path] > now)) row.classList.add("restarted");
      if (local) seen[n.path] = { mailbox: n.mailbox, restarts: n.restarts };
      li.appendChild(row);
      var parentList = n.parent === null ? frag : lists[n.parent];
      if (!parentList) return;  // its parent was cut off: not shown
      parentList.appendChild(li);
      if (n.more !== undefined) {
        var ul = el("ul");
        li.appendChild(ul);
        lists[n.path] = ul;
        if (n.more > 0) {
          var more = el("li", "more", "+" + n.more.toLocaleString("en-US") + " more");
          more.title = limit < 1000 ? "show up to " + Math.min(1000, limit * 10) + " children per actor" : "";
          more.addEventListener("click", function () { limit = Math.min(1000, limit * 10); refreshNow(); });
          lists[n.path].moreItem = more;
        }
      }
    });
    // "+k more" goes after the children that are shown.
    Object.keys(lists).forEach(function (k) { if (lists[k].moreItem) lists[k].appendChild(lists[k].moreItem); });
    if (local) prev = seen;
    root.replaceChildren(frag);
  }

  function renderFailures(failures) {
    var body = $("failures").tBodies[0];
    var rows = failures.slice(0, 20).map(function (f) {
      var tr = el("tr");
      tr.appendChild(el("td", "", clock(f.time)));
      tr.appendChild(el("td", "path", f.path));
      tr.appendChild(el("td", "directive-" + f.directive, f.directive));
      tr.appendChild(el("td", "", (f.exception ? f.exception + ": " : "") + f.message));
      return tr;
    });
    body.replaceChildren.apply(body, rows);
    $("failures-empty").hidden = failures.length > 0;
  }

  function renderBlocks(blocks) {
    var items = blocks.slice(0, 10).map(function (b) {
      var li = el("li");
      li.appendChild(el("span", "", clock(b.time) + " "));
      li.appendChild(el("span", "name", b.path || "(no actor: code outside the actors)"));
      li.appendChild(el("span", "", " blocked the hub for " + b.seconds.toFixed(3) + " s"));
      if (b.stack) {
        var d = el("details");
        d.appendChild(el("summary", "", "stack"));
        d.appendChild(el("pre", "", b.stack));
        li.appendChild(d);
      }
      return li;
    });
    $("blocks").replaceChildren.apply($("blocks"), items);
    $("blocks-empty").hidden = blocks.length > 0;
  }

  function renderHot(hot) {
    function list(id, entries, key) {
      var items = entries.map(function (e) {
        var li = el("li");
        li.appendChild(el("span", "name", e.path));
        li.appendChild(el("span", "num", " " + key + " " + e[key]));
        return li;
      });
      if (!items.length) items = [el("li", "empty", "none")];
      $(id).replaceChildren.apply($(id), items);
    }
    list("hot-mailbox", hot.mailbox, "mailbox");
    list("hot-restarts", hot.restarts, "restarts");
  }

  function renderCluster(c) {
    $("cluster").hidden = !c;
    var trees = $("cluster-trees");
    if (!c) { trees.replaceChildren(); return; }
    var body = $("members").tBodies[0];
    body.replaceChildren.apply(body, c.members.map(function (m) {
      var tr = el("tr");
      tr.appendChild(el("td", "path", m.address + (m.address === c.self ? " (this node)" : "")));
      tr.appendChild(el("td", "badge " + (m.status === "up" ? "running" : "failed"), m.status));
      tr.appendChild(el("td", "", m.roles.join(", ")));
      return tr;
    }));
    function where(items, label) {
      if (!items.length) return [el("li", "empty", "none")];
      return items.map(function (s) { return el("li", "", label(s)); });
    }
    $("singletons").replaceChildren.apply($("singletons"), where(c.singletons, function (s) {
      return s.name + " → " + (s.node || "not running");
    }));
    $("shards").replaceChildren.apply($("shards"), where(c.shards, function (s) {
      return s.type_name + "/" + s.shard + " → " + (s.node || "not allocated") +
        (s.entities === null || s.entities === undefined ? "" : " (" + s.entities + " entities)");
    }));
    var panels = c.nodes.filter(function (n) { return n.address !== c.self; }).map(function (n) {
      var div = el("div");
      div.appendChild(el("h2", "", "Node " + n.address));
      if (n.tree) {
        var ul = el("ul", "tree");
        renderTree(ul, n.tree, false);
        div.appendChild(ul);
      } else {
        div.appendChild(el("p", "empty", n.error || "tree not available"));
      }
      return div;
    });
    trees.replaceChildren.apply(trees, panels);
  }

  document.addEventListener("visibilitychange", function () { if (!document.hidden) refreshNow(); });
  poll();
})();

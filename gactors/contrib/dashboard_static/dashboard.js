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
  var prev = {};         // node prefix -> path -> {mailbox, restarts} of the previous poll
  var flash = {};        // node prefix + path -> time until which a restart stays highlighted
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
    renderTree($("tree"), state.tree, "");
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

  // nodes: flat, parents first (each has path, parent, children, more). prefix: ""
  // for this node's tree, the node's address for another node's (the open set keys
  // that node's paths by their full address, which is what api/state takes).
  function renderTree(root, nodes, prefix) {
    var now = Date.now();
    var lists = {};
    var frag = document.createDocumentFragment();
    var seen = {};
    var before = prev[prefix] || {};
    nodes.forEach(function (n) {
      var key = prefix + n.path;
      var li = el("li");
      li.dataset.path = n.path;
      var row = el("div", "row");
      var isOpen = n.more !== undefined || (n.path === "/" ? true : open.has(key));
      var toggle = el("button", "toggle", n.children ? (isOpen ? "▾" : "▸") : "");
      toggle.type = "button";
      if (n.children && n.path !== "/") {
        toggle.title = isOpen ? "collapse" : "expand " + n.children + " children";
        toggle.addEventListener("click", function () {
          if (isOpen) open.delete(key); else open.add(key);
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
      if (n.children && !isOpen) row.appendChild(el("span", "num", n.children + " children"));
      var p = before[n.path];
      if (n.mailbox > 0 && p && n.mailbox > p.mailbox) row.classList.add("growing");
      if (p && n.restarts > p.restarts) flash[key] = now + 10000;
      if (n.recent_restart || (flash[key] && flash[key] > now)) row.classList.add("restarted");
      seen[n.path] = { mailbox: n.mailbox, restarts: n.restarts };
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
    prev[prefix] = seen;
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

  var MEMBER_BADGE = { up: "running", leaving: "terminating", unreachable: "failed" };

  function renderCluster(c) {
    $("cluster").hidden = !c;
    var trees = $("cluster-trees");
    if (!c) { trees.replaceChildren(); return; }
    var body = $("members").tBodies[0];
    body.replaceChildren.apply(body, c.members.map(function (m) {
      var tr = el("tr");
      tr.appendChild(el("td", "path", m.address + (m.address === c.self ? " (this node)" : "")));
      var td = el("td");
      td.appendChild(el("span", "badge " + (MEMBER_BADGE[m.status] || "failed"), m.status));
      tr.appendChild(td);
      tr.appendChild(el("td", "", m.roles.join(", ")));
      return tr;
    }));
    var singles = c.singletons.map(function (s) {
      return el("li", "", s.name + " → " + (s.node ? s.node + (s.node === c.self ? " (this node)" : "") +
        (s.token ? " · token " + s.token : "") : "not running on any node that answered"));
    });
    if (!singles.length) singles = [el("li", "empty", "none")];
    $("singletons").replaceChildren.apply($("singletons"), singles);
    renderShards(c);
    var panels = c.nodes.filter(function (n) { return n.address !== c.self; }).map(function (n) {
      var div = el("div", "node");
      div.dataset.node = n.address;
      var h = el("h2", "", "Node " + n.address + " ");
      var info = [n.status];
      if (n.pid) info.push("pid " + n.pid);
      if (n.totals) info.push(fmt(n.totals.actors) + (n.totals.truncated ? "+" : "") + " actors");
      if (n.as_of && n.error) info.push("tree as of " + clock(n.as_of));
      h.appendChild(el("small", "", "(" + info.join(" · ") + ")"));
      div.appendChild(h);
      if (n.error) div.appendChild(el("p", "node-error", n.error));
      if (n.tree) {
        var ul = el("ul", "tree");
        renderTree(ul, n.tree, n.address);
        div.appendChild(ul);
        if (n.truncated) div.appendChild(el("p", "empty", "(more rows than one answer carries: close some nodes)"));
      } else if (!n.error) {
        div.appendChild(el("p", "empty", "tree not available"));
      }
      return div;
    });
    trees.replaceChildren.apply(trees, panels);
  }

  // Sharded types: one line per type (where its shards run, how many entities), the
  // shards themselves in a <details> that stays open across polls.
  var shardsOpen = {};
  function renderShards(c) {
    var byType = {};
    c.shards.forEach(function (r) { (byType[r.type_name] = byType[r.type_name] || []).push(r); });
    var items = c.sharding.map(function (t) {
      var li = el("li");
      li.dataset.type = t.type_name;
      var perNode = {};
      (byType[t.type_name] || []).forEach(function (r) {
        var p = perNode[r.node] = perNode[r.node] || { shards: 0, entities: 0 };
        p.shards += 1; p.entities += r.entities;
      });
      var parts = Object.keys(perNode).sort().map(function (node) {
        return node + ": " + perNode[node].shards + " shards, " + perNode[node].entities + " entities";
      });
      li.appendChild(el("div", "", t.type_name + " — " + t.running + " of " + t.number_of_shards +
        " shards running, " + fmt(t.entities) + " entities" + (t.role ? " (role " + t.role + ")" : "")));
      var where = el("div", "num", parts.length ? parts.join(" · ") : "no shard running yet");
      li.appendChild(where);
      var rows = byType[t.type_name] || [];
      if (rows.length) {
        var d = el("details");
        d.open = !!shardsOpen[t.type_name];
        d.addEventListener("toggle", function () { shardsOpen[t.type_name] = d.open; });
        d.appendChild(el("summary", "", "shards"));
        var ul = el("ul", "plain shard-list");
        rows.forEach(function (r) {
          ul.appendChild(el("li", "", t.type_name + "/" + r.shard + " → " + r.node + " (" + r.entities +
            " entities" + (r.state !== "running" ? ", " + r.state : "") + ")"));
        });
        d.appendChild(ul);
        li.appendChild(d);
      }
      return li;
    });
    if (!items.length) items = [el("li", "empty", "none")];
    $("shards").replaceChildren.apply($("shards"), items);
  }

  document.addEventListener("visibilitychange", function () { if (!document.hidden) refreshNow(); });
  poll();
})();

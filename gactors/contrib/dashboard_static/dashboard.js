// The gactors dashboard page: polls api/state (relative to the page) and renders it.
// Plain DOM, no framework; every text from the server goes in through textContent.
(function () {
  "use strict";
  var POLL_MS = __POLL_MS__;
  var HIDDEN_POLL_MS = 5000;
  var params = new URLSearchParams(location.search);
  var token = params.get("token");
  var storeKey = "gactors-dashboard-open:" + location.pathname;
  // The page opens by itself a small tree entirely and, in a large one, the path to
  // every hot actor (the server decides: auto=1); these are what the user changed.
  var open = new Set(["/", "/user"]);
  var closed = new Set();
  try {
    var saved = JSON.parse(sessionStorage.getItem(storeKey) || "{}") || {};
    (saved.open || []).forEach(function (p) { open.add(p); });
    (saved.closed || []).forEach(function (p) { closed.add(p); });
  } catch (e) { /* a corrupt entry only loses the expansion state */ }
  var selected = null;    // the actor drilled into (a path of this node), or null
  try { selected = sessionStorage.getItem(storeKey + ":selected"); } catch (e) { /* private mode */ }
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
    try {
      sessionStorage.setItem(storeKey, JSON.stringify({ open: Array.from(open), closed: Array.from(closed) }));
    } catch (e) { /* private mode */ }
  }

  function poll() {
    var q = new URLSearchParams();
    open.forEach(function (p) { q.append("open", p); });
    closed.forEach(function (p) { q.append("closed", p); });
    q.set("limit", String(limit));
    q.set("auto", "1");
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
        return pollActor(headers).then(function () { return state; });
      })
      .then(function (state) {
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
  // The drill-down: api/actor for the selected actor, at every poll.
  function pollActor(headers) {
    if (!selected) { $("drill").hidden = true; return Promise.resolve(); }
    return fetch("api/actor?path=" + encodeURIComponent(selected), { headers: headers, cache: "no-store" })
      .then(function (r) {
        if (r.status === 404) { renderDrillGone(selected); return null; }
        if (!r.ok) {
          return r.json().catch(function () { return {}; }).then(function (body) {
            $("d-summary").textContent = "not available: " + (body.error || r.status);
            return null;
          });
        }
        return r.json();
      })
      .then(function (view) { if (view) renderDrill(view); });
  }
  function select(path) {
    selected = path;
    try {
      if (path) sessionStorage.setItem(storeKey + ":selected", path);
      else sessionStorage.removeItem(storeKey + ":selected");
    } catch (e) { /* private mode */ }
    refreshNow();
  }
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, document.hidden ? HIDDEN_POLL_MS : POLL_MS);
  }
  function refreshNow() { clearTimeout(timer); poll(); }

  function shortNode(address) {
    var i = address.indexOf("@");
    return i >= 0 ? address.slice(i + 1) : address;
  }
  function breakdown(id, c, key, format) {
    // Per-node figures under a cluster-wide card, one line per node: "node-a 6".
    var box = $(id);
    if (!c) { box.textContent = ""; return; }
    box.textContent = c.per_node.map(function (n) {
      return shortNode(n.address) + " " + (n.counted ? format(n[key]) : "?");
    }).join("\n");
  }

  function render(state) {
    $("system-name").textContent = state.system.name + " · pid " + state.system.pid +
      (state.system.terminated ? " · terminated" : "");
    $("notice").hidden = !state.notice;
    $("notice").textContent = state.notice || "";
    var c = state.cluster;
    var local = state.totals;
    $("scope").textContent = "figures: " + (c
      ? "the cluster's, " + c.totals.nodes + " of " + c.members.length + " members counted"
      : "this node's");
    document.querySelectorAll(".scope-note").forEach(function (e) {
      e.textContent = c ? "(cluster: every node)" : "(this node)";
    });
    var t = c ? c.totals : {
      actors: local.actors, mailbox: local.mailbox, restarts: local.restarts,
      messages_per_second: state.messages.per_second,
      dead_letters_per_second: state.dead_letters.per_second,
      hub_blocked: state.hub_blocked.total
    };
    $("c-actors").textContent = fmt(t.actors) + (local.truncated ? "+" : "");
    $("c-mailbox").textContent = fmt(t.mailbox);
    $("c-rate").textContent = fmt(Math.round(t.messages_per_second));
    $("c-restarts").textContent = fmt(t.restarts);
    $("c-dl").textContent = fmt(t.dead_letters_per_second);
    $("c-dl").parentNode.classList.toggle("alert", t.dead_letters_per_second > 0);
    $("c-blocked").textContent = c ? fmt(t.hub_blocked)
      : state.hub_blocked.total + " · " + state.hub_blocked.seconds.toFixed(2) + " s";
    $("c-blocked").parentNode.classList.toggle("alert", t.hub_blocked > 0);
    breakdown("b-actors", c, "actors", fmt);
    breakdown("b-mailbox", c, "mailbox", fmt);
    breakdown("b-rate", c, "messages_per_second", function (v) { return fmt(Math.round(v)); });
    breakdown("b-restarts", c, "restarts", fmt);
    breakdown("b-dl", c, "dead_letters_per_second", fmt);
    breakdown("b-blocked", c, "hub_blocked", fmt);
    $("tree-title").textContent = c ? "Supervision tree of this node, " + shortNode(c.self) : "Supervision tree";
    $("tree-note").textContent = "(" + fmt(local.actors) + " actors; " +
      (local.actors <= state.auto_expand ? "all expanded" : "expanded down to every hot actor") +
      "; click ▸/▾ to change)";
    renderTree($("tree"), state.tree, "");
    renderFailures(c ? c.failures : state.failure_groups, !!c);
    renderBlocks(c ? c.blocks : state.hub_blocked.groups, !!c);
    renderHot(c ? c.hot : state.hot, !!c);
    renderCharts(c ? c.history : state.history, c);
    renderClasses(state.classes, c ? c.class_events : state.class_events, !!c);
    renderDelivery(state.delivery || []);
    renderReminders(state.reminders);
    renderCluster(c);
  }

  // The per-second history as three line charts (the last 10 minutes, newest right):
  // the sum, and on a cluster node one thin line per node that answered.
  var WINDOW = 600;
  var SVG = "http://www.w3.org/2000/svg";
  function linePoints(values, end, lastEnd, scale) {
    var offset = WINDOW - values.length - (lastEnd - end);
    return values.map(function (v, i) {
      return (offset + i) + "," + (58 - v / scale * 54).toFixed(1);
    }).filter(function (pt, i) { return offset + i >= 0; }).join(" ");
  }
  function renderCharts(history, cluster) {
    var perNode = [];
    if (cluster) {
      cluster.nodes.forEach(function (n) {
        var act = n.totals && n.totals.activity;
        if (act && act.history) perNode.push({ address: n.address, history: act.history });
      });
    }
    ["messages", "restarts", "dead_letters"].forEach(function (name) {
      var box = $("chart-" + name);
      var svg = box.querySelector("svg");
      var values = (history[name] || []).slice(-WINDOW);
      var peak = Math.max.apply(null, values.concat([0]));
      var scale = Math.max(peak, 1);
      var lines = [linePoints(values, history.end, history.end, scale)];
      var titles = ["all nodes"];
      perNode.forEach(function (n) {
        lines.push(linePoints((n.history[name] || []).slice(-WINDOW), n.history.end, history.end, scale));
        titles.push(shortNode(n.address));
      });
      var polys = svg.querySelectorAll("polyline");
      for (var i = polys.length; i < lines.length; i++) {
        var pl = document.createElementNS(SVG, "polyline");
        pl.setAttribute("class", "node-line node-line-" + (i % 4));
        svg.appendChild(pl);
      }
      polys = svg.querySelectorAll("polyline");
      for (var j = 0; j < polys.length; j++) {
        if (j < lines.length) {
          polys[j].setAttribute("points", lines[j]);
          polys[j].dataset.node = titles[j];
        } else {
          polys[j].remove();
        }
      }
      var last = values.length ? values[values.length - 1] : 0;
      var total = values.reduce(function (a, b) { return a + b; }, 0);
      box.dataset.last = String(last);
      box.dataset.total = String(total);
      box.dataset.end = String(history.end);
      box.querySelector(".chart-note").textContent = "now " + fmt(last) + " · peak " + fmt(peak) +
        " · " + fmt(total) + " in the last " + Math.max(1, Math.round(values.length / 60)) + " min" +
        (perNode.length ? " · thin lines: each node" : "");
    });
  }

  // Per timed actor class (the local node's): messages/s and processing-time
  // percentiles, one line per class (the classes with the most messages).
  function renderClasses(timed, events, cluster) {
    $("classes-hint").hidden = !!timed;
    [["messages", timed], ["p50", timed], ["p99", timed],
     ["restarts", events], ["dead_letters", events]].forEach(function (pair) {
      var key = pair[0], classes = pair[1];
      var box = $("chart-class-" + key);
      box.hidden = !classes;
      if (!classes) return;
      var svg = box.querySelector("svg");
      var names = Object.keys(classes.classes).filter(function (k) {
        // A class with restarts only is not drawn among the dead letters, and back.
        return key !== "restarts" && key !== "dead_letters" ||
          classes.classes[k][key].some(function (v) { return v > 0; });
      });
      var peak = 0;
      names.forEach(function (k) {
        classes.classes[k][key].forEach(function (v) { if (v !== null && v > peak) peak = v; });
      });
      var scale = peak > 0 ? peak : 1;
      var polys = names.map(function (k, i) {
        var values = classes.classes[k][key].slice(-WINDOW);
        var offset = WINDOW - values.length;
        var pts = [];
        values.forEach(function (v, j) {
          if (v !== null) pts.push((offset + j) + "," + (58 - v / scale * 54).toFixed(1));
        });
        var pl = document.createElementNS(SVG, "polyline");
        pl.setAttribute("class", "cl-" + (i % 6));
        pl.setAttribute("points", pts.join(" "));
        pl.dataset.cls = k;
        return pl;
      });
      svg.replaceChildren.apply(svg, polys);
      var legend = box.querySelector(".class-legend");
      legend.replaceChildren.apply(legend, names.map(function (k, i) {
        var vals = classes.classes[k][key].filter(function (v) { return v !== null; });
        var last = vals.length ? vals[vals.length - 1] : null;
        var counted = key !== "p50" && key !== "p99";
        return el("span", "cl-" + (i % 6), k + (last === null ? "" : " " + (counted ? fmt(last) : last.toFixed(3))));
      }));
      box.dataset.peak = String(peak);
      box.dataset.classes = names.join(",");
      box.querySelector(".chart-note").textContent = (names.length ? "" : "none in the last 10 min · ") +
        "peak " + (key === "p50" || key === "p99" ? peak.toFixed(3) : fmt(peak)) +
        (cluster ? (key === "restarts" || key === "dead_letters" ? " · all nodes" : " · this node") : "") + (classes.omitted ? " · " + classes.omitted + " more classes not drawn" : "");
    });
  }

  function renderDrillGone(path) {
    $("drill").hidden = false;
    $("d-path").textContent = path;
    $("d-summary").textContent = "no actor at this path any more (stopped)";
  }

  function list(id, items, empty) {
    var box = $(id);
    var lis = items.map(function (t) { return typeof t === "string" ? el("li", "name", t) : t; });
    if (!lis.length) lis = [el("li", "empty", empty)];
    box.replaceChildren.apply(box, lis);
  }

  function renderDrill(v) {
    var n = v.node;
    $("drill").hidden = false;
    $("d-path").textContent = (v.node_address ? shortNode(v.node_address) + " " : "") + n.path;
    $("d-summary").textContent = (n.label || n.actor) + " · " + n.state + " · mailbox " + fmt(n.mailbox) +
      " · restarts " + fmt(n.restarts) + (v.entity ? " · entity " + v.entity[0] + "/" + v.entity[1] : "");
    var depth = v.mailbox_history.depth;
    var peak = Math.max.apply(null, depth.concat([0]));
    var scale = Math.max(peak, 1);
    var offset = WINDOW - depth.length;
    $("d-mailbox").querySelector("polyline").setAttribute("points", depth.map(function (d, i) {
      return (offset + i) + "," + (38 - d / scale * 34).toFixed(1);
    }).join(" "));
    $("d-mailbox").dataset.samples = String(depth.length);
    $("d-mailbox-note").textContent = "(now " + fmt(depth[depth.length - 1]) + ", peak " + fmt(peak) + ", " +
      depth.length + " s sampled since opened)";
    var f = v.last_failure;
    var box = $("d-failure");
    if (!f) {
      box.replaceChildren(el("p", "empty", "none since the dashboard started watching"));
    } else {
      var d = el("details");
      d.appendChild(el("summary", "", clock(f.time) + " " + f.exception + ": " + f.message + " → " + f.directive +
        " (×" + fmt(f.count) + ")"));
      d.appendChild(el("pre", "traceback", f.traceback));
      d.open = true;
      box.replaceChildren(d);
    }
    list("d-children", v.children.map(function (c) {
      var li = el("li");
      var a = el("span", "name link", c.name);
      a.addEventListener("click", function () { select(c.path); });
      li.appendChild(a);
      li.appendChild(el("span", "num", " " + c.state + " · mailbox " + c.mailbox + " · restarts " + c.restarts));
      return li;
    }).concat(v.more_children > 0 ? [el("li", "empty", "+" + fmt(v.more_children) + " more")] : []), "none");
    list("d-watchers", v.watchers, "none");
    list("d-watching", v.watching, "none");
    var ps = n.persistence;
    var pbox = $("d-persistence");
    if (ps) {
      var kv = el("div", "kv");
      kv.appendChild(el("h3", "", "Persistence"));
      [["persistence id", ps.id === null ? "(starting)" : ps.id],
       [ps.sequence_nr !== undefined ? "last sequence number" : "revision",
        ps.sequence_nr !== undefined ? ps.sequence_nr : ps.revision],
       ["fencing token", ps.fencing_token !== undefined && ps.fencing_token !== null ? ps.fencing_token : "none (no lease)"]
      ].forEach(function (p) {
        var row = el("div", "persist-field");
        row.appendChild(el("b", "", p[0] + ": "));
        row.appendChild(el("span", "name", p[1]));
        kv.appendChild(row);
      });
      pbox.replaceChildren(kv);
    } else {
      pbox.replaceChildren();
    }
    if (v.node_address) {
      list("d-reminders", [el("li", "empty", "(another node's: see its own dashboard)")], "");
    } else if (v.reminders === null) {
      list("d-reminders", [el("li", "empty", "(reminders are not used by this system)")], "");
    } else {
      list("d-reminders", v.reminders.map(function (r) {
        return el("li", "", r.name + " · next due " + clock(r.due));
      }), "none");
    }
    var dl = $("d-delivery");
    if (v.delivery) {
      var p = v.delivery;
      dl.replaceChildren(el("h3", "", "Reliable delivery"),
        el("div", "num", "producer " + p.producer_id + " → " + p.type_name + " · " + fmt(p.unconfirmed) +
          " unconfirmed to " + fmt(p.entities_pending) + " entities · window " + p.window));
    } else {
      dl.replaceChildren();
    }
  }

  function renderDelivery(producers) {
    $("delivery").hidden = !producers.length;
    var body = $("producers").tBodies[0];
    body.replaceChildren.apply(body, producers.map(function (p) {
      var tr = el("tr");
      tr.dataset.producer = p.producer_id;
      tr.appendChild(el("td", "path", p.producer_id + (p.durable ? " (durable)" : "")));
      tr.appendChild(el("td", "", p.type_name));
      tr.appendChild(el("td", "num unconfirmed", fmt(p.unconfirmed) + (p.waiting ? " + " + fmt(p.waiting) + " waiting" : "")));
      tr.appendChild(el("td", "num", p.top.map(function (e) { return e.entity_id + " " + e.unconfirmed; }).join(", ") ||
        "none"));
      tr.appendChild(el("td", "num", fmt(p.sent) + " / " + fmt(p.resent)));
      return tr;
    }));
  }

  function renderReminders(r) {
    $("reminders").hidden = !r;
    if (!r) return;
    $("reminders-note").textContent = "(fired by this node" + (r.as_of ? ", read " + clock(r.as_of) : ", reading…") +
      (r.count >= r.limit ? "; the first " + r.limit + " by due time" : "") + (r.error ? "; store error: " + r.error : "") + ")";
    var body = $("reminder-targets").tBodies[0];
    body.replaceChildren.apply(body, r.targets.map(function (t) {
      var tr = el("tr");
      tr.dataset.target = t.target;
      tr.appendChild(el("td", "path", t.target));
      var secs = Math.round(t.next_due - Date.now() / 1000);
      tr.appendChild(el("td", "num next-due", clock(t.next_due) + (secs >= 0 ? " (in " + secs + " s)" : " (due)")));
      tr.appendChild(el("td", "", t.names.map(function (x) { return x.name; }).join(", ")));
      return tr;
    }));
    $("reminders-empty").hidden = r.targets.length > 0;
  }

  $("d-close").addEventListener("click", function () { select(null); });

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
          if (isOpen) { open.delete(key); closed.add(key); } else { closed.delete(key); open.add(key); }
          saveOpen();
          refreshNow();
        });
      }
      row.appendChild(toggle);
      var nameEl = el("span", "name", n.path === "/" ? "/" : n.name);
      // A click opens the drill-down (another node's actor is asked of that node).
      nameEl.classList.add("link");
      nameEl.title = "details of " + key;
      nameEl.addEventListener("click", function () { select(key); });
      if (key === selected) row.classList.add("selected");
      row.appendChild(nameEl);
      var cls = el("span", "cls", n.label || n.actor);
      cls.title = n.actor;
      row.appendChild(cls);
      row.appendChild(el("span", "badge " + n.state, n.state));
      var mb = el("span", "num mailbox", "mailbox " + n.mailbox);
      var rs = el("span", "num restarts", "restarts " + n.restarts);
      row.appendChild(mb);
      row.appendChild(rs);
      if (n.persistence) {
        // A persistent actor: its persistence id, how far its journal (or its durable
        // state's revision) goes, and the fencing token its writes carry.
        var ps = n.persistence;
        var num = ps.sequence_nr !== undefined ? "seq " + fmt(ps.sequence_nr) : "rev " + fmt(ps.revision);
        var txt = "persistence " + (ps.id === null ? "(starting)" : ps.id) + " · " + num +
          (ps.fencing_token !== undefined ? " · fence " + ps.fencing_token : "");
        row.appendChild(el("span", "num persistence", txt));
      }
      if (n.children && !isOpen) {
        row.appendChild(el("span", "num", n.children + " children"));
        var below = n.subtree || { restarts: 0, mailbox: 0 };
        if (below.restarts || below.mailbox) {
          // What the collapsed subtree hides: its restarts and queued messages.
          row.appendChild(el("span", "num subtree" + (below.restarts ? " below" : ""),
            "below: restarts " + fmt(below.restarts) + " · queued " + fmt(below.mailbox)));
        }
      }
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

  function nodeSuffix(entry, cluster) {
    return cluster && entry.node ? " @" + shortNode(entry.node) : "";
  }

  // Failures grouped by actor, exception and directive: how many, the latest first.
  function renderFailures(groups, cluster) {
    var body = $("failures").tBodies[0];
    var rows = groups.slice(0, 20).map(function (f) {
      var tr = el("tr");
      tr.appendChild(el("td", "", clock(f.last)));
      tr.appendChild(el("td", "path", f.path + nodeSuffix(f, cluster)));
      tr.appendChild(el("td", "directive-" + f.directive, f.directive));
      tr.appendChild(el("td", "", (f.exception ? f.exception + ": " : "") + f.message));
      tr.appendChild(el("td", "num count", "×" + fmt(f.count)));
      return tr;
    });
    body.replaceChildren.apply(body, rows);
    $("failures-empty").hidden = groups.length > 0;
  }

  // Hub blocks grouped by actor.
  function renderBlocks(groups, cluster) {
    var items = groups.slice(0, 10).map(function (b) {
      var li = el("li");
      li.appendChild(el("span", "", clock(b.last) + " "));
      li.appendChild(el("span", "name", (b.path || "(no actor: code outside the actors)") + nodeSuffix(b, cluster)));
      li.appendChild(el("span", "", " blocked the hub ×" + fmt(b.count) + ", " + b.seconds.toFixed(3) +
        " s in all (longest " + b.max_seconds.toFixed(3) + " s)"));
      if (b.stack) {
        var d = el("details");
        d.appendChild(el("summary", "", "last stack"));
        d.appendChild(el("pre", "", b.stack));
        li.appendChild(d);
      }
      return li;
    });
    $("blocks").replaceChildren.apply($("blocks"), items);
    $("blocks-empty").hidden = groups.length > 0;
  }

  function renderHot(hot, cluster) {
    function list(id, entries, key) {
      var items = entries.map(function (e) {
        var li = el("li");
        li.appendChild(el("span", "name", e.path + nodeSuffix(e, cluster)));
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

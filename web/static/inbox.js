// The approvals inbox's keys and selection (views/approvals.templ).
// j/k move and open, a approves, r rejects (focuses the reason), x selects
// for a bulk action, ? lists the keys. After every action the server opens
// the next packet and this script puts the focus back on its row, so the
// keyboard never loses its place. Without this script every row is a link
// and every action a form.
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#inbox [data-testid=packet]")); }
  function rowOf(el) { return el && el.closest ? el.closest("#inbox [data-testid=packet]") : null; }
  function linkOf(row) { return row ? $("[data-testid=packet-link]", row) : null; }
  function selectedRow() { return $("#inbox [data-testid=packet].selected"); }
  function detail() { return document.getElementById("detail"); }
  function checkedRows() {
    return rows().filter(function (r) { var b = $("[data-testid=packet-check]", r); return b && b.checked; });
  }
  function say(text) {
    var s = document.getElementById("inbox-status");
    if (s) s.textContent = text;
  }
  function focusRow(row) {
    var link = linkOf(row);
    if (link) link.focus();
  }
  function markSelected(row) {
    rows().forEach(function (r) {
      var on = r === row, link = linkOf(r);
      r.classList.toggle("selected", on);
      if (on) link.setAttribute("aria-current", "true"); else link.removeAttribute("aria-current");
    });
  }

  // pendingKey is an action asked for before the selected packet's detail
  // arrived; it runs once the detail is the selected packet's.
  var pendingKey = null;

  function select(row) {
    if (!row) return;
    markSelected(row);
    focusRow(row);
    var d = detail();
    if (d && d.dataset.id === row.dataset.id) return;
    linkOf(row).click(); // htmx loads the detail and pushes the URL
  }

  // detailReady says whether the open detail is the selected row's, and
  // settled: htmx has wired its forms.
  function detailReady(row) {
    var d = detail();
    return !!(row && d && d.dataset.id === row.dataset.id && !d.closest(".htmx-added, .htmx-settling"));
  }

  function approve() {
    var checked = checkedRows();
    if (checked.length > 0) {
      $("[data-testid=bulk-approve]").click();
      return;
    }
    var row = selectedRow();
    if (!row) return;
    if (row.dataset.status !== "pending") { say("This packet is not waiting for a decision."); return; }
    if (!detailReady(row)) { pendingKey = "a"; return; }
    // The button itself: a call that cannot be undone asks for the second
    // confirmation (data-irreversible) exactly as a click does.
    var btn = $("[data-testid=approve]", detail());
    if (btn) btn.click();
  }

  function reject() {
    if (checkedRows().length > 0) {
      var bulk = document.getElementById("bulk-reason");
      if (bulk) bulk.focus();
      return;
    }
    var row = selectedRow();
    if (!row) return;
    if (row.dataset.status !== "pending") { say("This packet is not waiting for a decision."); return; }
    if (!detailReady(row)) { pendingKey = "r"; return; }
    var input = document.getElementById("reject-reason");
    if (input) { input.focus(); input.scrollIntoView({ block: "nearest" }); }
  }

  function toggleCheck(row) {
    var box = row && $("[data-testid=packet-check]", row);
    if (!box) return;
    box.checked = !box.checked;
    bulkState();
  }

  // bulkState keeps the bulk approve button honest: when a selected packet
  // cannot be undone, the button asks for the second confirmation too.
  function bulkState() {
    var btn = $("[data-testid=bulk-approve]");
    if (!btn) return;
    var checked = checkedRows(), hard = checked.filter(function (r) { return r.dataset.irreversible; });
    btn.textContent = checked.length > 0 ? "Approve " + checked.length + " selected" : "Approve selected";
    var reject = $("[data-testid=bulk-reject]");
    if (reject) reject.textContent = checked.length > 0 ? "Reject " + checked.length + " selected" : "Reject selected";
    if (hard.length > 0) {
      btn.dataset.irreversible = hard.length + " of the selected cannot be undone: " +
        hard.map(function (r) { return r.dataset.irreversible; }).join(" ");
    } else {
      delete btn.dataset.irreversible;
    }
  }

  function openKeys() {
    var dlg = document.getElementById("inbox-keys");
    if (dlg && !dlg.open) dlg.showModal();
  }

  document.addEventListener("keydown", function (evt) {
    if (!document.getElementById("inbox")) return;
    if (evt.ctrlKey || evt.metaKey || evt.altKey || evt.defaultPrevented) return;
    if (document.querySelector("dialog[open]")) return; // a dialog has the keys (Esc closes it)
    var t = evt.target, tag = (t.tagName || "").toLowerCase();
    var typing = (tag === "input" && !/^(checkbox|radio|button|submit)$/.test(t.type)) || tag === "textarea" || tag === "select" || t.isContentEditable;
    if (typing) {
      if (evt.key === "Escape") { focusRow(selectedRow()); evt.preventDefault(); }
      return;
    }
    var list = rows(), row = rowOf(document.activeElement) || selectedRow(), i = list.indexOf(row);
    switch (evt.key) {
      case "j": select(i < 0 ? list[0] : list[Math.min(i + 1, list.length - 1)]); break;
      case "k": select(i < 0 ? list[0] : list[Math.max(i - 1, 0)]); break;
      case "x": toggleCheck(row); break;
      case "a": approve(); break;
      case "r": rDown = true; break; // reject() on keyup, so the keystroke is never typed into the reason
      case "?": openKeys(); break;
      default: return;
    }
    evt.preventDefault();
  });

  var rDown = false;
  document.addEventListener("keyup", function (evt) {
    if (evt.key !== "r" || !rDown) return;
    rDown = false;
    reject();
  });

  document.addEventListener("click", function (evt) {
    var t = evt.target;
    if (t.closest && t.closest("[data-inbox-keys]")) { openKeys(); return; }
    var link = t.closest && t.closest("#inbox [data-testid=packet-link]");
    if (link) markSelected(rowOf(link));
  });

  document.addEventListener("change", function (evt) {
    if (evt.target.matches && evt.target.matches("[data-testid=packet-check]")) bulkState();
  });

  // Which packet to open after an action: the one after the acted-on
  // packet (or the selection), skipping those a bulk action resolves.
  function nextAfter(row) {
    var list = rows(), i = list.indexOf(row), skip = checkedRows();
    var rest = list.filter(function (r) { return r !== row && skip.indexOf(r) < 0; });
    for (var j = i + 1; j < list.length; j++) if (rest.indexOf(list[j]) >= 0) return list[j];
    for (var k = i - 1; k >= 0; k--) if (rest.indexOf(list[k]) >= 0) return list[k];
    return null;
  }

  // Requests from the inbox: actions say which packet to open next; a live
  // refresh keeps the selection.
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.closest || !elt.closest(".inbox")) return;
    if (evt.detail.verb === "post") {
      var acted = elt.closest("#detail") ? rows().filter(function (r) { return r.dataset.id === detail().dataset.id; })[0] : selectedRow();
      var next = nextAfter(acted || selectedRow());
      if (next) evt.detail.headers["X-Inbox-Next"] = next.dataset.id;
    } else if (elt.id === "inbox-list") {
      var d = detail();
      if (d && d.dataset.id) evt.detail.parameters.selected = d.dataset.id;
    }
  });

  // An inbox answer with an error (a stale packet: 409, 410; not allowed:
  // 403) carries the inbox with the message next to the control: swap it
  // instead of blanking anything. Other failures stay with app.js's flash.
  // Whether a request is the inbox's is known when it starts: by the time
  // it answers, a live refresh may have replaced the element that sent it.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (elt && elt.closest && elt.closest(".inbox") && evt.detail.xhr) evt.detail.xhr.inboxRequest = true;
  });

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var cfg = evt.detail.requestConfig || {}, elt = cfg.elt, xhr = evt.detail.xhr;
    if (!xhr || !xhr.inboxRequest) return;
    if (xhr.status >= 400 && xhr.status < 500 && /id="(inbox|detail)"/.test(xhr.responseText)) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
    if (!evt.detail.shouldSwap) return;
    // Focus survives swaps: a row keeps it (by packet), another control by
    // its id.
    var a = document.activeElement, row = rowOf(a);
    xhr.inboxSwap = {
      verb: cfg.verb, status: xhr.status, target: evt.detail.target ? evt.detail.target.id : "",
      list: !!elt && elt.id === "inbox-list", row: row ? row.dataset.id : null, id: a && a !== document.body ? a.id : null
    };
  });

  function rowWithID(id) { return rows().filter(function (r) { return r.dataset.id === id; })[0]; }

  document.addEventListener("htmx:afterSettle", function (evt) {
    var xhr = evt.detail.xhr, p = xhr && xhr.inboxSwap;
    if (!p || !document.getElementById("inbox")) return;
    xhr.inboxSwap = null; // once per answer, whatever else it settled
    bulkState();
    if (p.target === "detail") {
      if (pendingKey && detailReady(selectedRow())) {
        var key = pendingKey;
        pendingKey = null;
        if (key === "a") approve(); else reject();
      }
      return;
    }
    if (p.status >= 400) {
      // The control next to the error takes the focus.
      var err = ["bulk-error", "approve-error", "reject-error"].map(function (id) { return document.getElementById(id); })
        .filter(function (e) { return e && !e.hidden; })[0];
      var control = err && { "bulk-error": "#bulk-reason", "approve-error": "[data-testid=approve]", "reject-error": "#reject-reason" }[err.id];
      if (control && $(control)) { $(control).focus(); return; }
    }
    if (p.verb === "post") {
      // After an action the next packet is open: its row has the focus.
      var next = selectedRow() || rows()[0];
      if (next) focusRow(next);
      else { var h = $(".inbox h1"); if (h) { h.tabIndex = -1; h.focus(); } }
      return;
    }
    // Only focus the swap took away is given back: a person who moved on
    // meanwhile (into the reason, while a live refresh was settling) keeps
    // where they are.
    var a = document.activeElement;
    var lost = !a || a === document.body || !document.contains(a);
    if (!lost) { /* kept */ }
    else if (p.row) focusRow(rowWithID(p.row) || selectedRow() || rows()[0]);
    else if (p.id && document.getElementById(p.id)) document.getElementById(p.id).focus();
    else focusRow(selectedRow() || rows()[0]);
    // A live refresh: when the open packet changed elsewhere (resolved, a
    // vote), its detail is loaded again.
    if (p.list) refreshDetail();
  });

  function refreshDetail() {
    var d = detail();
    if (!d) return;
    var id = d.dataset.id;
    if (!id) {
      // Nothing was open: the packet the list now selects opens.
      var sel = selectedRow();
      if (!sel) return;
      id = sel.dataset.id;
    } else {
      var row = rowWithID(id);
      if (row && row.dataset.state === d.dataset.state) return;
    }
    var q = document.getElementById("inbox").dataset.query || "";
    htmx.ajax("GET", "/admin/approvals/" + id + (q ? "?" + q : ""), { source: d, target: "#detail", select: "#detail", swap: "outerHTML" });
  }

  // Countdowns: "expires in 2 h 5 min", kept current.
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.dataset.countdown) - now) / 1000);
      if (isNaN(left)) return;
      if (left <= 0) { el.textContent = "expired"; el.classList.add("expired"); return; }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = "expires in " + (h > 0 ? h + " h " + m + " min" : m > 0 ? m + " min" : s + " s");
    });
  }
  setInterval(tick, 15000);
  document.addEventListener("htmx:afterSettle", tick);
  document.addEventListener("DOMContentLoaded", function () { tick(); bulkState(); });
})();

// Gatehouse's small amount of page script. No inline scripts: the
// Content-Security-Policy allows only same-origin files.
(function () {
  "use strict";

  // Show the text of a failed htmx request in the flash area, so an error
  // never disappears silently.
  document.addEventListener("htmx:responseError", function (evt) {
    var flash = document.getElementById("flash");
    if (!flash) return;
    var xhr = evt.detail.xhr;
    var text = "Request failed (" + xhr.status + ").";
    try {
      var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
      var msg = doc.querySelector("[role=alert]") || doc.querySelector("main p");
      if (msg && msg.textContent.trim()) text = msg.textContent.trim();
    } catch (e) { /* keep the generic text */ }
    flash.textContent = text;
    flash.hidden = false;
  });

  document.addEventListener("htmx:sendError", function () {
    var flash = document.getElementById("flash");
    if (!flash) return;
    flash.textContent = "The server could not be reached. Check your connection and try again.";
    flash.hidden = false;
  });

  // A successful request clears an old error.
  document.addEventListener("htmx:afterRequest", function (evt) {
    if (!evt.detail.successful) return;
    var flash = document.getElementById("flash");
    if (flash) { flash.hidden = true; flash.textContent = ""; }
  });

  // Countdowns to expiry ([data-expires] holds an RFC 3339 time).
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.dataset.expires) - now) / 1000);
      if (isNaN(left)) return;
      if (left <= 0) { el.textContent = "expired"; el.classList.add("expired"); return; }
      var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      el.textContent = h > 0 ? h + " h " + m + " min" : m > 0 ? m + " min " + s + " s" : s + " s";
    });
  }
  setInterval(tick, 1000);
  document.addEventListener("htmx:afterSettle", tick);

  // Keyboard triage in the approvals queue: j/k move, a approve, r reject
  // (type the reason, Enter), x select for a bulk action.
  function packets() { return Array.prototype.slice.call(document.querySelectorAll("[data-testid=packet]")); }
  function current() {
    var list = packets(), el = document.activeElement;
    while (el && el !== document.body && !(el.dataset && el.dataset.testid === "packet")) el = el.parentElement;
    return list.indexOf(el) >= 0 ? el : null;
  }
  function focusAt(i) {
    var list = packets();
    if (list.length === 0) return;
    list[Math.max(0, Math.min(i, list.length - 1))].focus();
  }
  document.addEventListener("keydown", function (evt) {
    if (!document.querySelector("[data-testid=queue]")) return;
    if (evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var tag = (evt.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select") {
      if (evt.key === "Escape") { evt.target.blur(); }
      return;
    }
    var row = current(), list = packets(), i = row ? list.indexOf(row) : -1;
    switch (evt.key) {
      case "j": focusAt(i + 1); break;
      case "k": focusAt(i < 0 ? 0 : i - 1); break;
      case "x": if (row) { var box = row.querySelector("input[type=checkbox]"); box.checked = !box.checked; } break;
      case "a":
        if (!row || row.dataset.status !== "pending") return;
        htmx.ajax("POST", "/admin/approvals/" + row.dataset.id + "/approve", { target: "#queue", select: "#queue", swap: "outerHTML" })
          .then(function () { focusAt(i); });
        break;
      case "r": break; // opens on keyup, so the keystroke is not typed into the reason
      default: return;
    }
    evt.preventDefault();
  });
  document.addEventListener("keyup", function (evt) {
    if (evt.key !== "r" || evt.ctrlKey || evt.metaKey || evt.altKey) return;
    var tag = (evt.target.tagName || "").toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select") return;
    var row = current();
    if (!row || row.dataset.status !== "pending") return;
    var form = row.querySelector(".row-reject");
    form.hidden = false;
    form.querySelector("input").focus();
  });
  // A bulk action tells which packets could not be resolved.
  document.addEventListener("bulk-failed", function (evt) {
    var flash = document.getElementById("flash");
    if (!flash) return;
    flash.textContent = evt.detail.value;
    flash.hidden = false;
  });
})();

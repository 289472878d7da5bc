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

  // Countdowns to expiry ([data-countdown]) are the inbox's: inbox.js.

  // Keyboard triage of the approvals inbox lives in inbox.js.

  // Times: <time datetime data-relative> (views.RelTime) reads "3 min ago",
  // with the absolute time in the viewer's time zone on hover.
  var absolute = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  function relative(ms) {
    var s = Math.round((Date.now() - ms) / 1000), future = s < 0, a = Math.abs(s), text;
    if (a < 45) return future ? "in a moment" : "just now";
    if (a < 3600) text = Math.round(a / 60) + " min";
    else if (a < 86400) text = Math.round(a / 3600) + " h";
    else if (a < 86400 * 30) { var d = Math.round(a / 86400); text = d + (d === 1 ? " day" : " days"); }
    else return absolute.format(new Date(ms));
    return future ? "in " + text : text + " ago";
  }
  function renderTimes(root) {
    (root || document).querySelectorAll("time[data-relative]").forEach(function (el) {
      var ms = Date.parse(el.getAttribute("datetime"));
      if (isNaN(ms)) return;
      el.textContent = relative(ms);
      el.title = absolute.format(new Date(ms));
    });
  }
  document.addEventListener("DOMContentLoaded", function () { renderTimes(); });
  // After any swap (an outerHTML swap replaces the element htmx reports).
  document.addEventListener("htmx:afterSettle", function () { renderTimes(); });
  setInterval(renderTimes, 30000);

  // A second, explicit confirmation for what cannot be undone. A form, or
  // a submit button or htmx control, carrying data-irreversible="<what
  // cannot be undone>" opens a dialog that says it; only its confirm
  // button goes ahead, adding irreversible_ack=1 to the request (a hidden
  // field in a form, a parameter for an htmx control). Cancel, Esc or a
  // click outside leave everything as it was.
  var dialog, dialogText, dialogConfirm, pending = null, returnFocus = null;
  function ensureDialog() {
    if (dialog) return dialog;
    dialog = document.createElement("dialog");
    dialog.id = "irreversible-dialog";
    dialog.className = "confirm-dialog";
    dialog.setAttribute("aria-labelledby", "irreversible-title");
    dialog.setAttribute("aria-describedby", "irreversible-text");
    dialog.setAttribute("data-testid", "irreversible-dialog");
    dialog.innerHTML = '<h2 id="irreversible-title">This cannot be undone</h2>' +
      '<p id="irreversible-text"></p>' +
      '<div class="dialog-actions">' +
      '<button type="button" data-testid="irreversible-cancel" value="cancel">Cancel</button>' +
      '<button type="button" class="danger-solid" data-testid="irreversible-confirm" value="confirm">Confirm</button>' +
      "</div>";
    document.body.appendChild(dialog);
    dialogText = dialog.querySelector("#irreversible-text");
    dialogConfirm = dialog.querySelector("[value=confirm]");
    // Each answer settles the question it answers at once. (The dialog's
    // "close" event comes a task later: acting on it let a Cancel settle
    // the next question, asked meanwhile, and left that one's Confirm
    // doing nothing.)
    dialog.querySelector("[value=cancel]").addEventListener("click", function () { answer(false); });
    dialogConfirm.addEventListener("click", function () { answer(true); });
    dialog.addEventListener("click", function (evt) { if (evt.target === dialog) answer(false); });
    dialog.addEventListener("cancel", function (evt) { evt.preventDefault(); answer(false); }); // Esc
    // Tab stays inside the dialog (showModal makes the page inert; this
    // keeps focus off the browser chrome as well).
    dialog.addEventListener("keydown", function (evt) {
      if (evt.key !== "Tab") return;
      var items = dialog.querySelectorAll("button"), first = items[0], last = items[items.length - 1];
      if (evt.shiftKey && document.activeElement === first) { last.focus(); evt.preventDefault(); }
      else if (!evt.shiftKey && document.activeElement === last) { first.focus(); evt.preventDefault(); }
    });
    // Closed some other way while a question waits: that is no.
    dialog.addEventListener("close", function () { if (!dialog.open && pending) answer(false); });
    return dialog;
  }
  function answer(ok) {
    var go = pending;
    pending = null;
    if (dialog.open) dialog.close(ok ? "confirm" : "cancel");
    if (returnFocus && document.contains(returnFocus)) returnFocus.focus();
    returnFocus = null;
    if (go) go(ok);
  }
  function askIrreversible(el, note, then) {
    ensureDialog();
    dialogText.textContent = note;
    dialogConfirm.textContent = el.getAttribute("data-confirm-label") || "Yes, go ahead";
    pending = then;
    returnFocus = document.activeElement;
    dialog.showModal();
    dialog.querySelector("[value=cancel]").focus(); // the safe choice first
  }
  // The marked element: the submitter, the control itself, or a hidden
  // input[data-irreversible] inside a form (set by what the form will run,
  // e.g. the tool picked in a notebook's "add a cell").
  function irreversibleOf(elt, submitter) {
    if (submitter && submitter.hasAttribute("data-irreversible")) return submitter;
    if (elt && elt.hasAttribute && elt.hasAttribute("data-irreversible")) return elt;
    if (elt && elt.tagName === "FORM") return elt.querySelector("input[type=hidden][data-irreversible]");
    return null;
  }
  function addAck(form) {
    if (!form || form.querySelector("input[name=irreversible_ack]")) return;
    var ack = document.createElement("input");
    ack.type = "hidden"; ack.name = "irreversible_ack"; ack.value = "1";
    form.appendChild(ack);
  }
  // htmx controls: hold the request until the dialog answers.
  document.addEventListener("htmx:confirm", function (evt) {
    var trig = evt.detail.triggeringEvent, submitter = trig && trig.submitter;
    var marked = irreversibleOf(evt.detail.elt, submitter);
    if (!marked) return;
    evt.preventDefault();
    askIrreversible(marked, marked.getAttribute("data-irreversible"), function (ok) {
      if (!ok) return;
      var form = evt.detail.elt.tagName === "FORM" ? evt.detail.elt : evt.detail.elt.form;
      if (form) addAck(form);
      evt.detail.elt.setAttribute("data-irreversible-ack", "1");
      evt.detail.issueRequest(true);
    });
  });
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt.hasAttribute || !elt.hasAttribute("data-irreversible-ack")) return;
    elt.removeAttribute("data-irreversible-ack");
    evt.detail.parameters["irreversible_ack"] = "1";
  });
  // Plain forms (no htmx attribute on them).
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    if (form.hasAttribute("hx-post") || form.hasAttribute("data-hx-post")) return;
    var marked = irreversibleOf(form, evt.submitter);
    if (!marked || form.querySelector("input[name=irreversible_ack]")) return;
    evt.preventDefault();
    var submitter = evt.submitter;
    askIrreversible(marked, marked.getAttribute("data-irreversible"), function (ok) {
      if (!ok) return;
      addAck(form);
      if (form.requestSubmit) form.requestSubmit(submitter && submitter.form === form ? submitter : undefined);
      else form.submit();
    });
  }, true);
})();

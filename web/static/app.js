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
})();

// Dashboard behaviour on top of htmx. No inline script anywhere: this file is all there is.
//
// Polling: elements marked data-poll refresh themselves with hx-trigger="every Ns, poll-now".
// While the tab is hidden their requests are cancelled (no load from background tabs); when it
// becomes visible again they refresh at once instead of waiting for the next tick.
(function () {
  "use strict";

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (document.hidden && elt && elt.hasAttribute && elt.hasAttribute("data-poll")) {
      event.preventDefault();
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) {
      return;
    }
    document.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "poll-now");
    });
  });
})();

// Dashboard behaviour on top of htmx. No inline script anywhere: this file is all there is.
//
// Polling: elements marked data-poll refresh themselves with hx-trigger="every Ns, poll-now".
// While the tab is hidden their requests are cancelled (no load from background tabs); when it
// becomes visible again they refresh at once instead of waiting for the next tick.
(function () {
  "use strict";

  // Live updates keep the operator's place: a poll is skipped while updates are paused (the
  // "Pause live updates" button), and while focus or a text selection is inside the element it
  // would replace; the job page polls only its small header (#job-live) and appends events.
  var root = document.documentElement;

  function holdsPlace(elt) {
    var active = document.activeElement;
    if (active && active !== document.body && elt.contains(active) && !active.hasAttribute("data-live-toggle")) {
      return true;
    }
    var selection = window.getSelection && window.getSelection();
    return !!(selection && !selection.isCollapsed && selection.anchorNode && elt.contains(selection.anchorNode));
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-poll")) {
      return;
    }
    if (document.hidden || root.hasAttribute("data-paused") || holdsPlace(elt)) {
      event.preventDefault();
    }
  });

  function showLiveControls(scope) {
    (scope.querySelectorAll ? scope : document).querySelectorAll("[data-js-only]").forEach(function (elt) {
      elt.hidden = false;
    });
    document.querySelectorAll("[data-live-toggle]").forEach(function (button) {
      var paused = root.hasAttribute("data-paused");
      button.setAttribute("aria-pressed", paused ? "true" : "false");
      button.textContent = paused ? "Resume live updates" : "Pause live updates";
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-live-toggle]");
    if (!button) {
      return;
    }
    if (root.hasAttribute("data-paused")) {
      root.removeAttribute("data-paused");
    } else {
      root.setAttribute("data-paused", "");
    }
    showLiveControls(document);
  });

  document.addEventListener("DOMContentLoaded", function () { showLiveControls(document); });
  document.addEventListener("htmx:afterSettle", function () { showLiveControls(document); });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) {
      return;
    }
    document.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "poll-now");
    });
  });
})();

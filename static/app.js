// Dashboard behaviour on top of htmx. No inline script anywhere: this file is all there is.
//
// Polling: elements marked data-poll refresh themselves with hx-trigger="every Ns, poll-now".
// While the tab is hidden their requests are cancelled (no load from background tabs); when it
// becomes visible again they refresh at once instead of waiting for the next tick.
(function () {
  "use strict";

  // Live updates keep the operator's place: polled parts swap by morphing (the vendored
  // idiomorph extension, hx-swap="morph"), which changes only the nodes that differ, so focus
  // and a text selection in unchanged parts survive a refresh. A poll is skipped while the tab
  // is hidden or while updates are paused (the "Pause live updates" button).
  var root = document.documentElement;

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-poll")) {
      return;
    }
    if (document.hidden || root.hasAttribute("data-paused")) {
      event.preventDefault();
    }
  });

  // A refused form: focus its first invalid field (the page also marks it autofocus, for
  // browsers without JavaScript; htmx-swapped forms need this).
  function focusFirstInvalid(scope) {
    var field = scope && scope.querySelector && scope.querySelector("[aria-invalid=true]");
    if (field && document.activeElement !== field) {
      field.focus();
    }
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.tagName === "FORM") {
      focusFirstInvalid(target);
    }
  });

  function showLiveControls() {
    document.querySelectorAll("[data-js-only]").forEach(function (elt) {
      elt.hidden = false;
    });
    document.querySelectorAll("[data-live-toggle]").forEach(function (button) {
      var paused = root.hasAttribute("data-paused");
      button.setAttribute("aria-pressed", paused ? "true" : "false");
      button.textContent = paused ? "Resume live updates" : "Pause live updates";
    });
  }

  // A form marked data-confirm (a single job's Cancel) asks before it posts; without
  // JavaScript it posts at once, as any form does.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

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
    showLiveControls();
  });

  document.addEventListener("DOMContentLoaded", function () {
    showLiveControls();
    focusFirstInvalid(document.querySelector("form"));
  });
  document.addEventListener("htmx:afterSettle", function () { showLiveControls(); });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx) {
      return;
    }
    document.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "poll-now");
    });
  });
})();

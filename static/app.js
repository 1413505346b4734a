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
  // is hidden or while updates are paused. The pause control sits outside every polled part
  // (no refresh replaces it), and the choice is kept in localStorage: it holds on every page
  // and after a reload until the operator resumes, in every tab of the dashboard.
  var root = document.documentElement;
  var PAUSED_KEY = "jobqueue.live-paused";

  function storedPause() {
    try {
      return window.localStorage.getItem(PAUSED_KEY) === "1";
    } catch (error) {
      return false; // storage refused (private mode): the pause lasts for this page only
    }
  }

  function storePause(paused) {
    try {
      if (paused) {
        window.localStorage.setItem(PAUSED_KEY, "1");
      } else {
        window.localStorage.removeItem(PAUSED_KEY);
      }
    } catch (error) {
      // the page keeps its own state
    }
  }

  function setPaused(paused) {
    if (paused) {
      root.setAttribute("data-paused", "");
    } else {
      root.removeAttribute("data-paused");
    }
    showLiveControls();
  }

  if (storedPause()) {
    root.setAttribute("data-paused", "");
  }

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

  // A block that scrolls (a long error, a JSON value, a wide table) becomes a tab stop so the
  // keyboard can scroll it; one that fits stays out of the tab order. Checked on load, after
  // every swap and when the window changes size.
  function markScrollers(scope) {
    (scope || document).querySelectorAll("pre, .scroll").forEach(function (elt) {
      var scrolls = elt.scrollWidth > elt.clientWidth + 1 || elt.scrollHeight > elt.clientHeight + 1;
      if (scrolls && !elt.hasAttribute("tabindex")) {
        elt.setAttribute("tabindex", "0");
        elt.setAttribute("data-scroll-stop", "");
      } else if (!scrolls && elt.hasAttribute("data-scroll-stop") && document.activeElement !== elt) {
        elt.removeAttribute("tabindex");
        elt.removeAttribute("data-scroll-stop");
      }
    });
  }

  // The page title carries the no-worker banner's alarm (fragments/alarm.html).
  function updateTitle() {
    var banner = document.getElementById("worker-alarm");
    if (!banner) {
      return;
    }
    var base = root.getAttribute("data-base-title");
    if (base === null) {
      base = document.title.replace(/^⚠ [^·]* · /, "");
      root.setAttribute("data-base-title", base);
    }
    document.title = (banner.getAttribute("data-alarm-title") || "") + base;
  }

  // After an in-place action (the overview's Retry) replaced the part that had the focus, the
  // focus goes to the nearest heading that polls keep (morph keeps nodes by id), and the
  // notice is read out by the page's status region, so neither is lost to <body>.
  // A swap that replaced a focused control with an id gives the focus to the control that has
  // that id after it (the same control, re-rendered), before any heading.
  var focusHome = null;
  var focusedId = null;

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    var focused = document.activeElement;
    var inside = Boolean(target && focused && target.contains(focused));
    var anchor = target && target.closest && target.closest("[data-focus-home]");
    focusHome = anchor && inside ? anchor.getAttribute("data-focus-home") : null;
    focusedId = inside && focused.id ? focused.id : null;
  });

  function keepFocus() {
    var same = focusedId && document.getElementById(focusedId);
    var home = focusHome && document.getElementById(focusHome);
    focusHome = null;
    focusedId = null;
    if (document.activeElement && document.activeElement !== document.body) {
      return;
    }
    if (same) {
      same.focus();
    } else if (home) {
      home.focus();
    }
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.tagName === "FORM") {
      focusFirstInvalid(target);
    }
    var live = document.getElementById("live-announce");
    document.querySelectorAll("[data-announce]:not([data-announced])").forEach(function (notice) {
      notice.setAttribute("data-announced", "");
      if (live) {
        live.textContent = notice.textContent.trim();
      }
    });
  });

  function showLiveControls() {
    var paused = root.hasAttribute("data-paused");
    document.querySelectorAll("[data-js-only]").forEach(function (elt) {
      elt.hidden = false;
    });
    document.querySelectorAll("[data-live-toggle]").forEach(function (button) {
      button.setAttribute("aria-pressed", paused ? "true" : "false");
      button.textContent = paused ? "Resume live updates" : "Pause live updates";
    });
    document.querySelectorAll("[data-live-state]").forEach(function (state) {
      state.textContent = paused
        ? "Paused: this page does not refresh (on every page, until you resume)."
        : "Live: this page refreshes itself.";
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

  // A button marked data-keep-focus (the Queues page's Pause / Resume and Save limits, the
  // Schedules page's Pause / Resume and Run now) posts its form, and the answer redirects
  // back to the same page, which replaces the button: the keyboard's place would be lost to
  // <body>. Its id is stable across the answer (Pause and Resume of one queue share it), so it
  // is kept for this tab and focused again when the same page loads (within 30 s). A form htmx
  // submits in place (preventDefault) is covered by the swap handler above instead.
  var REFOCUS_KEY = "jobqueue.refocus";

  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    if (event.defaultPrevented || !button || !button.id || !button.hasAttribute("data-keep-focus")) {
      return;
    }
    try {
      window.sessionStorage.setItem(REFOCUS_KEY, JSON.stringify({
        id: button.id, path: window.location.pathname, at: Date.now()
      }));
    } catch (error) {
      // storage refused: the page loads with the focus at its start, as without JavaScript
    }
  });

  function refocusAfterPost() {
    var kept = null;
    try {
      kept = JSON.parse(window.sessionStorage.getItem(REFOCUS_KEY) || "null");
      window.sessionStorage.removeItem(REFOCUS_KEY);
    } catch (error) {
      return;
    }
    if (!kept || kept.path !== window.location.pathname || !(Date.now() - kept.at < 30000)) {
      return;
    }
    var control = document.getElementById(kept.id);
    function focusIfLost() {
      if (control.isConnected && (!document.activeElement || document.activeElement === document.body)) {
        control.focus();
      }
    }
    if (control) {
      focusIfLost();
      // An answer that redirects to a fragment (#schedule-…) has the browser move the focus to
      // the page's start when it scrolls there, after this: focus it again once that is done.
      window.addEventListener("load", function () { window.setTimeout(focusIfLost, 0); });
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-live-toggle]");
    if (!button) {
      return;
    }
    var paused = !root.hasAttribute("data-paused");
    storePause(paused);
    setPaused(paused);
    if (!paused && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (elt) {
        window.htmx.trigger(elt, "poll-now");
      });
    }
  });

  // Another tab paused or resumed: follow it.
  window.addEventListener("storage", function (event) {
    if (event.key === PAUSED_KEY) {
      setPaused(storedPause());
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    showLiveControls();
    focusFirstInvalid(document.querySelector("form"));
    refocusAfterPost();
    markScrollers(document);
    updateTitle();
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    showLiveControls();
    markScrollers(target && target.isConnected ? target : document);
    updateTitle();
    keepFocus();
  });
  window.addEventListener("resize", function () { markScrollers(document); });

  document.addEventListener("visibilitychange", function () {
    if (document.hidden || !window.htmx || root.hasAttribute("data-paused")) {
      return;
    }
    document.querySelectorAll("[data-poll]").forEach(function (elt) {
      window.htmx.trigger(elt, "poll-now");
    });
  });
})();

// Live updates (docs/ARCHITECTURE.md, "The web UI"): every few seconds,
// while the tab is visible, fetch this page's content with the header
// X-Seqbox-Live: 1 and swap in each element marked data-live="name" for
// its namesake. Without this script the pages work as they are: reload.
(function () {
  "use strict";
  var every = Number(document.body.dataset.refresh) * 1000;
  if (!(every > 0) || !document.querySelector("[data-live]") || !window.fetch || !window.DOMParser) {
    return;
  }
  var src = document.body.dataset.liveSrc || location.href;
  var status = document.getElementById("live-status");
  var maxDelay = 60000;
  var delay = every;
  var timer = 0;
  var inFlight = false;
  var touched = new WeakSet(); // forms the user typed in

  document.addEventListener("input", function (e) {
    if (e.target.form) touched.add(e.target.form);
  });

  // held: a region the user is in, which a swap would yank away.
  function held(el) {
    var a = document.activeElement;
    if (a && a !== document.body && el.contains(a)) return true;
    var sel = window.getSelection();
    if (sel && !sel.isCollapsed && el.contains(sel.anchorNode)) return true;
    var forms = el.querySelectorAll("form");
    for (var i = 0; i < forms.length; i++) {
      if (touched.has(forms[i])) return true;
    }
    return false;
  }

  function say(text) {
    if (status && status.textContent !== text) status.textContent = text;
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(poll, ms);
  }

  function apply(html) {
    var fresh = new Map();
    new DOMParser().parseFromString(html, "text/html").querySelectorAll("[data-live]").forEach(function (f) {
      fresh.set(f.getAttribute("data-live"), f);
    });
    // A page without them is not ours: a login page, a proxy's error.
    if (fresh.size === 0) throw new Error("unexpected response");
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var f = fresh.get(el.getAttribute("data-live"));
      if (f && !held(el)) el.replaceWith(document.adoptNode(f));
    });
  }

  function poll() {
    if (inFlight || document.visibilityState !== "visible") return;
    inFlight = true;
    var ctl = new AbortController();
    var giveUp = setTimeout(function () { ctl.abort(); }, Math.max(10000, 3 * every));
    fetch(src, { headers: { "X-Seqbox-Live": "1" }, credentials: "same-origin", cache: "no-store", signal: ctl.signal })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        if (r.redirected) throw new Error("redirected (signed out?)");
        return r.text();
      })
      .then(function (html) {
        apply(html);
        delay = every;
        say("");
      })
      .catch(function (err) {
        delay = Math.min(delay * 2, maxDelay);
        var why = err.name === "AbortError" ? "timed out" : err.message;
        say("live updates paused: " + why + "; retrying in " + Math.round(delay / 1000) + "s");
      })
      .finally(function () {
        clearTimeout(giveUp);
        inFlight = false;
        schedule(delay);
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") schedule(0);
  });
  schedule(every);
})();

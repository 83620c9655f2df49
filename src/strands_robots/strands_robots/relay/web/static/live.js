// Live updates without a reload: the server sends the re-rendered fragment of the element that names its event
// stream (data-events) whenever the job changes; this script only puts it in place. No other script runs here.
(function () {
  "use strict";
  function start() {
    var live = document.querySelector("[data-events]");
    if (!live || !window.EventSource) { return; }
    var note = document.getElementById("live-state");
    var source = new EventSource(live.getAttribute("data-events"));
    var updates = 0;
    source.addEventListener("update", function (event) {
      live.innerHTML = event.data;  // server-rendered and escaped, same origin
      updates += 1;
      live.setAttribute("data-updates", String(updates));
      if (note) { note.textContent = "Live: " + updates + " update(s) received."; }
    });
    source.addEventListener("end", function (event) {
      source.close();
      if (note) { note.textContent = event.data || "The job has ended: no more updates."; }
    });
    source.onerror = function () {
      if (note && source.readyState !== EventSource.CLOSED) { note.textContent = "Reconnecting..."; }
    };
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
}());

// The live view of a queue's charts: off by default; when on, fetch the charts' HTML
// fragment (one Redis script call) every few seconds and swap it in. Same origin only.
(function () {
  "use strict";
  var box = document.getElementById("ledger-live");
  var charts = document.getElementById("ledger-charts");
  if (!box || !charts) { return; }
  var timer = null;
  var every = parseInt(box.getAttribute("data-every") || "5000", 10);
  function refresh() {
    var url = new URL(window.location.href);
    url.searchParams.set("window", charts.getAttribute("data-window") || "hour");
    url.searchParams.set("fragment", "charts");
    fetch(url.toString(), {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("#ledger-charts");
        if (fresh) { charts.replaceWith(fresh); charts = fresh; }
      })
      .catch(function () { /* the next beat tries again */ });
  }
  box.addEventListener("change", function () {
    if (timer !== null) { window.clearInterval(timer); timer = null; }
    if (box.checked) { refresh(); timer = window.setInterval(refresh, every); }
  });
})();

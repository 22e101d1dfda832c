// A live view: off by default; when on, fetch an HTML fragment of the page every few
// seconds and swap it in. The checkbox names the block (data-target, default the queue's
// charts) and the fragment (data-fragment, default "charts"). Same origin only.
(function () {
  "use strict";
  var box = document.getElementById("ledger-live");
  var target = box && (box.getAttribute("data-target") || "ledger-charts");
  var fragment = box && (box.getAttribute("data-fragment") || "charts");
  var charts = box && document.getElementById(target);
  if (!box || !charts) { return; }
  var timer = null;
  var every = parseInt(box.getAttribute("data-every") || "5000", 10);
  function refresh() {
    var url = new URL(window.location.href);
    if (fragment === "charts") {
      url.searchParams.set("window", charts.getAttribute("data-window") || "hour");
    }
    url.searchParams.set("fragment", fragment);
    fetch(url.toString(), {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("#" + target);
        if (fresh) { charts.replaceWith(fresh); charts = fresh; }
      })
      .catch(function () { /* the next beat tries again */ });
  }
  box.addEventListener("change", function () {
    if (timer !== null) { window.clearInterval(timer); timer = null; }
    if (box.checked) { refresh(); timer = window.setInterval(refresh, every); }
  });
})();

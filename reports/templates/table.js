(function () {
  "use strict";
  document.documentElement.setAttribute("data-js", "ready");
  document.querySelectorAll("table.sortable th").forEach(function (th, idx) {
    th.addEventListener("click", function () {
      var tbody = th.closest("table").tBodies[0];
      var rows = Array.prototype.slice.call(tbody.rows);
      var asc = th.dataset.dir !== "asc";
      th.dataset.dir = asc ? "asc" : "desc";
      rows.sort(function (a, b) {
        var ca = a.cells[idx], cb = b.cells[idx];
        var x = (ca.dataset.sort || ca.textContent).trim(), y = (cb.dataset.sort || cb.textContent).trim();
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });
  document.querySelectorAll("input.filter").forEach(function (inp) {
    inp.addEventListener("input", function () {
      var q = inp.value.toLowerCase();
      var t = document.getElementById(inp.dataset.table);
      Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
        r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none";
      });
    });
  });
})();

// gpufeed's HTML report: draws each chart of the page's data with uPlot.
// Each chart's element says what was drawn (data-points, data-series,
// data-bands), for a reader's tools and the browser test; any script error
// is shown at the top of the page.
(function () {
  "use strict";
  var errors = document.getElementById("gpufeed-errors");
  function fail(msg) {
    var p = document.createElement("p");
    p.textContent = "chart error: " + msg;
    errors.appendChild(p);
  }
  window.addEventListener("error", function (e) { fail(e.message); });
  var data;
  try {
    data = JSON.parse(document.getElementById("gpufeed-data").textContent);
  } catch (e) {
    fail(e.message);
    return;
  }
  function shade(bands) {
    return function (u) {
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
      ctx.save();
      for (var i = 0; i < bands.length; i++) {
        var b = bands[i];
        var x0 = u.valToPos(b.from, "x", true), x1 = u.valToPos(b.to, "x", true);
        ctx.fillStyle = b.color;
        ctx.fillRect(x0, top, Math.max(1, x1 - x0), h);
      }
      ctx.restore();
    };
  }
  function fmt(unit) {
    return function (u, v) { return v == null ? "-" : v.toFixed(unit === "cores" ? 2 : 1) + " " + unit; };
  }
  var drawn = 0;
  data.charts.forEach(function (c) {
    var el = document.getElementById(c.id);
    if (!el) { fail("no element for " + c.id); return; }
    var scales = { x: { time: false } };
    var axes = [{ label: c.xlabel }];
    c.scales.forEach(function (s) {
      scales[s.key] = { auto: s.max == null, range: s.max == null ? function (u, lo, hi) { return [s.min, Math.max(hi, 1)]; } : [s.min, s.max] };
      axes.push({ scale: s.key, label: s.label, side: s.right ? 1 : 3, grid: { show: !s.right } });
    });
    var series = [{ label: c.xlabel }];
    var cols = [c.x];
    c.series.forEach(function (s) {
      series.push({ label: s.label, scale: s.scale, stroke: s.color, width: s.width, fill: s.fill || undefined, value: fmt(s.unit), spanGaps: false });
      cols.push(s.y);
    });
    var opts = {
      width: Math.max(600, el.clientWidth || 1000), height: 320,
      scales: scales, axes: axes, series: series,
      cursor: { drag: { x: true, y: false } },
      hooks: { drawClear: [shade(c.bands)] }
    };
    new uPlot(opts, cols, el);
    el.setAttribute("data-points", String(c.x.length));
    el.setAttribute("data-series", String(c.series.length));
    el.setAttribute("data-bands", String(c.bands.length));
    drawn++;
  });
  document.body.setAttribute("data-charts-drawn", String(drawn));
})();

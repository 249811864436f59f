// memrec's interactive timeline: one uPlot chart per GPU from the arrays in
// #memrec-timeline-data (times in µs since the run's start and values in
// KiB, each as a difference from the previous point). Charts are built as
// the page loads; window.memrecCharts holds them and <body> gets
// data-charts-ready="N" once they are drawn.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("memrec-timeline-data").textContent);
  var colours = { "device used": "#1f77b4", "driver reserved": "#7f7f7f", "allocated": "#2ca02c", "reserved": "#ff7f0e" };
  var charts = [];
  window.memrecCharts = charts;
  var syncing = false;

  function decode(s) {
    var n = s.dt_us.length, x = new Array(n), y = new Array(n), t = 0, v = 0;
    for (var i = 0; i < n; i++) {
      t += s.dt_us[i]; v += s.dv_kib[i];
      x[i] = t / 1e6; y[i] = v * 1024;
    }
    return [x, y];
  }

  function fmtTime(v) { return v == null ? "–" : "+" + v.toFixed(3) + " s"; }

  // Epochs shaded (every other one) under the series.
  function epochs(g) {
    return function (u) {
      var c = u.ctx, b = u.bbox;
      c.save();
      c.fillStyle = "rgba(120,120,200,0.12)";
      for (var i = 0; i < (g.epochs || []).length; i += 2) {
        var x0 = u.valToPos(g.epochs[i][0] / 1e6, "x", true), x1 = u.valToPos(g.epochs[i][1] / 1e6, "x", true);
        x0 = Math.max(x0, b.left); x1 = Math.min(x1, b.left + b.width);
        if (x1 > x0) c.fillRect(x0, b.top, x1 - x0, b.height);
      }
      c.restore();
    };
  }

  // Marks as dashed lines over the series, the GPU's total as a dashed line.
  function marks(g, unit) {
    return function (u) {
      var c = u.ctx, b = u.bbox;
      c.save();
      c.setLineDash([6, 4]);
      (g.marks || []).forEach(function (m) {
        var x = u.valToPos(m.t_us / 1e6, "x", true);
        if (x < b.left || x > b.left + b.width) return;
        c.strokeStyle = m.kind === "oom" ? "#d62728" : "rgba(148,103,189,0.8)";
        c.lineWidth = m.kind === "oom" ? 2 : 1;
        c.beginPath(); c.moveTo(x, b.top); c.lineTo(x, b.top + b.height); c.stroke();
      });
      if (g.total_bytes) {
        var y = u.valToPos(g.total_bytes / unit[0], "y", true);
        if (y >= b.top && y <= b.top + b.height) {
          c.strokeStyle = "#5a5a5a"; c.lineWidth = 1;
          c.beginPath(); c.moveTo(b.left, y); c.lineTo(b.left + b.width, y); c.stroke();
        }
      }
      c.restore();
    };
  }

  // Zooming one chart zooms the others.
  function syncX(u, key) {
    if (key !== "x" || syncing) return;
    syncing = true;
    charts.forEach(function (o) {
      if (o !== u) o.setScale("x", { min: u.scales.x.min, max: u.scales.x.max });
    });
    syncing = false;
  }

  data.gpus.forEach(function (g) {
    var el = document.getElementById("timeline-gpu" + g.gpu);
    if (!el || g.series.length === 0) return;
    var tables = [], top = 0;
    g.series.forEach(function (s) {
      var t = decode(s);
      for (var i = 0; i < t[1].length; i++) if (t[1][i] > top) top = t[1][i];
      tables.push(t);
    });
    var showTotal = g.total_bytes > 0 && top > 0.5 * g.total_bytes;
    var unit = Math.max(top, showTotal ? g.total_bytes : 0) >= 2 * Math.pow(2, 30) ? [Math.pow(2, 30), "GiB", 3] : [Math.pow(2, 20), "MiB", 1];
    var aligned = uPlot.join(tables);
    for (var k = 1; k < aligned.length; k++) {
      aligned[k] = aligned[k].map(function (v) { return v == null ? null : v / unit[0]; });
    }
    var series = [{ label: "time", value: function (u, v) { return fmtTime(v); } }];
    g.series.forEach(function (s) {
      series.push({
        label: s.name, stroke: colours[s.name] || "#9467bd", width: 1.3, spanGaps: true,
        value: function (u, v) { return v == null ? "–" : v.toFixed(unit[2]) + " " + unit[1]; }
      });
    });
    var yMax = Math.max(top, showTotal ? g.total_bytes : 0) / unit[0] * 1.05 || 1;
    var drawn = showTotal ? g : Object.assign({}, g, { total_bytes: 0 });
    var opts = {
      width: Math.max(400, el.clientWidth || 1200), height: 340,
      series: series,
      scales: { x: { time: false }, y: { range: function () { return [0, yMax]; } } },
      axes: [{ label: "seconds since start" }, { label: unit[1], size: 60 }],
      cursor: { drag: { x: true, y: false }, sync: { key: "memrec" } },
      hooks: { drawClear: [epochs(g)], draw: [marks(drawn, unit)], setScale: [syncX] }
    };
    charts.push(new uPlot(opts, aligned, el));
  });

  window.addEventListener("resize", function () {
    charts.forEach(function (u) { u.setSize({ width: Math.max(400, u.root.parentNode.clientWidth), height: 340 }); });
  });
  document.body.setAttribute("data-charts-ready", String(charts.length));
  window.memrecReadyMs = performance.now();
})();

// memrec's interactive timeline: one uPlot chart per GPU from the points in
// #memrec-timeline-data (times in µs since the run's start and values in
// KiB, each as a difference from the previous point, packed as
// report/pagepoints.go writes them). Charts are built as
// the page loads; window.memrecCharts holds them and <body> gets
// data-charts-ready="N" once they are drawn.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("memrec-timeline-data").textContent);
  var colours = { "device used": "#1f77b4", "driver reserved": "#7f7f7f", "allocated": "#2ca02c", "reserved": "#ff7f0e" };
  var charts = [], PAGE_BUCKETS = data.page_buckets || 800;
  window.memrecCharts = charts;
  var syncing = false;

  // unpack reads packed pairs: base64 of zigzag varints, two a pair
  // (arithmetic, not bit operations: times pass 2^31 µs).
  function unpack(p) {
    var b = atob(p || ""), n = b.length, i = 0, a = [], z = [];
    function varint() {
      var r = 0, m = 1, c;
      do { c = b.charCodeAt(i++); r += (c & 127) * m; m *= 128; } while (c & 128 && i < n);
      return r % 2 ? -(r + 1) / 2 : r / 2;
    }
    while (i < n) { a.push(varint()); z.push(varint()); }
    return [a, z];
  }

  // decode turns a level's differences into seconds and bytes.
  function decode(s) {
    var d = unpack(s.points), n = d[0].length, x = new Array(n), y = new Array(n), t = 0, v = 0;
    for (var i = 0; i < n; i++) {
      t += d[0][i]; v += d[1][i];
      x[i] = t / 1e6; y[i] = v * 1024;
    }
    return [x, y];
  }

  // The run's time unit (report.TimeUnitFor): x stays in seconds, the
  // axis and the hover are written in the unit, its ticks at 1, 2, 5 × 10^k
  // of it.
  var TU = data.time_unit || { name: "s", seconds: 1 };
  var TU_LABEL = { s: "seconds", min: "minutes", h: "hours" }[TU.name] + " since start";
  var tuIncrs = [];
  for (var k = -3; k < 7; k++) [1, 2, 5].forEach(function (m) { tuIncrs.push(m * Math.pow(10, k) * TU.seconds); });
  function fmtUnit(v) { var x = v / TU.seconds; return +x.toPrecision(6) + ""; }
  function fmtTime(v) { return v == null ? "–" : "+" + (TU.seconds === 1 ? v.toFixed(3) : (v / TU.seconds).toFixed(3)) + " " + TU.name; }

  // The epoch sets, unpacked once: [start, end] in seconds since the
  // run's start (each packed as the gap since the previous epoch's end
  // and the epoch's length, in µs).
  var epochSets = (data.epoch_sets || []).map(function (p) {
    var d = unpack(p), out = [], end = 0;
    for (var i = 0; i < d[0].length; i++) {
      var start = end + d[0][i];
      end = start + d[1][i];
      out.push([start / 1e6, end / 1e6]);
    }
    return out;
  });

  // Epochs shaded (every other one) under the series.
  function epochs(g) {
    var list = g.epoch_set >= 0 ? epochSets[g.epoch_set] : [];
    return function (u) {
      var c = u.ctx, b = u.bbox;
      c.save();
      c.fillStyle = "rgba(120,120,200,0.12)";
      for (var i = 0; i < list.length; i += 2) {
        var x0 = u.valToPos(list[i][0], "x", true), x1 = u.valToPos(list[i][1], "x", true);
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
      c.font = (11 * (devicePixelRatio || 1)) + "px sans-serif";
      var rows = [];
      (g.marks || []).forEach(function (m) {
        var x = u.valToPos(m.t_us / 1e6, "x", true);
        if (x < b.left || x > b.left + b.width) return;
        c.strokeStyle = m.kind === "oom" ? "#d62728" : "rgba(148,103,189,0.8)";
        c.lineWidth = m.kind === "oom" ? 2 : 1;
        c.beginPath(); c.moveTo(x, b.top); c.lineTo(x, b.top + b.height); c.stroke();
        if (m.kind === "step" || m.kind === "epoch_start" || m.kind === "epoch_end") return;
        var txt = (m.kind === "oom" ? "OOM" + (m.text ? ": " : "") : m.kind === "event" ? "" : m.kind + (m.text ? ": " : "")) + (m.text || "");
        if (txt.length > 40) txt = txt.slice(0, 39) + "…";
        var dpr = devicePixelRatio || 1, w = c.measureText(txt).width + 6 * dpr, tx = x + 3 * dpr;
        if (tx + w > b.left + b.width) tx = x - 3 * dpr - w;
        var row = 0;
        while (row < rows.length && rows[row] > tx) row++;
        if (row > 4) return;
        rows[row] = tx + w;
        var ty = b.top + (4 + row * 14) * dpr;
        c.save(); c.setLineDash([]);
        c.fillStyle = "rgba(255,255,255,0.85)"; c.fillRect(tx - 2 * dpr, ty - dpr, w, 13 * dpr);
        c.fillStyle = m.kind === "oom" ? "#d62728" : "#5b3f8c"; c.textBaseline = "top"; c.fillText(txt, tx, ty);
        c.restore();
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

  // The units of each series' level j: the base (what the page draws at
  // first) and, when the report embeds a pyramid, levels 4^j times finer.
  function levelOf(s, j) {
    if (j === 0 || !s.levels || !s.levels.length) return { t: decode(s), every: s.every || 0, all: !!s.all };
    var l = s.levels[Math.min(j, s.levels.length) - 1];
    return { t: decode(l), every: l.every, all: !!l.all };
  }
  function fmtSecs(x) {
    if (x < 0.01) return (x * 1000).toFixed(1) + " ms";
    if (x < 1) return Math.round(x * 1000) + " ms";
    if (x < 120) return (x < 10 ? x.toFixed(2) : x.toFixed(1)) + " s";
    return (x / 60).toFixed(1) + " min";
  }

  var zero = document.getElementById("memrec-zero");
  data.gpus.forEach(function (g) {
    var el = document.getElementById("timeline-gpu" + g.gpu);
    if (!el || g.series.length === 0) return;
    var depth = 0, top = 0;
    g.series.forEach(function (s) { depth = Math.max(depth, (s.levels || []).length); });
    var levels = [];
    for (var j = 0; j <= depth; j++) {
      var tables = [], every = 0, all = true;
      g.series.forEach(function (s) {
        var l = levelOf(s, j);
        for (var i = 0; i < l.t[1].length; i++) if (l.t[1][i] > top) top = l.t[1][i];
        tables.push(l.t);
        every = Math.max(every, l.every); all = all && l.all;
      });
      levels.push({ tables: tables, every: every, all: all });
    }
    var showTotal = g.total_bytes > 0 && top > 0.5 * g.total_bytes;
    var unit = Math.max(top, showTotal ? g.total_bytes : 0) >= 2 * Math.pow(2, 30) ? [Math.pow(2, 30), "GiB", 3] : [Math.pow(2, 20), "MiB", 1];
    levels.forEach(function (l) {
      var aligned = uPlot.join(l.tables);
      for (var k = 1; k < aligned.length; k++) {
        aligned[k] = aligned[k].map(function (v) { return v == null ? null : v / unit[0]; });
      }
      l.data = aligned;
    });
    var series = [{ label: "time", value: function (u, v) { return fmtTime(v); } }];
    g.series.forEach(function (s) {
      series.push({
        label: s.name, stroke: colours[s.name] || "#9467bd", width: 1.3, spanGaps: true,
        value: function (u, v) { return v == null ? "–" : v.toFixed(unit[2]) + " " + unit[1]; }
      });
    });
    var yMax = Math.max(top, showTotal ? g.total_bytes : 0) / unit[0] * 1.05 || 1;
    var drawn = showTotal ? g : Object.assign({}, g, { total_bytes: 0 });
    var span = levels[0].data[0].length ? levels[0].data[0][levels[0].data[0].length - 1] - levels[0].data[0][0] : 1;
    var res = document.createElement("div"); res.className = "res";
    var cur = 0;
    // yFit fits the y axis to what is in view (0-based with the toggle).
    function yFit(u) {
      if (zero && zero.checked) return [0, yMax];
      var xs = u.scales.x, d = u.data, lo = Infinity, hi = -Infinity;
      for (var s = 1; s < d.length; s++) {
        if (!u.series[s].show) continue;
        for (var i = 0; i < d[s].length; i++) {
          var v = d[s][i];
          if (v == null || d[0][i] < xs.min || d[0][i] > xs.max) continue;
          if (v < lo) lo = v; if (v > hi) hi = v;
        }
      }
      if (!(hi >= lo)) return [0, yMax];
      var pad = (hi - lo) * 0.06 || Math.max(hi * 0.01, 1 / 1024);
      return [Math.max(0, lo - pad), hi + pad];
    }
    // pick draws the coarsest level with a unit per pixel in view, and
    // says what the points are.
    function pick(u) {
      var w = u.bbox.width / (devicePixelRatio || 1), view = (u.scales.x.max - u.scales.x.min) || span, j = 0;
      while (j < depth && PAGE_BUCKETS * Math.pow(4, j) * view / span < w) j++;
      if (j !== cur) { cur = j; u.setData(levels[j].data, false); }
      var col = fmtSecs(span / (PAGE_BUCKETS * Math.pow(4, j))), txt;
      if (levels[j].all) txt = "Every sample drawn.";
      else txt = "Each point: the first, last, lowest and highest value in " + col + (j < depth ? "; zoom in for finer." :
        ", the finest this page holds (its " + (data.bytes ? (data.bytes / 1048576).toFixed(1) + " MiB of timeline data within " + (data.budget / 1048576).toFixed(1) + " MiB" : PAGE_BUCKETS + " buckets per series") + "); memrec view shows every sample.");
      res.textContent = txt;
      res.setAttribute("data-level", String(j));
    }
    var opts = {
      width: Math.max(400, el.clientWidth || 1200), height: 340,
      series: series,
      scales: { x: { time: false }, y: { range: function (u) { return yFit(u); } } },
      axes: [{ label: TU_LABEL, incrs: tuIncrs, values: function (u, splits) { return splits.map(fmtUnit); } }, { label: unit[1], size: 60 }],
      cursor: { drag: { x: true, y: false }, sync: { key: "memrec" } },
      hooks: { drawClear: [epochs(g)], draw: [marks(drawn, unit)], setScale: [syncX, function (u, key) { if (key === "x") pick(u); }] }
    };
    var u = new uPlot(opts, levels[0].data, el);
    el.appendChild(res);
    pick(u);
    charts.push(u);
  });
  if (zero) zero.addEventListener("change", function () { charts.forEach(function (u) { u.setScale("x", { min: u.scales.x.min, max: u.scales.x.max }); }); });

  window.addEventListener("resize", function () {
    charts.forEach(function (u) { u.setSize({ width: Math.max(400, u.root.parentNode.clientWidth), height: 340 }); });
  });
  document.body.setAttribute("data-charts-ready", String(charts.length));
  window.memrecReadyMs = performance.now();
})();

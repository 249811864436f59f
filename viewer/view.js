// memrec view: one uPlot chart per GPU, each window asked of the server
// (/api/window) at the chart's width in pixels, so any zoom shows M4 data
// down to every sample. window.memrecView exposes the state for tests;
// <body> gets data-charts-ready="N" once every chart has its first data.
// A GPU with allocation-site snapshots gets a second chart below the others:
// its sites' live bytes stacked (/api/sites), step-wise from snapshot to
// snapshot, the hover naming each site's line and its bytes.
(function () {
  "use strict";
  var KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
  var colours = { used: "#1f77b4", driver: "#7f7f7f", allocated: "#2ca02c", reserved: "#ff7f0e",
    params: "#8c564b", grads: "#e377c2", optimizer: "#bcbd22", buffers: "#17becf" };
  // The budget's parts are drawn stacked, in this order, each filled.
  var stacked = ["params", "grads", "optimizer", "buffers"];
  // Site bands: a colour each, "other sites" and "untracked" in greys.
  var siteColours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"];
  function siteColour(b, i) { return b.kind === "other" ? "#a0a0a0" : b.kind === "untracked" ? "#cfcfcf" : siteColours[i % siteColours.length]; }
  function fillOf(c) { var n = parseInt(c.slice(1), 16); return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + ",0.35)"; }
  // Several runs: a colour each (Tableau 10, as compare's charts), and
  // the line's field told by its dash.
  var runColours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  var fieldDashes = { used: [], allocated: [8, 4], reserved: [2, 3], driver: [10, 3, 2, 3],
    params: [], grads: [6, 3], optimizer: [2, 2], buffers: [12, 4, 2, 4] };
  // A run's budget parts take its colour lighter, part by part, so that
  // stacked parts differ by more than their dash.
  function partColour(c, field) {
    var k = stacked.indexOf(field), n = parseInt(c.slice(1), 16), f = 0.2 + 0.18 * k;
    var ch = [n >> 16, (n >> 8) & 255, n & 255].map(function (v) { return Math.round(v + (255 - v) * f); });
    return "#" + ch.map(function (v) { return (v < 16 ? "0" : "") + v.toString(16); }).join("");
  }
  // The time units by the run's length, from the server's page
  // (report.TimeUnits): the longest run shown picks one.
  var TIME_UNITS = JSON.parse(document.getElementById("memrec-time-units").textContent);
  function timeUnit() {
    var longest = 0;
    state.runs.forEach(function (r) { longest = Math.max(longest, r.end_us / 1e6); });
    for (var i = 0; i < TIME_UNITS.length; i++) if (!TIME_UNITS[i].up_to_s || longest <= TIME_UNITS[i].up_to_s) return TIME_UNITS[i];
    return TIME_UNITS[TIME_UNITS.length - 1];
  }
  var unitWords = { s: "seconds", min: "minutes", h: "hours" };
  // fmtSince writes seconds since the start in the axis' unit: the hover
  // and the marks read as the axis does.
  function fmtSince(x) {
    var tu = timeUnit();
    if (tu.seconds === 1) return fmtSecs(x, 1000);
    return (x / tu.seconds).toFixed(3) + " " + tu.name;
  }
  var state = { runs: [], mode: "seconds", zero: false, one: null, charts: [], seq: 0, drawn: {}, every: {}, live: false, follow: true };
  window.memrecView = state;
  state.zoom = function (a, b) { zoom(a, b); };
  var errs = document.getElementById("errors");

  function say(msg) { errs.textContent = msg; errs.hidden = !msg; }

  function get(path, params, signal) {
    var q = new URLSearchParams();
    Object.keys(params).forEach(function (k) {
      [].concat(params[k]).forEach(function (v) { q.append(k, v); });
    });
    return fetch(path + "?" + q.toString(), { signal: signal }).then(function (r) {
      return r.json().then(function (j) {
        if (!r.ok) { var e = new Error(j.error || r.statusText); e.status = r.status; throw e; }
        return j;
      });
    });
  }

  // ---- units -------------------------------------------------------------
  function fmtBytes(v, unit) {
    if (v == null) return "–";
    unit = unit || (Math.abs(v) >= GiB ? GiB : Math.abs(v) >= MiB ? MiB : KiB);
    var name = unit === GiB ? "GiB" : unit === MiB ? "MiB" : "KiB";
    var x = v / unit, d = Math.abs(x) >= 100 ? 1 : Math.abs(x) >= 10 ? 2 : 3;
    return x.toFixed(d).replace(/\.?0+$/, "") + " " + name;
  }
  var byteIncrs = [];
  [KiB, MiB, GiB].forEach(function (u) { [1, 2, 5, 10, 20, 50, 100, 200, 500].forEach(function (m) { byteIncrs.push(m * u); }); });
  [1024, 2048, 4096].forEach(function (m) { byteIncrs.push(m * GiB); });
  function byteTicks(u, splits, ax, space, incr) {
    var unit = incr >= GiB ? GiB : incr >= MiB ? MiB : KiB;
    var d = incr / unit < 1 ? 1 : 0;
    return splits.map(function (v) { return (v / unit).toFixed(d) + (unit === GiB ? " GiB" : unit === MiB ? " MiB" : " KiB"); });
  }
  function fmtSecs(s, span) {
    if (span < 120) return (Math.abs(s) < 10 && span < 10 ? s.toFixed(span < 1 ? 3 : 2) : s.toFixed(span < 20 ? 1 : 0)) + " s";
    var neg = s < 0; s = Math.abs(Math.round(s));
    var h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, ss = s % 60;
    var out = (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + String(ss).padStart(2, "0");
    return (neg ? "-" : "") + out;
  }
  var secIncrs = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];
  var intIncrs = [];
  for (var e = 0; e < 10; e++) [1, 2, 5].forEach(function (m) { intIncrs.push(m * Math.pow(10, e)); });

  // ---- x axis modes: seconds since each run's start, clock, step, epoch ---
  function interp(tab, a, b, x) { // piecewise linear over tab[i][a] -> tab[i][b]
    var n = tab.length;
    if (n === 0) return NaN;
    if (n === 1) return tab[0][b] + (x - tab[0][a]) * 0 ;
    var lo = 0, hi = n - 1;
    if (x <= tab[0][a]) { lo = 0; hi = 1; } else if (x >= tab[n - 1][a]) { lo = n - 2; hi = n - 1; } else {
      while (hi - lo > 1) { var m = (lo + hi) >> 1; if (tab[m][a] <= x) lo = m; else hi = m; }
    }
    var d = tab[hi][a] - tab[lo][a];
    return d === 0 ? tab[lo][b] : tab[lo][b] + (x - tab[lo][a]) * (tab[hi][b] - tab[lo][b]) / d;
  }
  function epochTable(run) { // [t_us, epoch + fraction]
    if (!run._etab) {
      var t = [];
      run.epochs.forEach(function (e) { t.push([e[0], e[2]]); t.push([e[1], e[2] + 0.999999]); });
      run._etab = t;
    }
    return run._etab;
  }
  function toX(run, tus) {
    switch (state.mode) {
      case "clock": return run.start_ms / 1000 + tus / 1e6;
      case "step": return interp(run.steps, 0, 1, tus);
      case "epoch": return interp(epochTable(run), 0, 1, tus);
    }
    return tus / 1e6;
  }
  function toT(run, x) { // µs since the run's start
    switch (state.mode) {
      case "clock": return (x - run.start_ms / 1000) * 1e6;
      case "step": return interp(run.steps, 1, 0, x);
      case "epoch": return interp(epochTable(run), 1, 0, x);
    }
    return x * 1e6;
  }
  function fullRange() {
    var lo = Infinity, hi = -Infinity;
    state.runs.forEach(function (r) {
      lo = Math.min(lo, toX(r, 0)); hi = Math.max(hi, toX(r, r.end_us));
    });
    if (!(hi > lo)) hi = lo + 1;
    var pad = (hi - lo) * 0.01; // an OOM at the very end is not on the edge
    return [lo, hi + pad];
  }
  function xAxis() {
    var ax = { label: { seconds: "seconds since start", clock: "clock time", step: "step", epoch: "epoch" }[state.mode], labelSize: 20, size: 40 };
    if (state.mode === "seconds") {
      var tu = timeUnit();
      ax.label = unitWords[tu.name] + " since start";
      ax.incrs = tu.seconds === 1 ? secIncrs : intIncrs.concat(intIncrs.map(function (v) { return v / 1000; })).sort(function (a, b) { return a - b; }).map(function (v) { return v * tu.seconds; });
      ax.values = tu.seconds === 1 ?
        function (u, splits) { var span = u.scales.x.max - u.scales.x.min; return splits.map(function (s) { return fmtSecs(s, span); }); } :
        function (u, splits) { return splits.map(function (s) { return +(s / tu.seconds).toPrecision(6) + ""; }); };
    } else if (state.mode !== "clock") {
      ax.incrs = intIncrs;
      ax.values = function (u, splits) { return splits.map(function (s) { return Math.round(s).toLocaleString("en"); }); };
    }
    return ax;
  }

  // ---- drawing hooks -------------------------------------------------------
  function epochsHook(gpu) {
    return function (u) {
      var c = u.ctx, b = u.bbox, r0 = state.runs[0];
      if (!r0 || !r0.epochs.length) return;
      var xs = u.scales.x, vis = [];
      r0.epochs.forEach(function (e) {
        var a = toX(r0, e[0]), z = toX(r0, e[1]);
        if (z >= xs.min && a <= xs.max) vis.push([a, z, e[2]]);
      });
      c.save();
      var dpr = devicePixelRatio || 1;
      c.font = (11 * dpr) + "px sans-serif"; c.fillStyle = "rgba(80,80,140,0.9)"; c.textBaseline = "top";
      var labelled = vis.length <= Math.max(4, b.width / dpr / 40);
      vis.forEach(function (e, i) {
        var x0 = Math.max(u.valToPos(e[0], "x", true), b.left), x1 = Math.min(u.valToPos(e[1], "x", true), b.left + b.width);
        if (e[2] % 2 === 0 && x1 > x0) { c.fillStyle = "rgba(120,120,200,0.10)"; c.fillRect(x0, b.top, x1 - x0, b.height); }
        if (labelled && x1 - x0 > 14 * dpr) { c.fillStyle = "rgba(60,60,120,0.9)"; c.fillText("e" + e[2], x0 + 3 * dpr, b.top + 2 * dpr); }
      });
      if (!labelled && vis.length) {
        c.fillStyle = "rgba(60,60,120,0.9)";
        c.fillText(vis.length + " epochs in view (every other shaded): zoom in to label them", b.left + 4 * dpr, b.top + 2 * dpr);
      }
      c.restore();
    };
  }
  function marksHook(ch) {
    return function (u) {
      var c = u.ctx, b = u.bbox, dpr = devicePixelRatio || 1, labels = [];
      c.save();
      c.font = (11 * dpr) + "px sans-serif"; c.textBaseline = "top";
      (ch.marks || []).forEach(function (m) {
        var x = u.valToPos(toX(m.run, m.t_us), "x", true);
        if (!(x >= b.left && x <= b.left + b.width)) return;
        var oom = m.kind === "oom";
        c.strokeStyle = oom ? "#d62728" : "rgba(148,103,189,0.85)";
        c.lineWidth = (oom ? 2 : 1) * dpr;
        c.setLineDash(oom ? [] : [6 * dpr, 4 * dpr]);
        c.beginPath(); c.moveTo(x, b.top); c.lineTo(x, b.top + b.height); c.stroke();
        labels.push([x, oom, markLabel(m)]);
      });
      c.setLineDash([]);
      // Labels along the top, right of their line (left of it near the
      // right edge), each on the first row where it does not overlap.
      var rows = [];
      ch.drawnLabels = [];
      labels.forEach(function (l) {
        var txt = l[2].length > 40 ? l[2].slice(0, 39) + "…" : l[2];
        var w = c.measureText(txt).width + 6 * dpr, x = l[0] + 3 * dpr;
        if (x + w > b.left + b.width) x = l[0] - 3 * dpr - w;
        var row = 0;
        while (row < rows.length && rows[row] > x) row++;
        if (row > 5) return;
        rows[row] = x + w;
        var y = b.top + (16 + row * 14) * dpr;
        c.fillStyle = "rgba(255,255,255,0.85)"; c.fillRect(x - 2 * dpr, y - 1 * dpr, w, 13 * dpr);
        c.fillStyle = l[1] ? "#d62728" : "#5b3f8c"; c.fillText(txt, x, y);
        ch.drawnLabels.push(txt);
      });
      if (ch.total) {
        var y = u.valToPos(ch.total, "y", true);
        if (y >= b.top && y <= b.top + b.height) {
          c.strokeStyle = "#444"; c.lineWidth = dpr; c.setLineDash([4 * dpr, 4 * dpr]);
          c.beginPath(); c.moveTo(b.left, y); c.lineTo(b.left + b.width, y); c.stroke();
          c.setLineDash([]); c.fillStyle = "#444"; c.textBaseline = "bottom";
          c.fillText("total " + fmtBytes(ch.total), b.left + 4 * dpr, y - 2 * dpr);
        }
      }
      c.restore();
    };
  }
  function markLabel(m) {
    var k = m.kind === "oom" ? "OOM" : m.kind === "event" ? "" : m.kind;
    var t = m.text || "";
    if (m.kind === "exit" && m.code != null) t = "exit " + m.code + (t ? ": " + t : "");
    return (k && m.kind !== "exit" ? k + (t ? ": " : "") : "") + t || m.kind;
  }

  // ---- charts ----------------------------------------------------------------
  function gpusOf() {
    var seen = {}, out = [];
    state.runs.forEach(function (r) {
      r.gpus.forEach(function (g) { if (!seen[g.gpu]) { seen[g.gpu] = g; out.push(g); } });
      r.lines.forEach(function (l) { if (!seen[l.gpu]) { seen[l.gpu] = { gpu: l.gpu, label: "gpu" + l.gpu }; out.push(seen[l.gpu]); } });
    });
    return out.sort(function (a, b) { return a.gpu - b.gpu; });
  }

  function yRange(ch) {
    return function (u, dmin, dmax) {
      var xs = u.scales.x, lo = Infinity, hi = -Infinity, d = u.data;
      for (var s = 1; s < d.length; s++) {
        if (!u.series[s].show) continue;
        var ys = d[s];
        for (var i = 0; i < ys.length; i++) {
          var v = ys[i];
          if (v == null || d[0][i] < xs.min || d[0][i] > xs.max) continue;
          if (v < lo) lo = v; if (v > hi) hi = v;
        }
      }
      if (!(hi >= lo)) { lo = 0; hi = ch.total || GiB; }
      if (state.zero) lo = 0;
      var pad = (hi - lo) * 0.06 || Math.max(hi * 0.01, MiB);
      return [state.zero ? 0 : Math.max(0, lo - pad), hi + pad];
    };
  }

  function build() {
    var box = document.getElementById("charts");
    state.charts.forEach(function (c) { c.u.destroy(); });
    box.innerHTML = "";
    state.charts = [];
    var gpus = gpusOf(), shown = gpus.filter(function (g) { return state.one == null || g.gpu === state.one; });
    box.className = shown.length > 1 ? "grid" : "";
    shown.forEach(function (g) {
      var el = document.createElement("div"); el.className = "chart"; el.id = "chart-gpu" + g.gpu;
      var h = document.createElement("h3"); h.textContent = g.label + (g.name ? " · " + g.name : "") + (g.total_bytes ? " · " + fmtBytes(g.total_bytes) : "");
      el.appendChild(h);
      var plot = document.createElement("div"); el.appendChild(plot);
      var res = document.createElement("div"); res.className = "res"; el.appendChild(res);
      var hover = document.createElement("div"); hover.className = "hover"; hover.textContent = "Hover a chart for every line's value at the cursor."; el.appendChild(hover);
      box.appendChild(el);
      var ch = { gpu: g.gpu, el: el, res: res, hover: hover, total: g.total_bytes || 0, lines: [], marks: [] };
      var series = [{ label: state.mode }], bands = [];
      ch.stacks = [];
      state.runs.forEach(function (r, ri) {
        var lines = r.lines.filter(function (l) { return l.gpu === g.gpu; });
        // The budget's parts last, in stacking order, each process's together.
        lines.sort(function (a, b) {
          var sa = stacked.indexOf(a.field), sb = stacked.indexOf(b.field);
          if ((sa < 0) !== (sb < 0)) return sa < 0 ? -1 : 1;
          return sa < 0 ? 0 : (a.pid - b.pid) || (sa - sb);
        });
        var stack = null;
        lines.forEach(function (l) {
          ch.lines.push({ run: r, line: l });
          var several = state.runs.length > 1, part = stacked.indexOf(l.field) >= 0;
          var c = several ? runColours[ri % runColours.length] : colours[l.field] || "#9467bd";
          if (several && part) c = partColour(c, l.field);
          ch.lines[ch.lines.length - 1].colour = c;
          series.push({
            label: (several ? r.name + ": " : "") + l.label + (part ? " (stacked)" : ""), stroke: c,
            dash: several ? fieldDashes[l.field] || [] : [], width: part ? 1 : 1.4, spanGaps: true, points: { show: false },
            fill: part ? fillOf(c) : undefined
          });
          if (part) {
            if (!stack || stack.pid !== l.pid) { stack = { pid: l.pid, idx: [] }; ch.stacks.push(stack); }
            var i = series.length - 1;
            if (stack.idx.length) bands.push({ series: [i, stack.idx[stack.idx.length - 1]], fill: fillOf(c) });
            stack.idx.push(i);
          }
        });
      });
      var width = Math.max(320, (shown.length > 1 ? box.clientWidth / 2 - 24 : box.clientWidth - 8) || 900);
      var opts = {
        width: width, height: shown.length > 1 ? 260 : 420, series: series, bands: bands,
        scales: { x: { time: state.mode === "clock", range: function (u, a, b) { return [state.x[0], state.x[1]]; } }, y: { range: yRange(ch) } },
        axes: [xAxis(), { size: 78, incrs: byteIncrs, values: byteTicks }],
        legend: { live: false, show: state.runs.length < 2 },
        cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: "memrec-view" } },
        hooks: {
          drawClear: [epochsHook(g.gpu)], draw: [marksHook(ch)],
          setSelect: [selectZoom],
          setCursor: [function (u) { hoverAt(ch, u); }]
        }
      };
      ch.u = new uPlot(opts, [[]].concat(series.slice(1).map(function () { return []; })), plot);
      if (state.runs.length > 1) plot.appendChild(groupedLegend(ch));
      ch.u.over.addEventListener("dblclick", function () { zoom.apply(null, fullRange()); });
      state.charts.push(ch);
    });
    // The sites charts, below: one per GPU of each run with site snapshots.
    shown.forEach(function (g) {
      state.runs.forEach(function (r, ri) {
        if ((r.site_gpus || []).indexOf(g.gpu) < 0) return;
        var el = document.createElement("div"); el.className = "chart sites"; el.id = "sites-gpu" + g.gpu + (ri ? "-run" + ri : "");
        var h = document.createElement("h3"); h.textContent = g.label + " · live memory by allocation site" + (state.runs.length > 1 ? " · " + r.name : "");
        el.appendChild(h);
        var plot = document.createElement("div"); el.appendChild(plot);
        var res = document.createElement("div"); res.className = "res"; el.appendChild(res);
        var hover = document.createElement("div"); hover.className = "hover"; hover.textContent = "Hover for each site's live bytes at the cursor."; el.appendChild(hover);
        box.appendChild(el);
        var ch = { sites: true, run: r, gpu: g.gpu, el: el, plot: plot, res: res, hover: hover, lines: [], bands: [], key: null,
          width: Math.max(320, (shown.length > 1 ? box.clientWidth / 2 - 24 : box.clientWidth - 8) || 900), height: shown.length > 1 ? 260 : 420 };
        sitesPlot(ch, []);
        state.charts.push(ch);
      });
    });
  }

  function selectZoom(u) {
    if (u.select.width < 3) return;
    var a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
    u.setSelect({ width: 0, height: 0 }, false);
    zoom(a, b);
  }

  // sitesPlot makes a sites chart's plot for its bands, once per set of
  // bands (a zoom may rank other sites first): one series per band, each
  // stacked on the one before it and filled down to it (the budget's way).
  function sitesPlot(ch, bands) {
    var key = bands.map(function (b) { return b.kind + ":" + b.label + ":" + !!b.grows; }).join("\n");
    if (ch.u && ch.key === key) return;
    if (ch.u) { ch.width = ch.u.width; ch.height = ch.u.height; ch.u.destroy(); }
    ch.key = key; ch.bands = bands;
    var series = [{ label: state.mode }], fills = [], stepped = uPlot.paths.stepped({ align: 1 });
    bands.forEach(function (b, i) {
      var c = siteColour(b, i);
      series.push({ label: b.label + (b.grows ? " (grows)" : ""), stroke: c, width: 1, fill: fillOf(c), points: { show: false }, paths: stepped });
      if (i > 0) fills.push({ series: [i + 1, i], fill: fillOf(c) });
    });
    ch.u = new uPlot({
      width: ch.width, height: ch.height, series: series, bands: fills,
      scales: { x: { time: state.mode === "clock", range: function () { return [state.x[0], state.x[1]]; } },
        y: { range: function (u, lo, hi) { return [0, (hi > 0 ? hi : GiB) * 1.06]; } } },
      axes: [xAxis(), { size: 78, incrs: byteIncrs, values: byteTicks }],
      legend: { live: false },
      cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: "memrec-view" } },
      hooks: { drawClear: [epochsHook(ch.gpu)], setSelect: [selectZoom], setCursor: [function (u) { hoverAt(ch, u); }] }
    }, [[]].concat(bands.map(function () { return []; })), ch.plot);
    ch.u.over.addEventListener("dblclick", function () { zoom.apply(null, fullRange()); });
  }

  // drawSites draws a window's site bands, stacked in order, each
  // snapshot's bytes held until the next (the last until the window's end).
  function drawSites(ch, j) {
    var bands = j ? j.sites : [];
    sitesPlot(ch, bands);
    var xs = [], n = j ? j.t_us.length : 0;
    for (var i = 0; i < n; i++) xs.push(toX(ch.run, j.t_us[i]));
    if (n) xs.push(toX(ch.run, Math.max(j.t_us[n - 1], Math.min(j.to_us, ch.run.end_us))));
    var data = [xs], below = null;
    bands.forEach(function (b) {
      var ys = new Array(xs.length);
      for (var i = 0; i < xs.length; i++) ys[i] = b.bytes[Math.min(i, n - 1)] + (below ? below[i] : 0);
      data.push(ys); below = ys;
    });
    ch.snap = j;
    ch.u.setData(data, false);
    ch.u.setScale("x", { min: state.x[0], max: state.x[1] });
    ch.res.textContent = !j ? "" : j.note ? j.note : n + " site snapshot" + (n === 1 ? "" : "s") + " in view; the sites that grow first, then the largest" +
      (j.stale ? " " + j.stale : "");
  }

  // hoverSites lists each band's bytes at the snapshot in force at x.
  function hoverSites(ch, x) {
    var j = ch.snap, k = -1;
    if (j) for (var i = 0; i < j.t_us.length; i++) if (toX(ch.run, j.t_us[i]) <= x) k = i;
    var html = "<b>" + esc(fmtX(x)) + "</b>";
    if (k < 0) { ch.hover.innerHTML = html + " no site snapshot at or before the cursor"; ch.hoverRows = []; return; }
    var rows = j.sites.map(function (b, i) { return [siteColour(b, i), b.label + (b.grows ? " (grows)" : ""), fmtBytes(b.bytes[k])]; }).reverse();
    html += " snapshot at " + esc(fmtSince(j.t_us[k] / 1e6)) + "<table>";
    rows.forEach(function (r) { html += "<tr><td><span class=sw style='background:" + r[0] + "'></span>" + esc(r[1]) + "</td><td class=v>" + esc(r[2]) + "</td></tr>"; });
    ch.hover.innerHTML = html + "</table>";
    ch.hoverRows = rows; ch.hoverX = x;
  }

  // zoom shows [a, b] of the x axis and asks for its data.
  function zoom(a, b) {
    if (!(b > a)) return;
    state.x = [a, b];
    var full = fullRange();
    state.follow = b >= full[1] - (full[1] - full[0]) * 0.02;
    state.charts.forEach(function (ch) { ch.u.setScale("x", { min: a, max: b }); });
    fetchWindow();
  }

  var pending = null, timer = null;
  // The first window is asked for at the next frame, once the charts are
  // laid out at their widths; later ones (zoom, resize, a drag) wait 30 ms
  // for the next change.
  function fetchWindow() {
    clearTimeout(timer);
    if (!state.seq) { requestAnimationFrame(function () { if (!state.seq) doFetch(); }); return; }
    timer = setTimeout(doFetch, 30);
  }
  // Lines asked for in one request: a few GPUs' lines, so that a grid of
  // eight is two requests, read side by side by the server's cores.
  var LINES_PER_REQUEST = 16;
  function doFetch() {
    if (pending) pending.abort();
    pending = new AbortController();
    var signal = pending.signal, seq = ++state.seq, started = performance.now();
    var jobs = [], results = [];
    state.charts.forEach(function (ch) {
      ch.pendingMarks = []; ch.moreMarks = 0;
      if (!ch.sites) return;
      var r = ch.run, t0 = Math.max(0, toT(r, state.x[0])), t1 = Math.min(r.end_us + 1, toT(r, state.x[1]));
      ch.pendingSites = null;
      if (t1 > t0) jobs.push(get("api/sites", { run: r.name, gpu: ch.gpu, from: (t0 / 1e6).toFixed(6), to: (t1 / 1e6).toFixed(6) }, signal).then(function (j) { ch.pendingSites = j; }));
    });
    state.runs.forEach(function (r) {
      var t0 = Math.max(0, toT(r, state.x[0])), t1 = Math.min(r.end_us + 1, toT(r, state.x[1]));
      if (!(t1 > t0)) return;
      var p = { run: r.name, from: (t0 / 1e6).toFixed(6), to: (t1 / 1e6).toFixed(6) };
      var byPx = {}, charts = [];
      state.charts.forEach(function (ch) {
        if (ch.sites) return;
        var px = Math.max(50, Math.round(ch.u.bbox.width / (devicePixelRatio || 1)));
        var keys = ch.lines.filter(function (l) { return l.run === r; }).map(function (l) { return l.line.key; });
        if (!keys.length) return;
        charts.push(ch);
        (byPx[px] = byPx[px] || []).push.apply(byPx[px], keys);
      });
      Object.keys(byPx).forEach(function (px) {
        var keys = byPx[px];
        for (var i = 0; i < keys.length; i += LINES_PER_REQUEST) {
          jobs.push(get("api/window", Object.assign({ line: keys.slice(i, i + LINES_PER_REQUEST), points: Number(px) }, p), signal).then(function (w) {
            w.lines.forEach(function (wl) { results.push({ run: r, key: wl.key, w: wl, stale: w.stale }); });
          }));
        }
      });
      // The run's marks once, each chart keeping its own GPU's OOMs.
      if (charts.length) jobs.push(get("api/marks", Object.assign({ limit: 300 }, p), signal).then(function (m) {
        charts.forEach(function (ch) {
          m.marks.forEach(function (mk) { if (mk.kind !== "oom" || mk.gpu == null || mk.gpu === ch.gpu) ch.pendingMarks.push(Object.assign({}, mk, { run: r })); });
          if (m.more) ch.moreMarks = m.more;
        });
      }));
    });
    Promise.all(jobs).then(function () {
      if (seq !== state.seq) return;
      state.charts.forEach(function (ch) { if (ch.sites) drawSites(ch, ch.pendingSites); else draw(ch, results, ch.pendingMarks); });
      state.lastFetchMs = performance.now() - started;
      if (!document.body.hasAttribute("data-charts-ready")) {
        document.body.setAttribute("data-charts-ready", String(state.charts.length));
        state.firstPaintMs = performance.now();
      }
      document.body.setAttribute("data-seq", String(seq));
      say("");
    }).catch(function (e) { if (e.name !== "AbortError") say(String(e.message || e)); });
  }

  function draw(ch, results, marks) {
    var tables = [], every = 1, samples = 0, stale = "";
    ch.lines.forEach(function (l) {
      var r = results.filter(function (x) { return x.run === l.run && x.key === l.line.key; })[0];
      if (!r) { tables.push([[], []]); return; }
      var xs = new Array(r.w.t_us.length);
      for (var i = 0; i < xs.length; i++) xs[i] = toX(l.run, r.w.t_us[i]);
      tables.push([xs, r.w.v]);
      every = Math.max(every, r.w.every); samples = Math.max(samples, r.w.samples);
      if (r.stale) stale = r.stale;
      state.drawn[l.run.name + "/" + l.line.key] = r.w.t_us.length;
      state.every[l.run.name + "/" + l.line.key] = r.w.every;
    });
    ch.marks = marks;
    var data = tables.length ? uPlot.join(tables) : [[]];
    // Stacked parts: each one's last value carried forward, then added to
    // the parts below it; the hover still says each part's own value.
    (ch.stacks || []).forEach(function (st) {
      var below = null;
      st.idx.forEach(function (si) {
        var ys = data[si], last = null, out = new Array(ys.length);
        for (var i = 0; i < ys.length; i++) {
          if (ys[i] != null) last = ys[i];
          out[i] = last == null ? null : last + (below ? (below[i] || 0) : 0);
        }
        data[si] = out; below = out;
      });
    });
    ch.u.setData(data, false);
    ch.u.setScale("x", { min: state.x[0], max: state.x[1] });
    var run = state.runs[0], hz = run && run.end_us > 0 ? (run.counts.samples / Math.max(1, run.gpus.length)) / (run.end_us / 1e6) : 0;
    var txt = every === 1 ? "Every sample drawn (" + samples.toLocaleString("en") + " in view)." :
      "Each point: the lowest and highest of " + every.toLocaleString("en") + " samples" + (hz > 0 ? " (≈ " + fmtSecs(every / hz, every / hz) + ")" : "") +
      "; " + samples.toLocaleString("en") + " samples in view — zoom in for finer data, down to every sample.";
    if (ch.moreMarks) txt += " " + ch.moreMarks + " more marks in view than shown.";
    ch.res.textContent = txt + (stale ? " " + stale : "");
    ch.res.setAttribute("data-every", String(every));
  }

  // groupedLegend is the legend of a chart of several runs: an entry per
  // run (its colour) and one per kind of line (its dash), where uPlot's
  // would list every line of every run. A click hides or shows the
  // run's, or the kind's, lines.
  function groupedLegend(ch) {
    var box = document.createElement("div"); box.className = "glegend";
    function entry(label, swatch, match) {
      var e = document.createElement("span"); e.className = "gl";
      e.appendChild(swatch); e.appendChild(document.createTextNode(label));
      e.onclick = function () {
        var off = !e.classList.contains("off");
        e.classList.toggle("off", off);
        ch.lines.forEach(function (l, i) { if (match(l)) ch.u.setSeries(i + 1, { show: !off }); });
      };
      box.appendChild(e);
    }
    function dashSwatch(colour, dash) {
      var ns = "http://www.w3.org/2000/svg", svg = document.createElementNS(ns, "svg"), ln = document.createElementNS(ns, "line");
      svg.setAttribute("width", "28"); svg.setAttribute("height", "10"); svg.setAttribute("class", "dash");
      ln.setAttribute("x1", "1"); ln.setAttribute("x2", "27"); ln.setAttribute("y1", "5"); ln.setAttribute("y2", "5");
      ln.setAttribute("stroke", colour); ln.setAttribute("stroke-width", "2");
      if (dash.length) ln.setAttribute("stroke-dasharray", dash.join(" "));
      svg.appendChild(ln);
      return svg;
    }
    state.runs.forEach(function (r, ri) {
      if (!ch.lines.some(function (l) { return l.run === r; })) return;
      var sw = document.createElement("span"); sw.className = "sw"; sw.style.background = runColours[ri % runColours.length];
      entry(r.name, sw, function (l) { return l.run === r; });
    });
    var kinds = [];
    ch.lines.forEach(function (l) { if (kinds.indexOf(l.line.field) < 0) kinds.push(l.line.field); });
    kinds.forEach(function (f) {
      var first = ch.lines.filter(function (l) { return l.line.field === f; })[0].line;
      var part = stacked.indexOf(f) >= 0;
      entry(first.label.replace(/ \(pid \d+\)$/, "") + (part ? " (stacked)" : ""), dashSwatch("#444", fieldDashes[f] || []), function (l) { return l.line.field === f; });
    });
    return box;
  }

  // ---- hover: every line's last sample before the cursor, and marks near it
  var hoverTimer = null;
  function hoverAt(ch, u) {
    var left = u.cursor.left;
    if (left == null || left < 0) return;
    clearTimeout(hoverTimer);
    hoverTimer = setTimeout(function () {
      var x = u.posToVal(left, "x"), x8 = u.posToVal(left + 8, "x");
      state.charts.forEach(function (c) { lookup(c, x, Math.abs(x8 - x)); });
    }, 25);
  }
  function lookup(ch, x, near) {
    if (ch.sites) { hoverSites(ch, x); return; }
    var jobs = state.runs.map(function (r) {
      var lines = ch.lines.filter(function (l) { return l.run === r; });
      if (!lines.length) return Promise.resolve(null);
      var t = toT(r, x), nearT = Math.abs(toT(r, x + near) - t);
      return get("api/at", { run: r.name, t: (t / 1e6).toFixed(6), near: (nearT / 1e6).toFixed(6), line: lines.map(function (l) { return l.line.key; }) }).then(function (a) { a.run = r; return a; });
    });
    Promise.all(jobs).then(function (as) {
      var rows = [], marks = [];
      as.forEach(function (a) {
        if (!a) return;
        a.lines.forEach(function (l) {
          var line = ch.lines.filter(function (x) { return x.run === a.run && x.line.key === l.key; })[0];
          var name = (state.runs.length > 1 ? a.run.name + ": " : "") + (line ? line.line.label : l.key);
          var age = l.has ? fmtSecs(l.age_us / 1e6, Math.max(l.age_us / 1e6, 0.001)) : "";
          rows.push([line ? line.colour || colours[line.line.field] : "#999", name, l.has ? fmtBytes(l.v) : "no sample yet", l.has ? (l.age_us === 0 ? "at the cursor" : age + " before" + (l.off ? " (its last sample)" : "")) : ""]);
        });
        a.marks.forEach(function (m) { m.run = a.run; marks.push(m); });
      });
      var at = state.runs.length ? fmtX(x) : "";
      var html = "<b>" + esc(at) + "</b><table>";
      rows.forEach(function (r) { html += "<tr><td><span class=sw style='background:" + r[0] + "'></span>" + esc(r[1]) + "</td><td class=v>" + esc(r[2]) + "</td><td class=age>" + esc(r[3]) + "</td></tr>"; });
      html += "</table>";
      if (marks.length) html += "<div class=marks>" + marks.map(function (m) { return "<div class='mark " + esc(m.kind) + "'>" + esc(fmtSince(m.t_us / 1e6)) + " " + esc(markLabel(m)) + "</div>"; }).join("") + "</div>";
      ch.hover.innerHTML = html;
      ch.hoverRows = rows; ch.hoverMarks = marks; ch.hoverRaw = as; ch.hoverX = x;
      document.body.setAttribute("data-hover-seq", String((Number(document.body.getAttribute("data-hover-seq")) || 0) + 1));
    }).catch(function (e) { say(String(e.message || e)); });
  }
  function fmtX(x) {
    switch (state.mode) {
      case "clock": return new Date(x * 1000).toLocaleString();
      case "step": return "step " + Math.round(x).toLocaleString("en");
      case "epoch": return "epoch " + x.toFixed(2);
    }
    return fmtSince(x) + " since start";
  }
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) { return "&#" + c.charCodeAt(0) + ";"; }); }

  // ---- controls, live updates -------------------------------------------------
  function controls(all) {
    var mode = document.getElementById("mode"), zero = document.getElementById("zero"), one = document.getElementById("one");
    var hasSteps = state.runs.some(function (r) { return r.steps.length > 1; }), hasEpochs = state.runs.some(function (r) { return r.epochs.length > 0; });
    mode.querySelector("[value=step]").disabled = !hasSteps;
    mode.querySelector("[value=epoch]").disabled = !hasEpochs;
    mode.onchange = function () {
      var r = state.runs[0], t = [toT(r, state.x[0]), toT(r, state.x[1])];
      state.mode = mode.value; build();
      state.x = [toX(r, t[0]), toX(r, t[1])];
      if (!(state.x[1] > state.x[0])) state.x = fullRange();
      zoom(state.x[0], state.x[1]);
    };
    zero.onchange = function () { state.zero = zero.checked; state.charts.forEach(function (c) { c.u.redraw(true, true); c.u.setScale("x", { min: state.x[0], max: state.x[1] }); }); };
    one.innerHTML = "<option value=''>all GPUs (grid)</option>" + gpusOf().map(function (g) { return "<option value='" + g.gpu + "'>" + esc(g.label) + " only</option>"; }).join("");
    one.onchange = function () { state.one = one.value === "" ? null : Number(one.value); build(); zoom(state.x[0], state.x[1]); };
    document.getElementById("whole").onclick = function () { zoom.apply(null, fullRange()); };
    var runs = document.getElementById("runs");
    var shown = state.runs.map(function (r) { return r.name; });
    runs.innerHTML = all.map(function (n) {
      return "<label><input type=checkbox value='" + esc(n) + "'" + (shown.indexOf(n) >= 0 ? " checked" : "") + "> " + esc(n) + "</label>";
    }).join(" ");
    runs.onchange = function () {
      var q = new URLSearchParams();
      runs.querySelectorAll("input:checked").forEach(function (i) { q.append("run", i.value); });
      location.search = q.toString();
    };
    var title = state.runs.map(function (r) { return r.name + (r.live ? " (live)" : r.complete ? "" : " (incomplete)"); }).join(" vs ");
    document.getElementById("title").textContent = title;
    document.title = "memrec view: " + title;
  }

  function describe() {
    var p = new URLSearchParams(location.search).getAll("run");
    return get("api/runs", p.length ? { run: p } : {});
  }

  function live() {
    describe().then(function (j) {
      if (!state.runs.length) { if (j.shown.length) start(j); return; }
      var was = fullRange(), w = state.x[1] - state.x[0], whole = state.x[0] <= was[0] + 1e-9;
      // In place: the charts' lines hold the run objects. A run whose
      // lines or site GPUs changed (its first allocator or site samples
      // came) gets its charts built again.
      var again = false;
      j.shown.forEach(function (r, i) {
        var cur = state.runs[i];
        if (!cur || cur.name !== r.name) return;
        again = again || String(cur.site_gpus) !== String(r.site_gpus) || cur.lines.length !== r.lines.length;
        Object.assign(cur, r); cur._etab = null;
      });
      if (again) build();
      var now = fullRange();
      if (state.follow) state.x = whole ? now : [now[1] - w, now[1]];
      fetchWindow();
    }).catch(function (e) { say(String(e.message || e)); });
  }

  function start(j) {
    state.runs = j.shown;
    state.x = fullRange();
    build();
    controls(j.all);
    fetchWindow();
  }

  function begin() { describe().then(function (j) {
    state.live = j.live;
    if (j.live) setInterval(live, 1000);
    if (!j.shown.length) {
      say(j.live ? "The recording has not started yet…" : "No runs in this database yet.");
      if (!j.live) document.body.setAttribute("data-charts-ready", "0");
      return;
    }
    start(j);
  }).catch(function (e) {
    say(String(e.message || e));
    // A file a recording holds (503) is asked for again until it is free.
    if (e.status === 503) { setTimeout(begin, 5000); return; }
    document.body.setAttribute("data-charts-ready", "0");
  }); }
  begin();

  window.addEventListener("resize", function () {
    var box = document.getElementById("charts"), grid = state.charts.length > 1;
    state.charts.forEach(function (c) {
      c.u.setSize({ width: Math.max(320, grid ? box.clientWidth / 2 - 24 : box.clientWidth - 8), height: grid ? 260 : 420 });
    });
    if (state.charts.length) fetchWindow();
  });
})();

// kprof HTML report: builds the page from the JSON data document (#kprof-data). Data reaches the
// page only through textContent, createTextNode and canvas fillText, never through innerHTML.
'use strict';

(function () {
  var doc = document, fmt = kprofFmt;

  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function panel(id, title) {
    var s = el('section', 'panel');
    s.id = id;
    s.appendChild(el('h2', null, title));
    doc.getElementById('app').appendChild(s);
    var a = el('a', null, title);
    a.href = '#' + id;
    doc.getElementById('nav').appendChild(a);
    return s;
  }

  // ---- Tables: sortable by a click on a header, filtered by a text box ----------------------

  function cellText(type, v) {
    switch (type) {
      case 'int': return fmt.int(v);
      case 'dur': return fmt.dur(v);
      case 'bytes': return fmt.bytes(v);
      case 'sbytes': return (v > 0 ? '+' : '') + fmt.bytes(v);
      case 'pct': return fmt.pct(v);
      case 'p': return v === null ? '-' : v < 0.001 ? '<0.001' : v.toFixed(3);
      case 'pair': return v[0];
      default: return v === null || v === undefined ? '' : String(v);
    }
  }
  function sortKey(type, v) {
    if (type === 'pair') return v[1] === null ? -Infinity : v[1];
    if (type === 'text' || type === 'verdict') return String(v).toLowerCase();
    return v === null || v === undefined ? -Infinity : v;
  }

  function Table(root, spec) {
    this.spec = spec;
    this.sortCol = -1;
    this.desc = true;
    this.filter = '';
    var self = this, bar = el('div', 'toolbar');
    this.input = el('input');
    this.input.type = 'search';
    this.input.placeholder = 'filter ' + spec.title.toLowerCase() + '\u2026';
    this.input.className = 'table-filter';
    this.input.setAttribute('data-table', spec.id);
    this.input.addEventListener('input', function () { self.filter = self.input.value.toLowerCase(); self.render(); });
    bar.appendChild(this.input);
    this.count = el('span', 'note');
    bar.appendChild(this.count);
    root.appendChild(bar);
    if (spec.shown < spec.total)
      root.appendChild(el('p', 'note', 'This view has ' + fmt.int(spec.total) + ' rows: the top ' +
        fmt.int(spec.shown) + ' by GPU time are in the page (kprof report --format csv has all of them).'));
    var wrap = el('div', 'table-wrap'), table = el('table');
    table.id = 'table-' + spec.id;
    table.className = 'kprof-table';
    var head = el('thead'), tr = el('tr');
    this.ths = spec.columns.map(function (c, i) {
      var th = el('th', c.type === 'text' || c.type === 'verdict' ? 'text' : null, c.label);
      th.title = 'sort by ' + c.label;
      th.addEventListener('click', function () { self.sort(i); });
      tr.appendChild(th);
      return th;
    });
    head.appendChild(tr);
    table.appendChild(head);
    this.body = el('tbody');
    table.appendChild(this.body);
    wrap.appendChild(table);
    root.appendChild(wrap);
    this.rows = spec.rows.slice();
    this.render();
  }
  Table.prototype.sort = function (i) {
    var type = this.spec.columns[i].type;
    if (this.sortCol === i) this.desc = !this.desc;
    else this.desc = !(type === 'text' || type === 'verdict');
    this.sortCol = i;
    var dir = this.desc ? -1 : 1;
    this.rows.sort(function (a, b) {
      var x = sortKey(type, a[i]), y = sortKey(type, b[i]);
      return x < y ? -dir : x > y ? dir : 0;
    });
    var self = this;
    this.ths.forEach(function (th, j) {
      th.classList.toggle('sorted-asc', j === i && !self.desc);
      th.classList.toggle('sorted-desc', j === i && self.desc);
    });
    this.render();
  };
  Table.prototype.render = function () {
    var cols = this.spec.columns, f = this.filter, body = this.body, shown = 0;
    var frag = doc.createDocumentFragment();
    for (var r = 0; r < this.rows.length; r++) {
      var row = this.rows[r];
      if (f) {
        var hit = false;
        for (var c = 0; c < cols.length && !hit; c++)
          if (cols[c].type === 'text' && String(row[c]).toLowerCase().indexOf(f) >= 0) hit = true;
        if (!hit) continue;
      }
      var tr = el('tr');
      for (var k = 0; k < cols.length; k++) {
        var type = cols[k].type, td = el('td', type === 'text' ? 'text' : null, cellText(type, row[k]));
        if (type === 'verdict') td.className = 'v-' + row[k];
        if (type === 'text') td.title = String(row[k]).slice(0, 2000);
        tr.appendChild(td);
      }
      frag.appendChild(tr);
      shown++;
    }
    while (body.firstChild) body.removeChild(body.firstChild);
    body.appendChild(frag);
    this.count.textContent = shown + ' of ' + this.rows.length + ' rows';
  };

  function tabbedTables(root, tables) {
    var tabs = el('div', 'tabs'), holder = el('div'), buttons = [];
    root.appendChild(tabs);
    root.appendChild(holder);
    function show(i) {
      buttons.forEach(function (b, j) { b.classList.toggle('on', i === j); });
      while (holder.firstChild) holder.removeChild(holder.firstChild);
      var t = tables[i];
      if (t.unavailable) holder.appendChild(el('p', 'empty', t.unavailable));
      else new Table(holder, t);
    }
    tables.forEach(function (t, i) {
      var b = el('button', null, t.title + (t.unavailable ? '' : ' (' + fmt.int(t.total) + ')'));
      b.id = 'tab-' + t.id;
      b.addEventListener('click', function () { show(i); });
      tabs.appendChild(b);
      buttons.push(b);
    });
    show(0);
  }

  // ---- Charts --------------------------------------------------------------------------------

  var SERIES = ['#2f6fd0', '#e15759', '#59a14f', '#f28e2b', '#b07aa1', '#76b7b2', '#9c755f', '#edc948'];

  function chartCanvas(root, id, title) {
    var box = el('div', 'chart');
    box.appendChild(el('h3', null, title));
    var c = el('canvas');
    c.id = id;
    box.appendChild(c);
    var legend = el('div', 'legend');
    box.appendChild(legend);
    root.appendChild(box);
    return { canvas: c, legend: legend };
  }

  // A chart's canvas sized to its box at height H (CSS pixels), cleared: its context and width.
  function clearCanvas(c, H) {
    var dpr = window.devicePixelRatio || 1, W = c.canvas.clientWidth || 600;
    c.canvas.width = Math.round(W * dpr);
    c.canvas.height = Math.round(H * dpr);
    var ctx = c.canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, W, H);
    return { ctx: ctx, W: W };
  }

  // A chart's frame at height H: the canvas cleared, the y axis (0 to ymax in four steps, with
  // grid lines when `grid`) and the time axis labelled; the plot's geometry and context.
  function chartFrame(c, H, span, ymax, yfmt, grid) {
    var cv = clearCanvas(c, H), ctx = cv.ctx, L = 78, T = 10, B = 26;
    var f = { ctx: ctx, L: L, T: T, pw: cv.W - L - 12, ph: H - T - B, ymax: ymax };
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.strokeStyle = '#e3e7ee';
    ctx.fillStyle = '#5b6576';
    for (var g = 0; g <= 4 && grid; g++) {
      var gy = T + f.ph - g / 4 * f.ph;
      ctx.beginPath(); ctx.moveTo(L, gy + 0.5); ctx.lineTo(L + f.pw, gy + 0.5); ctx.stroke();
      ctx.textAlign = 'right';
      ctx.fillText(yfmt(ymax * g / 4), L - 6, gy);
    }
    for (var xt = 0; xt <= 4; xt++) {
      ctx.textAlign = xt === 0 ? 'left' : xt === 4 ? 'right' : 'center';
      ctx.fillText(fmt.dur(span * xt / 4), L + f.pw * xt / 4, H - B / 2 + 2);
    }
    ctx.textAlign = 'left';
    f.x = function (t) { return L + t / span * f.pw; };
    f.y = function (v) { return T + f.ph - Math.min(1, v / ymax) * f.ph; };
    return f;
  }

  // Draws series of (x, y) points; step: hold each value until the next point.
  function drawChart(c, span, ymax, yfmt, series, step, empty) {
    var f = chartFrame(c, 220, span, ymax, yfmt, series.length > 0), ctx = f.ctx;
    var L = f.L, T = f.T, pw = f.pw, ph = f.ph;
    if (!series.length) {
      ctx.fillStyle = '#5b6576';
      ctx.font = 'italic 13px system-ui, sans-serif';
      ctx.fillText(empty, L + 12, T + ph / 2);
      c.canvas.setAttribute('data-series', '0');
      return;
    }
    series.forEach(function (s, i) {
      var color = SERIES[i % SERIES.length];
      ctx.strokeStyle = color;
      ctx.fillStyle = color + '33';
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      ctx.moveTo(L, T + ph);
      var lastY = T + ph;
      for (var k = 0; k < s.x.length; k++) {
        var x = f.x(s.x[k]), y = f.y(s.y[k]);
        if (step) ctx.lineTo(x, lastY);
        ctx.lineTo(x, y);
        lastY = y;
      }
      if (step) ctx.lineTo(L + pw, lastY);
      ctx.stroke();
      ctx.lineTo(step ? L + pw : f.x(s.x[s.x.length - 1]), T + ph);
      ctx.closePath();
      ctx.fill();
      var item = el('span', null, s.label);
      item.style.setProperty('--c', color);
      c.legend.appendChild(item);
    });
    c.canvas.setAttribute('data-series', String(series.length));
  }

  // The memory axis: four steps of a power of two (0, 128, 256, 384, 512 MiB; 0, 2, 4, 6, 8 B),
  // so that every label is exact and the peak sits below the top.
  function memoryTop(peak) {
    return 4 * Math.pow(2, Math.max(0, Math.ceil(Math.log2(Math.max(1, peak * 1.05) / 4))));
  }

  function charts(root, data) {
    var tl = data.timeline, grid = el('div', 'charts'), owners = data.memory_by_owner || [];
    root.appendChild(grid);
    var u = chartCanvas(grid, 'util-canvas', 'GPU utilisation (busy fraction per ' + fmt.dur(data.util.bin_ns) + ')');
    // Runs with the owners of their memory draw it stacked by owner; older ones as a line.
    var m = owners.length ? null : chartCanvas(grid, 'memory-canvas', 'Device memory in use');
    var useries = data.util.devices.map(function (d) {
      var x = [], y = [];
      d.busy.forEach(function (b, i) { x.push((i + 0.5) * data.util.bin_ns); y.push(b / data.util.bin_ns); });
      return { label: d.label, x: x, y: y };
    });
    var peak = 0;
    var mseries = data.memory.devices.map(function (d) {
      d.b.forEach(function (b) { if (b > peak) peak = b; });
      return { label: d.label + (d.reduced ? ' (bin maxima)' : ''), x: d.t, y: d.b };
    });
    function draw() {
      u.legend.textContent = '';
      drawChart(u, tl.span_ns, 1, function (v) { return Math.round(v * 100) + '%'; }, useries, false, 'no GPU activity recorded');
      if (!m) return;
      m.legend.textContent = '';
      drawChart(m, tl.span_ns, memoryTop(peak), fmt.bytes, mseries, true, 'no device allocation recorded');
    }
    draw();
    window.addEventListener('resize', draw);
    owners.forEach(function (s, i) { ownerChart(grid, tl.span_ns, s, 'memory-owner-' + i); });
    if (data.memory_by_owner_total > owners.length)
      grid.appendChild(el('p', 'note', 'Memory by owner: the ' + owners.length + ' highest peaks of ' +
        data.memory_by_owner_total + ' processes and devices.'));
    counterCharts(grid, data);
  }

  // ---- Device memory by owner (docs/html.md): per process and device, the bytes each owner
  // held as stacked areas (the largest owner at the peak at the bottom, "other owners" grey on
  // top), the peak marked; a click shows what was live at the peak.
  var OTHER_OWNERS = '#aab1bd';
  function ownerChart(grid, span, s, id) {
    var c = chartCanvas(grid, id, 'Device memory by owner: ' + s.label);
    var n = s.owners.length, other = false, box = c.canvas.parentNode;
    if (!n) return;
    for (var k = n - 1; k < s.bytes.length; k += n) if (s.bytes[k] > 0) other = true;
    var colors = s.owners.map(function (o, j) { return j === n - 1 ? OTHER_OWNERS : SERIES[j % SERIES.length]; });
    s.owners.forEach(function (o, j) {
      if (j === n - 1 && !other) return;
      var item = el('span', null, o);
      item.style.setProperty('--c', colors[j]);
      c.legend.appendChild(item);
    });
    var detail = el('div', 'mem-peak');
    detail.id = id + '-peak';
    box.appendChild(detail);
    c.canvas.classList.add('clickable');
    c.canvas.title = 'click: what was live at the peak';
    c.canvas.addEventListener('click', function () {
      if (detail.firstChild) { while (detail.firstChild) detail.removeChild(detail.firstChild); return; }
      peakDetail(detail, s);
    });
    var draw = function () { drawStacked(c, span, s, colors); };
    draw();
    window.addEventListener('resize', draw);
  }

  function drawStacked(c, span, s, colors) {
    var f = chartFrame(c, 220, span, memoryTop(s.peak_bytes), fmt.bytes, true), ctx = f.ctx;
    var n = s.owners.length, m = s.t.length, base = f.y(0), right = f.L + f.pw;
    // Painter's order: the area under each owner's running sum, the top layer first; each value
    // holds until the next point.
    for (var j = n - 1; j >= 0; j--) {
      ctx.fillStyle = colors[j];
      ctx.beginPath();
      ctx.moveTo(f.L, base);
      var lastY = base;
      for (var i = 0; i < m; i++) {
        for (var k = 0, sum = 0; k <= j; k++) sum += s.bytes[i * n + k];
        var x = f.x(s.t[i]), y = f.y(sum);
        ctx.lineTo(x, lastY);
        ctx.lineTo(x, y);
        lastY = y;
      }
      ctx.lineTo(right, lastY);
      ctx.lineTo(right, base);
      ctx.closePath();
      ctx.fill();
    }
    var px = Math.round(f.x(s.peak_t)) + 0.5, label = 'peak ' + peakBytes(s.peak_bytes) + ' at ' + fmt.dur(s.peak_t);
    ctx.strokeStyle = '#1d2430';
    ctx.lineWidth = 1;
    ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(px, f.T); ctx.lineTo(px, base); ctx.stroke();
    ctx.setLineDash([]);
    ctx.font = '600 11px system-ui, sans-serif';
    var w = ctx.measureText(label).width, lx = px + 6 + w > right ? px - 6 - w : px + 6;
    ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
    ctx.fillRect(lx - 3, f.T, w + 6, 16);
    ctx.fillStyle = '#1d2430';
    ctx.fillText(label, lx, f.T + 8);
    c.canvas.setAttribute('data-series', String(n));
    c.canvas.setAttribute('data-peak', label);
  }

  function peakBytes(b) { return b >= 1073741824 ? (b / 1073741824).toFixed(2) + ' GiB' : fmt.bytes(b); }

  // What was live at the peak: the owners (PyTorch's categories when joined) with their bytes
  // and share, the rest of the live bytes when the list is cut, then the largest allocations.
  function peakDetail(box, s) {
    var p = s.at_peak;
    if (!p) { box.appendChild(el('p', 'empty', 'The state at the peak was not recorded.')); return; }
    var text = 'At the peak (' + fmt.dur(s.peak_t) + (p.range ? ', in ' + p.range : '') + '): ' +
      peakBytes(p.live_bytes) + ' live' + (p.capacity_bytes ? ' of the GPU\'s ' + fmt.bytes(p.capacity_bytes) : '') +
      (p.owners_by === 'owner' ? '; the caching allocator\'s share by PyTorch\'s categories (' + p.torch_moment + ')' : '');
    box.appendChild(el('p', 'note', text));
    var listed = 0, rows = p.owners.map(function (o) { listed += o.live_bytes; return [o.name, o.live_bytes]; });
    if (p.live_bytes > listed) rows.push(['the rest', p.live_bytes - listed]);
    smallTable(box, ['owner', 'live', 'share'], [1, 0, 0], rows.map(function (r) {
      return [r[0], fmt.bytes(r[1]), p.live_bytes > 0 ? fmt.pct(r[1] / p.live_bytes) : '-'];
    }));
    smallTable(box, ['largest live allocations', 'owner', 'range'], [0, 1, 1], p.largest.map(function (a) {
      return [fmt.bytes(a.bytes), a.owner, a.range || '(no range)'];
    }));
  }

  function smallTable(box, head, text, rows) {
    var table = el('table', 'kprof-table'), tr = el('tr');
    head.forEach(function (h, i) { tr.appendChild(el('th', text[i] ? 'text' : null, h)); });
    table.appendChild(el('thead')).appendChild(tr);
    var body = table.appendChild(el('tbody'));
    rows.forEach(function (r) {
      var row = body.appendChild(el('tr'));
      r.forEach(function (v, i) { row.appendChild(el('td', text[i] ? 'text' : null, v)); });
    });
    box.appendChild(table);
  }

  // Hardware counters (docs/counters.md): PM sampling's tracks, % of peak over time, and the
  // roofline of the replayed kernels (log-log: FLOP per DRAM byte against FLOP/s, under the FP32
  // and DRAM roofs measured with them). Only for runs with counters.
  var BOUND_COLOR = { compute: '#e15759', memory: '#2f6fd0', latency: '#59a14f', mixed: '#b07aa1' };
  function counterCharts(grid, data) {
    var cs = data.counters, tl = data.timeline;
    if (!cs) return;
    if (cs.tracks.length) {
      var k = chartCanvas(grid, 'counters-canvas', 'Hardware counters (PM sampling, % of peak)');
      var kseries = cs.tracks.map(function (t) {
        return { label: t.label + (t.reduced ? ' (bin means)' : ''), x: t.t, y: t.v };
      });
      var drawCounters = function () {
        k.legend.textContent = '';
        drawChart(k, tl.span_ns, 100, function (v) { return Math.round(v) + '%'; }, kseries, true, '');
      };
      drawCounters();
      window.addEventListener('resize', drawCounters);
    }
    if (cs.unmeasured && cs.unmeasured.length) {
      var box = el('div', 'chart');
      box.id = 'counters-unmeasured';
      box.appendChild(el('h3', null, 'Kernels the counters did not measure'));
      var ul = el('ul');
      cs.unmeasured.forEach(function (u) {
        ul.appendChild(el('li', null, u.name + ' (' + (100 * u.share).toFixed(1) +
          '% of kernel time, ' + u.launches + ' launches): ' + u.why));
      });
      box.appendChild(ul);
      grid.appendChild(box);
    }
    var roof = cs.roofline;
    if (roof.points.length && roof.peak_flops_per_s && roof.peak_dram_bytes_per_s) {
      var r = chartCanvas(grid, 'roofline-canvas', 'Roofline (replayed kernels; FP32 and DRAM roofs)');
      var drawRoof = function () { r.legend.textContent = ''; drawRoofline(r, roof); };
      drawRoof();
      window.addEventListener('resize', drawRoof);
    }
  }

  function drawRoofline(c, roof) {
    var H = 260, cv = clearCanvas(c, H), ctx = cv.ctx, W = cv.W;
    var L = 78, R = 12, T = 10, B = 30, pw = W - L - R, ph = H - T - B;
    var pf = roof.peak_flops_per_s, pb = roof.peak_dram_bytes_per_s, ridge = pf / pb;
    var xs = roof.points.map(function (p) { return p.intensity; }).concat([ridge]);
    var ys = roof.points.map(function (p) { return p.flops_per_s; }).concat([pf]);
    var x0 = Math.floor(Math.log10(Math.min.apply(null, xs))) - 1, x1 = Math.ceil(Math.log10(Math.max.apply(null, xs))) + 1;
    var y0 = Math.floor(Math.log10(Math.min.apply(null, ys))) - 1, y1 = Math.ceil(Math.log10(pf)) + 1;
    function px(v) { return L + (Math.log10(v) - x0) / (x1 - x0) * pw; }
    function py(v) { return T + ph - (Math.log10(v) - y0) / (y1 - y0) * ph; }
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.strokeStyle = '#e3e7ee';
    ctx.fillStyle = '#5b6576';
    for (var e = y0; e <= y1; e++) {
      var gy = py(Math.pow(10, e));
      ctx.beginPath(); ctx.moveTo(L, gy + 0.5); ctx.lineTo(L + pw, gy + 0.5); ctx.stroke();
      ctx.textAlign = 'right';
      ctx.fillText('1e' + e + ' FLOP/s', L - 6, gy);
    }
    for (var f = x0; f <= x1; f++) {
      ctx.textAlign = 'center';
      ctx.fillText('1e' + f, px(Math.pow(10, f)), H - B / 2 + 4);
    }
    // The roofs: bandwidth-bound up to the ridge, compute-bound after it.
    ctx.strokeStyle = '#1f2430';
    ctx.lineWidth = 2;
    ctx.beginPath();
    var xa = Math.pow(10, x0);
    ctx.moveTo(px(xa), py(Math.max(xa * pb, Math.pow(10, y0))));
    ctx.lineTo(px(ridge), py(pf));
    ctx.lineTo(px(Math.pow(10, x1)), py(pf));
    ctx.stroke();
    roof.points.forEach(function (p) {
      ctx.fillStyle = BOUND_COLOR[p.bound] || '#5b6576';
      ctx.beginPath();
      ctx.arc(px(p.intensity), py(p.flops_per_s), 5, 0, 2 * Math.PI);
      ctx.fill();
      var item = el('span', null, p.name + ' (' + (p.bound || '?') + ', ' + p.intensity.toPrecision(3) + ' FLOP/B)');
      item.style.setProperty('--c', BOUND_COLOR[p.bound] || '#5b6576');
      c.legend.appendChild(item);
    });
    c.canvas.setAttribute('data-series', String(roof.points.length));
  }

  // ---- The report page ----------------------------------------------------------------------

  function hints(root, list, joint) {
    if (!list.length) { root.appendChild(el('p', 'empty', 'No hint: no rule found a bottleneck in this run.')); return; }
    if (joint && joint.hints > 1) {
      var text = 'If every hint were fixed: up to ' + fmt.dur(joint.est_saving_ns) + ' (' + joint.est_saving_pct.toFixed(1) + '% of the ' + fmt.dur(joint.base_ns) + ' steady state)';
      if (joint.sum_est_saving_ns > joint.est_saving_ns)
        text += '; the ' + joint.hints + ' estimates add up to ' + fmt.dur(joint.sum_est_saving_ns) + ', ' +
          fmt.dur(joint.sum_est_saving_ns - joint.est_saving_ns) + ' of it the same time counted twice';
      var p = el('p', 'joint', text);
      p.id = 'joint-saving';
      root.appendChild(p);
    }
    list.forEach(function (h) {
      var box = el('div', 'hint ' + h.severity);
      box.setAttribute('data-hint-id', h.id);
      var head = el('div', 'head');
      head.appendChild(el('span', 'sev', h.severity));
      head.appendChild(el('span', 'title', h.summary));
      head.appendChild(el('span', 'id', h.id));
      if (h.est_saving_ns > 0)
        head.appendChild(el('span', 'saving', 'saves up to ' + fmt.dur(h.est_saving_ns) + ' (' + h.est_saving_pct.toFixed(1) + '% of the steady state)'));
      if (h.est_saving_bytes > 0)  // the memory rules price device memory
        head.appendChild(el('span', 'saving', 'saves up to ' + fmt.bytes(h.est_saving_bytes) + ' of device memory (' + h.est_saving_bytes_pct.toFixed(1) + '% of the peak)'));
      box.appendChild(head);
      if (h.evidence.length) {
        var ul = el('ul');
        h.evidence.forEach(function (e) { ul.appendChild(el('li', null, e)); });
        box.appendChild(ul);
      }
      if (h.assumption) box.appendChild(el('p', 'note', 'Estimate: ' + h.assumption));
      [['CUDA', h.fix_cuda], ['PyTorch', h.fix_pytorch]].forEach(function (f) {
        if (!f[1]) return;
        var p = el('p', 'fix');
        p.appendChild(el('b', null, 'Fix (' + f[0] + '): '));
        p.appendChild(doc.createTextNode(f[1]));
        box.appendChild(p);
      });
      root.appendChild(box);
    });
  }

  function summary(root, run) {
    var grid = el('div', 'totals');
    grid.id = 'totals';
    run.totals.forEach(function (kv) { grid.appendChild(el('div', 'k', kv[0])); grid.appendChild(el('div', 'v', kv[1])); });
    root.appendChild(grid);
    var devs = run.devices.map(function (d) {
      return 'dev ' + d.id + ' ' + d.name + ' (' + d.sm_count + ' SMs, ' + fmt.bytes(d.memory_bytes) + ', cc ' + d.compute_capability + ')';
    });
    if (devs.length) root.appendChild(el('p', 'note', 'Devices: ' + devs.join('; ')));
    var procs = run.process_list.map(function (p) {
      return (p.rank >= 0 ? 'rank ' + p.rank + ' ' : '') + 'pid ' + p.pid + ' ' + p.source + (p.complete ? '' : ' (incomplete)');
    });
    if (procs.length) root.appendChild(el('p', 'note', 'Processes: ' + procs.join('; ')));
  }

  function timelineNote(root, data) {
    var tl = data.timeline, k = 0, ks = 0, a = 0, as = 0, r = 0, rs = 0;
    tl.gpu.forEach(function (t) { k += t.kernels; ks += t.kernels_shown; a += t.total; as += t.shown; });
    tl.cpu.forEach(function (t) { r += t.total; rs += t.shown; });
    var p = el('p', 'note');
    p.id = 'timeline-limits';
    var text = 'Showing ' + fmt.int(ks) + ' of ' + fmt.int(k) + ' kernels individually (' + fmt.int(as) + ' of ' +
      fmt.int(a) + ' GPU activities) and ' + fmt.int(rs) + ' of ' + fmt.int(r) + ' NVTX ranges';
    if (as < a || rs < r)
      text += '; the rest as busy density per ' + fmt.dur(tl.bin_ns) + ' bin (the page draws at most ' +
        fmt.int(tl.max_slices) + ' GPU activities and ' + fmt.int(tl.max_ranges) + ' ranges in full: the longest ones).';
    else
      text += ' (limits: ' + fmt.int(tl.max_slices) + ' GPU activities, ' + fmt.int(tl.max_ranges) + ' ranges in full detail).';
    p.textContent = text;
    root.appendChild(p);
    if (!a && !r) root.appendChild(el('p', 'empty', 'No GPU activity or NVTX range recorded.'));
  }

  function reportPage(data) {
    hints(panel('hints', 'Hints (' + data.hints.length + ')'), data.hints, data.joint_saving);
    summary(panel('summary', 'Run summary'), data.run);
    var tlp = panel('timeline', 'Timeline');
    timelineNote(tlp, data);
    window.kprofTimeline = KprofTimeline.create(tlp, data);
    charts(panel('charts', 'Utilisation and memory'), data);
    tabbedTables(panel('tables', 'Tables'), data.tables);
  }

  // ---- The diff page -------------------------------------------------------------------------

  function diffPage(data) {
    var v = panel('verdict', 'Verdict');
    var head = el('p', 'verdict ' + data.result, data.result === 'regression' ? 'REGRESSION' : 'pass');
    head.id = 'diff-result';
    v.appendChild(head);
    var c = data.counts, parts = [];
    ['regression', 'improvement', 'changed', 'added', 'removed'].forEach(function (k) { if (c[k]) parts.push(c[k] + ' ' + k); });
    v.appendChild(el('p', null, parts.length ? parts.join(', ') : 'no change'));
    v.appendChild(el('p', 'note', data.mode_note));
    v.appendChild(el('p', 'note', 'Base (' + data.base_runs + ' runs): ' + data.base.join(', ')));
    v.appendChild(el('p', 'note', 'New (' + data.new_runs + ' runs): ' + data.new.join(', ')));
    data.warnings.forEach(function (w) { v.appendChild(el('p', 'note', 'warning: ' + w)); });
    data.tables.forEach(function (t) {
      var p = panel('diff-' + t.id, t.title + ' (' + t.total + ')');
      new Table(p, t);
    });
    var h = panel('diff-hints', 'Hints that changed (' + data.hints.length + ')');
    if (!data.hints.length) h.appendChild(el('p', 'empty', 'The same hints on both sides.'));
    data.hints.forEach(function (x) {
      var box = el('div', 'hint ' + x.severity);
      box.setAttribute('data-hint-id', x.id);
      var hd = el('div', 'head');
      hd.appendChild(el('span', 'sev', x.change));
      hd.appendChild(el('span', 'title', x.summary));
      hd.appendChild(el('span', 'id', x.id + ' (' + x.severity + ')'));
      box.appendChild(hd);
      h.appendChild(box);
    });
  }

  var data = JSON.parse(doc.getElementById('kprof-data').textContent);
  if (data.title) doc.title = data.title;
  if (data.kind === 'diff') diffPage(data);
  else reportPage(data);
  doc.getElementById('footer').textContent = 'Written by ' + data.generator +
    '. This page is self-contained: it loads nothing from the network.';
  doc.body.setAttribute('data-ready-ms', performance.now().toFixed(1));
  doc.body.setAttribute('data-kprof-ready', '1');
})();

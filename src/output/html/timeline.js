// kprof HTML report: value formatting shared by the page, and the timeline (a <canvas> of GPU
// tracks per process, device and stream, and NVTX tracks per CPU thread). Data only ever reaches
// the page through canvas fillText and textContent.
'use strict';

var kprofFmt = (function () {
  function fixed(v, d) { return v.toFixed(d); }
  function dur(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return '-';
    var a = Math.abs(ns);
    if (a < 1000) return Math.round(ns) + ' ns';
    if (a < 1e6) return fixed(ns / 1e3, 2) + ' us';
    if (a < 1e9) return fixed(ns / 1e6, 2) + ' ms';
    return fixed(ns / 1e9, 3) + ' s';
  }
  function bytes(b) {
    if (b === null || b === undefined || !isFinite(b)) return '-';
    var a = Math.abs(b), sign = b < 0 ? '-' : '';
    if (a < 1024) return sign + Math.round(a) + ' B';
    var units = ['KiB', 'MiB', 'GiB', 'TiB'], v = a / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return sign + fixed(v, 1) + ' ' + units[i];
  }
  function int(v) {
    if (v === null || v === undefined || !isFinite(v)) return '-';
    return Math.round(v).toLocaleString('en-US');
  }
  function pct(f) {
    if (f === null || f === undefined) return 'new';
    if (!isFinite(f)) return 'new';
    return fixed(f * 100, 1) + '%';
  }
  return { dur: dur, bytes: bytes, int: int, pct: pct };
})();

var KprofTimeline = (function () {
  var LABEL_W = 230, AXIS_H = 26, ROW = 16, DENS = 10, HEAD = 20, GAP = 3, MAX_DEPTH = 12;
  var KERNEL_COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2', '#edc948',
    '#e15759', '#9c755f', '#5b8fd1', '#8cc084', '#d37295', '#a0cbe8'];
  var RANGE_COLORS = ['#c9d7ee', '#f6d7b4', '#cfe5c8', '#e3d3e7', '#cde8e6', '#f5e7b3',
    '#f3c4c5', '#e0d3c8'];
  var KIND_COLORS = { 1: '#d65f5f', 2: '#8c8c8c' };  // memcpy, memset

  function hash(str) {
    var h = 2166136261;
    for (var i = 0; i < str.length; i++) { h ^= str.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }

  function lowerBound(a, v) {
    var lo = 0, hi = a.length;
    while (lo < hi) { var mid = (lo + hi) >>> 1; if (a[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }

  // Decodes one track: start deltas to absolute starts, ends, and the longest duration (the
  // binary search starts that far before the view).
  function decode(t) {
    var n = t.s.length, s = new Float64Array(n), e = new Float64Array(n);
    var at = 0, maxDur = 0;
    for (var i = 0; i < n; i++) {
      at += t.s[i]; s[i] = at; e[i] = at + t.d[i];
      if (t.d[i] > maxDur) maxDur = t.d[i];
    }
    var depth = t.type === 'cpu' ? Math.min(t.depth, MAX_DEPTH) : 1;
    return { src: t, label: t.label, gpu: t.type === 'gpu', s: s, e: e, n: t.n, l: t.l || null,
      maxDur: maxDur, rows: depth, bins: t.bins, y: 0, h: 0 };
  }

  function Timeline(root, data) {
    this.root = root;
    this.data = data;
    this.tl = data.timeline;
    this.span = this.tl.span_ns;
    var self = this;
    this.names = this.tl.names;
    this.colors = this.names.map(function (name, i) {
      var k = self.tl.name_kinds[i];
      if (KIND_COLORS[k]) return KIND_COLORS[k];
      var h = hash(name);
      return k === 3 ? RANGE_COLORS[h % RANGE_COLORS.length] : KERNEL_COLORS[h % KERNEL_COLORS.length];
    });
    this.gpu = this.tl.gpu.map(decode);
    this.cpu = this.tl.cpu.map(decode);
    this.v0 = 0;
    this.v1 = this.span;
    this.layout();
    this.build();
    this.draw();
  }

  Timeline.prototype.layout = function () {
    var y = AXIS_H;
    function place(list) {
      list.forEach(function (t) {
        t.y = y;
        t.h = t.rows * ROW + (t.bins ? DENS : 0);
        y += t.h + GAP;
      });
    }
    this.gpuHead = y; y += HEAD; place(this.gpu);
    this.cpuHead = this.cpu.length ? y : -1;
    if (this.cpu.length) { y += HEAD; place(this.cpu); }
    this.height = y + 4;
  };

  Timeline.prototype.build = function () {
    var self = this, doc = document;
    var bar = doc.createElement('div');
    bar.className = 'toolbar';
    function button(id, text, title, fn) {
      var b = doc.createElement('button');
      b.id = id; b.textContent = text; b.title = title;
      b.addEventListener('click', fn);
      bar.appendChild(b);
      return b;
    }
    button('tl-zoom-in', 'Zoom in', 'Zoom in around the centre (or: mouse wheel)', function () { self.zoom(0.5); });
    button('tl-zoom-out', 'Zoom out', 'Zoom out around the centre', function () { self.zoom(2); });
    button('tl-reset', 'Reset', 'Show the whole run', function () { self.reset(); });
    var info = doc.createElement('span');
    info.className = 'note';
    info.id = 'tl-range';
    bar.appendChild(info);
    this.info = info;
    this.root.appendChild(bar);
    var wrap = doc.createElement('div');
    wrap.className = 'tl-wrap';
    var canvas = doc.createElement('canvas');
    canvas.id = 'timeline-canvas';
    wrap.appendChild(canvas);
    var tip = doc.createElement('div');
    tip.className = 'tooltip';
    tip.id = 'tl-tooltip';
    wrap.appendChild(tip);
    this.root.appendChild(wrap);
    this.canvas = canvas; this.tip = tip; this.wrap = wrap;
    this.resize();
    window.addEventListener('resize', function () { self.resize(); self.draw(); });
    canvas.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      var f = Math.exp(Math.max(-1, Math.min(1, ev.deltaY * 0.0015)));
      self.zoom(f, self.timeAt(ev.offsetX));
    }, { passive: false });
    var drag = null;
    canvas.addEventListener('mousedown', function (ev) {
      drag = { x: ev.clientX, v0: self.v0, v1: self.v1 };
      canvas.classList.add('drag');
    });
    window.addEventListener('mouseup', function () { drag = null; canvas.classList.remove('drag'); });
    window.addEventListener('mousemove', function (ev) {
      if (!drag) return;
      var dt = (ev.clientX - drag.x) * (drag.v1 - drag.v0) / self.plotW();
      self.setView(drag.v0 - dt, drag.v1 - dt);
    });
    canvas.addEventListener('mousemove', function (ev) { if (!drag) self.hover(ev.offsetX, ev.offsetY); });
    canvas.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  };

  Timeline.prototype.resize = function () {
    var dpr = window.devicePixelRatio || 1;
    this.W = Math.max(600, this.wrap.clientWidth || 1200);
    this.canvas.style.width = this.W + 'px';
    this.canvas.style.height = this.height + 'px';
    this.canvas.width = Math.round(this.W * dpr);
    this.canvas.height = Math.round(this.height * dpr);
    this.ctx = this.canvas.getContext('2d');
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  };

  Timeline.prototype.plotW = function () { return this.W - LABEL_W; };
  Timeline.prototype.timeAt = function (x) {
    return this.v0 + (x - LABEL_W) * (this.v1 - this.v0) / this.plotW();
  };

  Timeline.prototype.setView = function (a, b) {
    var w = Math.max(100, Math.min(b - a, this.span * 1.05));
    if (a < -0.025 * this.span) a = -0.025 * this.span;
    if (a + w > this.span * 1.025) a = this.span * 1.025 - w;
    this.v0 = a; this.v1 = a + w;
    this.draw();
  };
  Timeline.prototype.zoom = function (f, at) {
    if (at === undefined) at = (this.v0 + this.v1) / 2;
    this.setView(at - (at - this.v0) * f, at + (this.v1 - at) * f);
  };
  Timeline.prototype.reset = function () { this.v0 = 0; this.v1 = this.span; this.draw(); };

  Timeline.prototype.drawAxis = function (ctx) {
    var W = this.W, pw = this.plotW(), span = this.v1 - this.v0;
    ctx.fillStyle = '#eef2f7';
    ctx.fillRect(0, 0, W, AXIS_H);
    var raw = span / Math.max(1, pw / 110), p = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = raw / p < 2 ? 2 * p : raw / p < 5 ? 5 * p : 10 * p;
    ctx.strokeStyle = '#e3e7ee';
    ctx.fillStyle = '#5b6576';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (var t = Math.ceil(this.v0 / step) * step; t <= this.v1; t += step) {
      var x = LABEL_W + (t - this.v0) / span * pw;
      if (x > W - 60) break;  // no label cut by the right edge
      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS_H - 6); ctx.lineTo(x + 0.5, this.height); ctx.stroke();
      ctx.fillText(kprofFmt.dur(t), x + 3, AXIS_H / 2);
    }
  };

  function clipText(ctx, text, w) {
    if (w < 14) return '';
    var max = Math.floor((w - 6) / 6.2);
    return text.length > max ? text.slice(0, Math.max(0, max - 1)) + '\u2026' : text;
  }

  Timeline.prototype.drawTrack = function (ctx, t) {
    var v0 = this.v0, v1 = this.v1, k = this.plotW() / (v1 - v0), W = this.W;
    var s = t.s, e = t.e, n = t.n, l = t.l, colors = this.colors, names = this.names;
    var lastX = new Float64Array(t.rows).fill(-1);
    var i = lowerBound(s, v0 - t.maxDur), count = s.length;
    ctx.font = '10.5px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (; i < count; i++) {
      var st = s[i];
      if (st > v1) break;
      var en = e[i];
      if (en < v0) continue;
      var d = l ? l[i] : 0;
      if (d >= t.rows) continue;
      var x0 = LABEL_W + (st - v0) * k, x1 = LABEL_W + (en - v0) * k;
      if (x0 < LABEL_W) x0 = LABEL_W;
      if (x1 > W) x1 = W;
      var y = t.y + d * ROW;
      if (x1 - x0 < 1) {
        // Sub-pixel items: one pixel column per track row, whatever lands in it.
        var px = Math.floor(x0);
        if (px <= lastX[d]) continue;
        lastX[d] = px;
        ctx.fillStyle = colors[n[i]];
        ctx.fillRect(px, y + 1, 1, ROW - 2);
        continue;
      }
      lastX[d] = Math.floor(x1);
      ctx.fillStyle = colors[n[i]];
      ctx.fillRect(x0, y + 1, x1 - x0, ROW - 2);
      if (x1 - x0 > 40) {
        ctx.fillStyle = t.gpu ? '#ffffff' : '#1d2430';
        ctx.fillText(clipText(ctx, names[n[i]], x1 - x0), x0 + 3, y + ROW / 2);
      }
    }
    if (t.bins) this.drawBins(ctx, t);
  };

  // The density lane: per pixel column, the busiest bin's busy fraction as the bar height.
  Timeline.prototype.drawBins = function (ctx, t) {
    var bin = this.tl.bin_ns, busy = t.bins.busy, pw = this.plotW(), span = this.v1 - this.v0;
    var y = t.y + t.rows * ROW, b0 = Math.max(0, Math.floor(this.v0 / bin));
    var b1 = Math.min(busy.length - 1, Math.floor(this.v1 / bin));
    ctx.fillStyle = '#f1f3f7';
    ctx.fillRect(LABEL_W, y, pw, DENS);
    ctx.fillStyle = t.gpu ? '#3d6fb6' : '#8b7bb5';
    var col = -1, best = 0;
    for (var b = b0; b <= b1 + 1; b++) {
      var x = b <= b1 ? Math.floor(LABEL_W + (b * bin - this.v0) / span * pw) : -2;
      if (x !== col || b > b1) {
        if (col >= 0 && best > 0) {
          var w = Math.max(1, Math.ceil(bin / span * pw));
          var h = Math.max(1, Math.min(1, best) * (DENS - 1));
          var cx = Math.max(LABEL_W, col);
          ctx.fillRect(cx, y + DENS - h, Math.min(w, this.W - cx), h);
        }
        col = x; best = 0;
      }
      if (b <= b1) best = Math.max(best, busy[b] / bin);
    }
  };

  Timeline.prototype.drawLabels = function (ctx, list, head, title) {
    ctx.fillStyle = '#e9edf3';
    ctx.fillRect(0, head, this.W, HEAD);
    ctx.fillStyle = '#1d2430';
    ctx.font = '600 12px system-ui, sans-serif';
    ctx.fillText(title, 8, head + HEAD / 2);
    ctx.font = '11px system-ui, sans-serif';
    for (var i = 0; i < list.length; i++) {
      var t = list[i];
      ctx.fillStyle = '#ffffff';
      ctx.fillRect(0, t.y, LABEL_W - 4, t.h);
      ctx.fillStyle = '#1d2430';
      ctx.fillText(clipText(ctx, t.label, LABEL_W - 10), 6, t.y + ROW / 2);
      if (t.bins) {
        ctx.fillStyle = '#5b6576';
        ctx.fillText('density (past the limit)', 6, t.y + t.rows * ROW + DENS / 2);
      }
    }
  };

  Timeline.prototype.draw = function () {
    var t0 = performance.now(), ctx = this.ctx, self = this;
    ctx.clearRect(0, 0, this.W, this.height);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, this.W, this.height);
    this.drawAxis(ctx);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL_W, AXIS_H, this.plotW(), this.height - AXIS_H);
    ctx.clip();
    this.gpu.forEach(function (t) { self.drawTrack(ctx, t); });
    this.cpu.forEach(function (t) { self.drawTrack(ctx, t); });
    ctx.restore();
    this.drawLabels(ctx, this.gpu, this.gpuHead, 'GPU: kernels, copies, memsets per device and stream');
    if (this.cpu.length) this.drawLabels(ctx, this.cpu, this.cpuHead, 'NVTX ranges per CPU thread');
    var ms = performance.now() - t0;
    this.canvas.setAttribute('data-draw-ms', ms.toFixed(2));
    this.canvas.setAttribute('data-view', Math.round(this.v0) + ',' + Math.round(this.v1));
    this.draws = (this.draws || 0) + 1;
    this.canvas.setAttribute('data-draws', String(this.draws));
    this.info.textContent = 'showing ' + kprofFmt.dur(Math.max(0, this.v0)) + ' to ' +
      kprofFmt.dur(Math.min(this.span, this.v1)) + ' of ' + kprofFmt.dur(this.span) +
      ' \u00b7 drag to pan, wheel to zoom \u00b7 drawn in ' + ms.toFixed(1) + ' ms';
  };

  Timeline.prototype.find = function (x, y) {
    var list = this.gpu.concat(this.cpu), t = null;
    for (var i = 0; i < list.length; i++)
      if (y >= list[i].y && y < list[i].y + list[i].h) { t = list[i]; break; }
    if (!t || x < LABEL_W) return null;
    var time = this.timeAt(x), tol = 2 * (this.v1 - this.v0) / this.plotW();
    var row = Math.floor((y - t.y) / ROW);
    if (row >= t.rows) {
      var b = Math.floor(time / this.tl.bin_ns);
      if (b < 0 || b >= t.bins.busy.length) return null;
      return { track: t, bin: b };
    }
    var best = -1;
    for (var j = lowerBound(t.s, time - tol - t.maxDur); j < t.s.length && t.s[j] <= time + tol; j++) {
      if (t.e[j] + tol < time || (t.l ? t.l[j] : 0) !== row) continue;
      if (best < 0 || t.e[j] - t.s[j] < t.e[best] - t.s[best]) best = j;
    }
    return best < 0 ? null : { track: t, index: best };
  };

  Timeline.prototype.hover = function (x, y) {
    var hit = this.find(x, y), tip = this.tip;
    if (!hit) { tip.style.display = 'none'; return; }
    while (tip.firstChild) tip.removeChild(tip.firstChild);
    function line(text, cls) {
      var d = document.createElement('div');
      if (cls) d.className = cls;
      d.textContent = text;
      tip.appendChild(d);
    }
    var t = hit.track;
    if (hit.bin !== undefined) {
      var bin = this.tl.bin_ns;
      line(t.bins.count[hit.bin] + ' items past the detail limit', 'tt-name');
      line('busy ' + kprofFmt.pct(t.bins.busy[hit.bin] / bin) + ' of ' + kprofFmt.dur(bin));
      line('from ' + kprofFmt.dur(hit.bin * bin));
    } else {
      var i = hit.index;
      line(this.names[t.n[i]], 'tt-name');
      line('duration ' + kprofFmt.dur(t.e[i] - t.s[i]));
      line('start ' + kprofFmt.dur(t.s[i]) + ' after the run began');
    }
    line(t.label);
    tip.style.display = 'block';
    var left = Math.min(x + 14, this.W - 330);
    tip.style.left = Math.max(0, left) + 'px';
    tip.style.top = (y + 14) + 'px';
  };

  return { create: function (root, data) { return new Timeline(root, data); }, hash: hash };
})();

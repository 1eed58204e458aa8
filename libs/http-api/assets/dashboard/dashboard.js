// lateral operations dashboard: polls GET /v1/admin/overview every 2 s and renders it. Plain
// browser JavaScript (no build step); every value from the server is set as text, never as HTML.
/* global Chart */
(function () {
  'use strict';
  var POLL_MS = 2000;
  var STAGES = ['accepted', 'encoded', 'compressed', 'indexed', 'committed'];
  var COLORS = { encode: '#58a6ff', compress: '#a371f7', index: '#3fb950', commit: '#d29922', rerank: '#f778ba', search: '#39c5cf' };
  // Every other queue gets its own colour too (merge, encode-texts, batch, train, webhook, ...): one grey for five series told nothing apart.
  var PALETTE = ['#ff9e64', '#c2e04a', '#e6edf3', '#bf4b8a', '#8d6e63', '#1f6feb', '#ffd8b5', '#6e7681', '#b7f0c0', '#5a3fc0'];
  function colorOf(name, i) { return COLORS[name] || PALETTE[i % PALETTE.length]; }
  // One clock everywhere: 24-hour, as the chart's axis.
  function clock(ms) { var d = new Date(ms); return [d.getHours(), d.getMinutes(), d.getSeconds()].map(function (n) { return String(n).padStart(2, '0'); }).join(':'); }
  // Shard queues (shard-0 ... shard-7) are the fan-out of sharded collections: one range, not eight names.
  function shardRange(queues) {
    var shards = [], rest = [];
    queues.forEach(function (q) { var m = /^shard-(\d+)$/.exec(q); if (m) shards.push(Number(m[1])); else rest.push(q); });
    if (shards.length === 0) return { rest: rest, shards: '' };
    shards.sort(function (a, b) { return a - b; });
    var contiguous = shards[shards.length - 1] - shards[0] === shards.length - 1;
    return { rest: rest, shards: 'shards ' + (contiguous && shards.length > 1 ? shards[0] + '–' + shards[shards.length - 1] : shards.join(', ')) };
  }
  var chart = null;
  var lastAt = 0;
  var manyTenants = false;
  function qualified(tenant, id) { return manyTenants ? tenant + ' / ' + id : id; }

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'className') e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c) e.appendChild(c); });
    return e;
  }
  function td(text, attrs) { var a = attrs || {}; a.text = text === null || text === undefined ? '—' : String(text); return el('td', a); }
  function fmt(n, digits) {
    if (n === null || n === undefined || Number.isNaN(n)) return '—';
    return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits === undefined ? 0 : digits });
  }
  function bytes(n) {
    if (n === null || n === undefined) return '—';
    var u = ['B', 'KB', 'MB', 'GB', 'TB'], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + ' ' + u[i];
  }
  function ago(ms) {
    var s = Math.round(ms / 1000);
    return s < 90 ? s + ' s' : Math.round(s / 60) + ' min';
  }
  function eta(s) {
    if (s === null || s === undefined) return 'ETA —';
    if (s === 0) return 'done';
    return 'ETA ' + (s < 90 ? s + ' s' : s < 5400 ? Math.round(s / 60) + ' min' : (s / 3600).toFixed(1) + ' h');
  }
  function fill(tbody, rows, emptyText, cols) {
    tbody.replaceChildren();
    if (rows.length === 0) tbody.appendChild(el('tr', {}, [el('td', { text: emptyText, className: 'text', colspan: String(cols) })]));
    rows.forEach(function (r) { tbody.appendChild(r); });
  }

  function renderQueues(o) {
    var rows = o.queues.map(function (q) {
      var c = q.counts;
      var last5 = q.completedPerMinute.slice(-5).reduce(function (a, b) { return a + b; }, 0) / 5;
      return el('tr', { 'data-queue': q.name }, [
        td(q.name),
        td(fmt(c.waiting + (c.prioritized || 0)), { 'data-count': 'waiting' }),
        td(fmt(c.active), { 'data-count': 'active' }),
        td(fmt(c.completed), { 'data-count': 'completed' }),
        td(fmt(c.failed), { 'data-count': 'failed', className: c.failed > 0 ? 'nonzero-failed' : '' }),
        td(fmt(c.delayed), { 'data-count': 'delayed' }),
        td(fmt(last5, 1)),
      ]);
    });
    fill(document.querySelector('[data-testid=queues] tbody'), rows, 'no queues', 7);
  }

  function renderChart(o) {
    if (typeof Chart === 'undefined') return;
    var labels = [];
    for (var i = 0; i < 60; i++) {
      var d = new Date(o.throughputFrom + i * 60000);
      labels.push(String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0'));
    }
    var failed = new Array(60).fill(0);
    o.queues.forEach(function (q) { q.failedPerMinute.forEach(function (v, i) { failed[i] += v; }); });
    var otherIndex = 0;
    var datasets = o.queues.map(function (q) {
      return { label: q.name, data: q.completedPerMinute, backgroundColor: COLORS[q.name] || colorOf(q.name, otherIndex++), stack: 'completed' };
    });
    datasets.push({ label: 'failed (all queues)', data: failed, backgroundColor: '#f85149', stack: 'failed' });
    if (!chart) {
      chart = new Chart(document.getElementById('throughput'), {
        type: 'bar',
        data: { labels: labels, datasets: datasets },
        options: {
          animation: false, responsive: true, maintainAspectRatio: false,
          scales: {
            x: { stacked: true, ticks: { color: '#8b98a5', maxTicksLimit: 12 }, grid: { color: '#2a3642' } },
            y: { stacked: true, beginAtZero: true, ticks: { color: '#8b98a5', precision: 0 }, grid: { color: '#2a3642' } },
          },
          plugins: { legend: { labels: { color: '#e6edf3', boxWidth: 12 } } },
        },
      });
    } else {
      chart.data.labels = labels;
      chart.data.datasets.forEach(function (ds, i) { ds.data = datasets[i].data; });
      chart.update('none');
    }
  }

  function renderIngestions(o) {
    var box = document.getElementById('ingestions');
    box.replaceChildren();
    if (o.ingestions.length === 0) { box.appendChild(el('div', { className: 'empty', text: 'no ingestions' })); return; }
    o.ingestions.forEach(function (ing) {
      var stages = STAGES.map(function (s) {
        var n = ing.stages[s];
        var pct = ing.documents ? Math.min(100, (100 * n) / ing.documents) : 0;
        var bar = el('div', { className: 'bar', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': String(ing.documents), 'aria-valuenow': String(n), 'aria-label': s });
        var inner = el('div', {});
        inner.style.width = pct.toFixed(1) + '%';
        bar.appendChild(inner);
        return el('div', { className: 'stage', 'data-stage': s }, [el('span', { text: s + ' ' + fmt(n) + '/' + fmt(ing.documents) }), bar]);
      });
      var failedNote = ing.stages.failed ? el('small', { className: 'state-failed', text: fmt(ing.stages.failed) + ' failed' }) : null;
      box.appendChild(el('div', { className: 'ingestion ' + ing.state, 'data-ingestion': ing.ingestionId, 'data-state': ing.state }, [
        el('div', { className: 'name' }, [
          el('span', { text: qualified(ing.tenant, ing.collection) }),
          el('small', { text: ing.ingestionId + ' · ' + ing.batches + ' batch' + (ing.batches === 1 ? '' : 'es') }),
        ]),
        el('div', { className: 'stages' }, stages),
        el('div', { className: 'rate' }, [
          el('div', { className: 'state-' + ing.state, text: ing.state }),
          el('div', { text: (ing.docsPerSecond === null ? '—' : fmt(ing.docsPerSecond, 1)) + ' docs/s · ' + eta(ing.etaSeconds) }),
          failedNote,
        ]),
      ]));
    });
  }

  function renderLatency(o) {
    var rows = [];
    Object.keys(o.latency).forEach(function (q) {
      ['5m', '60m'].forEach(function (w) {
        var l = o.latency[q][w];
        rows.push(el('tr', { 'data-queue': q, 'data-window': w }, [
          td(q), td(w === '5m' ? '5 min' : '60 min'), td(fmt(l.total.count)),
          td(fmt(l.total.p50)), td(fmt(l.total.p95)), td(fmt(l.total.p99)), td(fmt(l.processing.p50)), td(fmt(l.processing.p99)),
        ]));
      });
    });
    fill(document.querySelector('[data-testid=latency] tbody'), rows, 'no data', 8);
  }

  function renderWorkers(o) {
    var rows = o.workers.map(function (w) {
      var split = shardRange(w.queues);
      var queues = split.rest.map(function (q) { return q + ' (' + (w.concurrency[q] || 1) + ')'; }).concat(split.shards ? [split.shards + ' (fan-out of sharded collections)'] : []).join(', ');
      var names = Object.keys(w.caches || {});
      var cache = names.length === 0 ? '—' : names.map(function (n) {
        var c = w.caches[n];
        return n + ' ' + bytes(c.bytes) + (c.hitRatio === null ? '' : ' · ' + (100 * c.hitRatio).toFixed(0) + '% hits');
      }).join('; ');
      return el('tr', { 'data-worker': w.id, 'data-stale': String(w.stale) }, [
        el('td', { className: 'text' }, [el('span', { text: w.process }), el('div', { className: 'muted', text: w.host + ' pid ' + w.pid })]),
        td(queues, { className: 'text' }),
        td(w.executionProvider + ' / ' + w.model, { className: 'text' }),
        td(fmt(w.active)),
        td(fmt(w.jobsPerSecond, 2)),
        td(fmt(w.completed) + ' / ' + fmt(w.failed)),
        td(cache, { className: 'text' }),
        td(w.stale ? 'STALE ' + ago(w.ageMs) : ago(w.ageMs) + ' ago', { className: w.stale ? 'stale' : '' }),
      ]);
    });
    fill(document.querySelector('[data-testid=workers] tbody'), rows, 'no worker heartbeats', 8);
  }

  function renderCollections(o) {
    var rows = o.collections.map(function (c) {
      return el('tr', { 'data-collection': c.id, 'data-tenant': c.tenant }, [
        td(qualified(c.tenant, c.id)),
        td(c.model, { className: 'text' }),
        td(c.codec + ' (v' + c.codecVersion + ')' + (c.recompressing ? ' → ' + c.recompressing : ''), { className: 'text' }),
        td(fmt(c.generation), { 'data-field': 'generation' }),
        td(fmt(c.segments)),
        td(fmt(c.documents), { 'data-field': 'documents' }),
        td(fmt(c.tokens), { 'data-field': 'tokens' }),
        td(bytes(c.segmentBytes)),
        td(bytes(c.s3Bytes), { title: 'everything the collection keeps in S3: the segments, and their indexes and heads, the accepted documents, the raw vectors, older generations not yet collected' }),
        td(c.bytesPerToken === null ? '—' : c.bytesPerToken.toFixed(1)),
        td(c.shards === null ? '—' : fmt(c.shards)),
        td(fmt(c.degradedSegments), {
          'data-field': 'degraded',
          className: c.degradedSegments > 0 ? 'nonzero-failed' : '',
          title: (c.unavailableSegments || []).map(function (s) { return s.key + ': ' + s.reason + ' (' + s.documents + ' documents)'; }).join('\n'),
        }),
      ]);
    });
    fill(document.querySelector('[data-testid=collections] tbody'), rows, 'no collections', 12);
  }

  function renderTraining(o) {
    var rows = (o.training || []).map(function (t) {
      var epoch = t.epoch === null ? '—' : t.epoch === 0 ? 'warm start' : t.epoch + (t.maxEpochs ? '/' + t.maxEpochs : '');
      return el('tr', { 'data-train': t.trainId, 'data-state': t.state }, [
        td(t.trainId, { className: 'id' }),
        td(qualified(t.tenant, t.collection)),
        td(t.state, { className: 'state-' + t.state }),
        td(t.stage || '—'),
        td(epoch, { 'data-field': 'epoch' }),
        td(t.loss === null ? '—' : t.loss.toPrecision(4), { 'data-field': 'loss' }),
        td(t.percent === null ? '—' : Math.round(t.percent) + '%'),
        td(t.state === 'running' ? eta(t.etaSeconds) : '—', { 'data-field': 'eta' }),
        td(t.error || t.artifact || '', { className: t.error ? 'error' : '' }),
      ]);
    });
    fill(document.querySelector('[data-testid=training] tbody'), rows, 'no training runs', 9);
  }

  function renderFailed(o) {
    var rows = o.failedJobs.map(function (j) {
      var btn = el('button', { type: 'button', text: 'Retry', 'data-retry': j.id });
      btn.addEventListener('click', function () { retry(j.queue, j.id, btn); });
      return el('tr', { 'data-job': j.id, 'data-queue': j.queue }, [
        td(j.finishedOn ? clock(j.finishedOn) : '—'),
        td(j.queue),
        td(j.id, { className: 'id' }),
        td(j.collection),
        td(j.attemptsMade + '/' + j.attempts),
        td(j.failedReason, { className: 'error', 'data-field': 'error' }),
        el('td', {}, [btn]),
      ]);
    });
    fill(document.querySelector('[data-testid=failed-jobs] tbody'), rows, 'no failed jobs', 7);
  }

  function retry(queue, id, btn) {
    btn.disabled = true;
    var out = document.getElementById('retry-result');
    fetch('/v1/admin/jobs/' + encodeURIComponent(queue) + '/' + encodeURIComponent(id) + '/retry', { method: 'POST', credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (r) { return r.json().then(function (b) { return { status: r.status, body: b }; }); })
      .then(function (r) {
        out.textContent = r.status < 300 ? 'retrying ' + queue + ' job ' + id + ' (was attempt ' + r.body.previousAttempts + ')' : 'retry failed: ' + r.body.message;
        out.setAttribute('data-status', String(r.status));
        poll();
      })
      .catch(function (e) { out.textContent = 'retry failed: ' + e.message; btn.disabled = false; });
  }

  function poll() {
    return fetch('/v1/admin/overview', { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); throw new Error('signed out'); }
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.json();
      })
      .then(function (o) {
        if (o.at < lastAt) return;
        lastAt = o.at;
        manyTenants = o.tenants.length > 1;
        renderQueues(o); renderChart(o); renderIngestions(o); renderLatency(o); renderWorkers(o); renderCollections(o); renderTraining(o); renderFailed(o);
        var s = document.getElementById('status');
        s.className = '';
        s.textContent = (o.tenants.length === 1 ? 'tenant ' : 'tenants ') + o.tenants.join(', ') + ' · updated ' + clock(o.at);
        s.setAttribute('data-at', String(o.at));
      })
      .catch(function (e) {
        var s = document.getElementById('status');
        s.className = 'bad';
        s.textContent = 'overview unavailable: ' + e.message + ' (retrying)';
      });
  }

  poll();
  setInterval(poll, POLL_MS);
})();

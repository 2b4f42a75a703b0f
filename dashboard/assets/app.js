// The Orrery dashboard: one page application over the JSON API of `orrery dashboard`
// (docs/dashboard.md). No framework and nothing fetched from outside the server: the page
// routes on location.pathname, fetches its API when the server says something changed
// (server-sent events; polling every 2 s only without them) and redraws in place.
(function () {
  'use strict';

  var POLL_MS = 2000;
  var content = document.getElementById('content');
  var banners = document.getElementById('banners');
  var statusEl = document.getElementById('status');

  // ---- formatting -------------------------------------------------------------------

  function esc(v) {
    return String(v === undefined || v === null ? '' : v).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  function isNum(v) {
    return typeof v === 'number' && isFinite(v);
  }

  // A number for people: whole numbers as such, others with 4 significant digits.
  function fmtNum(v) {
    if (!isNum(v)) return v === null || v === undefined ? '\u2013' : String(v);
    if (Number.isInteger(v)) return String(v);
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return Number(v.toPrecision(4)).toExponential();
    return String(Number(v.toPrecision(4)));
  }

  function fmtBytes(v) {
    if (!isNum(v)) return fmtNum(v);
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? String(v) : v.toFixed(1)) + ' ' + units[i];
  }

  function isBytes(name) {
    return /memory/i.test(name);
  }

  function fmtRes(name, v) {
    return isBytes(name) ? fmtBytes(v) : fmtNum(v);
  }

  // "used/total" for one resource; memory in binary units.
  function fmtUsedTotal(name, used, total) {
    if (isBytes(name)) return fmtBytes(used || 0) + ' / ' + fmtBytes(total);
    return fmtNum(used || 0) + '/' + fmtNum(total);
  }

  // Resource names in a stable order: accelerators and CPU first, memory last.
  var RES_ORDER = ['CPU', 'GPU', 'TPU'];
  function resNames(obj) {
    return Object.keys(obj || {}).sort(function (a, b) {
      var ia = RES_ORDER.indexOf(a), ib = RES_ORDER.indexOf(b);
      if (ia < 0) ia = isBytes(a) ? 99 : 50;
      if (ib < 0) ib = isBytes(b) ? 99 : 50;
      return ia !== ib ? ia - ib : a < b ? -1 : a > b ? 1 : 0;
    });
  }

  function fmtResources(obj) {
    var names = resNames(obj);
    if (!names.length) return '<span class="muted">none</span>';
    return names.map(function (k) {
      return '<span class="chip">' + esc(k) + ' ' + esc(fmtRes(k, obj[k])) + '</span>';
    }).join(' ');
  }

  function pad2(n) {
    return (n < 10 ? '0' : '') + n;
  }

  // Seconds since the epoch as local "YYYY-MM-DD HH:MM:SS"; 0 or missing as a dash.
  function fmtTime(t) {
    if (!isNum(t) || t <= 0) return '\u2013';
    var d = new Date(t * 1000);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' +
      pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  function fmtDuration(s) {
    if (!isNum(s) || s < 0) return '\u2013';
    if (s < 60) return s.toFixed(1) + ' s';
    var m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + Math.floor(s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }

  function shortId(id) {
    return id ? String(id).slice(0, 12) : '';
  }

  function idCell(id) {
    if (!id) return '<span class="muted">\u2013</span>';
    return '<code title="' + esc(id) + '">' + esc(shortId(id)) + '</code>';
  }

  function badge(text) {
    var t = String(text || '');
    return '<span class="badge badge-' + esc(t.toLowerCase().replace(/[^a-z0-9]+/g, '-')) + '">' +
      esc(t || '?') + '</span>';
  }

  function orDash(v) {
    return v === undefined || v === null || v === '' ? '<span class="muted">\u2013</span>' : esc(v);
  }

  function table(id, headers, rows, empty) {
    if (!rows.length) {
      return '<p class="muted empty" id="' + esc(id) + '-empty">' + esc(empty) + '</p>';
    }
    return '<div class="table-wrap"><table id="' + esc(id) + '"><thead><tr>' +
      headers.map(function (h) { return '<th>' + esc(h) + '</th>'; }).join('') +
      '</tr></thead><tbody>' + rows.join('') + '</tbody></table></div>';
  }

  function list(v) {
    return Array.isArray(v) ? v : [];
  }

  function obj(v) {
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  }

  // ---- pages ------------------------------------------------------------------------

  function renderOverview(d) {
    var nodes = obj(d.nodes);
    var res = obj(d.resources);
    var html = '<h1>Cluster overview</h1>';

    html += '<section class="cards">' +
      '<div class="card" id="card-nodes"><div class="card-title">Nodes</div>' +
      '<div class="card-value"><span id="nodes-alive">' + esc(fmtNum(nodes.alive || 0)) + '</span> alive</div>' +
      '<div class="card-sub"><span id="nodes-dead">' + esc(fmtNum(nodes.dead || 0)) + '</span> dead</div></div>';
    var actors = obj(d.actors), runs = obj(d.runs);
    var nActors = Object.keys(actors).reduce(function (s, k) { return s + (actors[k] || 0); }, 0);
    var nRuns = Object.keys(runs).reduce(function (s, k) { return s + (runs[k] || 0); }, 0);
    html += '<div class="card" id="card-actors"><div class="card-title">Actors</div>' +
      '<div class="card-value">' + esc(fmtNum(actors.ALIVE || 0)) + ' alive</div>' +
      '<div class="card-sub">' + esc(fmtNum(nActors)) + ' in all</div></div>';
    html += '<div class="card" id="card-runs"><div class="card-title">Train runs</div>' +
      '<div class="card-value">' + esc(fmtNum(runs.RUNNING || 0)) + ' running</div>' +
      '<div class="card-sub">' + esc(fmtNum(nRuns)) + ' in all</div></div>';
    html += '</section>';

    html += '<h2>Resources <span class="muted small">(alive nodes)</span></h2>';
    var rrows = resNames(res).map(function (k) {
      var r = obj(res[k]);
      var total = isNum(r.total) ? r.total : 0, used = isNum(r.used) ? r.used : 0;
      var pct = total > 0 ? Math.min(100, Math.max(0, 100 * used / total)) : 0;
      return '<tr data-resource="' + esc(k) + '"><td>' + esc(k) + '</td>' +
        '<td class="num used-total">' + esc(fmtUsedTotal(k, used, total)) + '</td>' +
        '<td class="bar-cell"><div class="bar"><div class="bar-fill" style="width:' + pct.toFixed(1) +
        '%"></div></div></td><td class="num">' + pct.toFixed(0) + '%</td></tr>';
    });
    html += table('resources-table', ['Resource', 'Used / total', 'Usage', ''], rrows, 'No alive node offers resources.');

    var slices = list(d.tpu_slices);
    if (slices.length) {
      html += '<h2>TPU slices</h2><div id="tpu-slices">';
      slices.forEach(function (s) {
        s = obj(s);
        var hosts = list(s.hosts).slice().sort(function (a, b) {
          return (obj(a).worker_id || 0) - (obj(b).worker_id || 0);
        });
        var nAlive = hosts.filter(function (h) { return obj(h).alive; }).length;
        html += '<div class="slice" data-slice="' + esc(s.name) + '"><h3>' + esc(s.name || '(unnamed)') +
          ' <span class="muted small">' + esc(nAlive) + '/' + esc(hosts.length) + ' hosts alive</span></h3>' +
          '<dl class="kv"><dt>Pod type</dt><dd>' + orDash(s.pod_type) + '</dd>' +
          '<dt>Topology</dt><dd>' + orDash(s.topology) + '</dd>' +
          '<dt>Accelerator</dt><dd>' + orDash(s.accelerator_type) + '</dd></dl>';
        html += table('tpu-hosts-' + (s.name || ''), ['Worker', 'Node', 'Address', 'Alive'], hosts.map(function (h) {
          h = obj(h);
          return '<tr data-node-id="' + esc(h.node_id) + '"><td class="num">' + esc(fmtNum(h.worker_id)) + '</td><td>' +
            idCell(h.node_id) + '</td><td>' + orDash(h.address) + '</td><td>' + badge(h.alive ? 'ALIVE' : 'DEAD') + '</td></tr>';
        }), 'No hosts.');
        html += '</div>';
      });
      html += '</div>';
    }

    html += '<div class="two-col"><div><h2>Actors by state</h2>';
    html += table('actor-states', ['State', 'Actors'], Object.keys(actors).sort().map(function (k) {
      return '<tr data-state="' + esc(k) + '"><td>' + badge(k) + '</td><td class="num">' + esc(fmtNum(actors[k])) + '</td></tr>';
    }), 'No actors yet.');
    html += ' <p><a href="/actors">All actors &rarr;</a></p></div><div><h2>Train runs by status</h2>';
    html += table('run-statuses', ['Status', 'Runs'], Object.keys(runs).sort().map(function (k) {
      return '<tr data-status="' + esc(k) + '"><td>' + badge(k) + '</td><td class="num">' + esc(fmtNum(runs[k])) + '</td></tr>';
    }), 'No train runs yet.');
    html += ' <p><a href="/runs">All runs &rarr;</a></p></div></div>';
    return html;
  }

  // A node's object store: "1.2 GiB / 7.0 GiB, 3 objects" (and what is spilled), or a dash
  // for a node without one.
  function fmtStore(st) {
    if (!isNum(st.capacity_bytes) || st.capacity_bytes <= 0) return '<span class="muted">\u2013</span>';
    var n = isNum(st.num_objects) ? st.num_objects : 0;
    var text = fmtBytes(st.used_bytes || 0) + ' / ' + fmtBytes(st.capacity_bytes) + ', ' +
      fmtNum(n) + (n === 1 ? ' object' : ' objects');
    if (isNum(st.spilled_bytes) && st.spilled_bytes > 0) text += ', ' + fmtBytes(st.spilled_bytes) + ' spilled';
    return esc(text);
  }

  function renderNodes(d) {
    var nodes = list(d.nodes).slice().sort(function (a, b) {
      if (!!a.alive !== !!b.alive) return a.alive ? -1 : 1;
      return String(a.address) < String(b.address) ? -1 : String(a.address) > String(b.address) ? 1 : 0;
    });
    var nAlive = nodes.filter(function (n) { return n.alive; }).length;
    var html = '<h1>Nodes <span class="muted small">' + nAlive + ' alive, ' + (nodes.length - nAlive) + ' dead</span></h1>';
    html += table('nodes-table', ['Node', 'Address', 'State', 'Resources (used / total)', 'Object store', 'Labels'], nodes.map(function (n) {
      n = obj(n);
      var total = obj(n.total), used = obj(n.used);
      var res = resNames(total).map(function (k) {
        return '<span class="chip">' + esc(k) + ' ' + esc(fmtUsedTotal(k, used[k], total[k])) + '</span>';
      }).join(' ');
      var labels = obj(n.labels);
      var lab = Object.keys(labels).sort().filter(function (k) {
        return k !== 'orrery.io/node-id';
      }).map(function (k) {
        return '<span class="chip label">' + esc(k) + '=' + esc(labels[k]) + '</span>';
      }).join(' ');
      return '<tr data-node-id="' + esc(n.node_id) + '" data-alive="' + (n.alive ? 'true' : 'false') + '"' +
        (n.alive ? '' : ' class="dead"') + '><td><code class="id">' + esc(n.node_id) + '</code></td><td>' +
        orDash(n.address) + '</td><td>' + badge(n.alive ? 'ALIVE' : 'DEAD') + '</td><td>' + (res || '<span class="muted">none</span>') +
        '</td><td class="object-store">' + fmtStore(obj(n.object_store)) +
        '</td><td>' + (lab || '<span class="muted">\u2013</span>') + '</td></tr>';
    }), 'No node has registered.');
    return html;
  }

  var ACTOR_STATE_ORDER = ['ALIVE', 'PENDING', 'RESTARTING', 'DEAD'];
  function stateRank(s) {
    var i = ACTOR_STATE_ORDER.indexOf(s);
    return i < 0 ? 9 : i;
  }

  function renderActors(d) {
    var actors = list(d.actors).slice().sort(function (a, b) {
      var r = stateRank(a.state) - stateRank(b.state);
      if (r) return r;
      var ca = String(a['class']) + '\u0000' + String(a.name), cb = String(b['class']) + '\u0000' + String(b.name);
      return ca < cb ? -1 : ca > cb ? 1 : 0;
    });
    var counts = {};
    actors.forEach(function (a) { counts[a.state] = (counts[a.state] || 0) + 1; });
    var summary = Object.keys(counts).sort(function (a, b) { return stateRank(a) - stateRank(b); }).map(function (k) {
      return counts[k] + ' ' + k.toLowerCase();
    }).join(', ');
    var html = '<h1>Actors <span class="muted small">' + esc(summary || 'none') + '</span></h1>';
    html += table('actors-table', ['Actor', 'Class', 'Name', 'State', 'Node', 'PID', 'Restarts', 'Resources', 'Death cause'],
      actors.map(function (a) {
        a = obj(a);
        var name = a.name ? esc(a.name) + (a.namespace ? ' <span class="muted small">(' + esc(a.namespace) + ')</span>' : '')
          : '<span class="muted">\u2013</span>';
        var restarts = esc(fmtNum(a.restarts || 0)) + ' / ' + (a.max_restarts === -1 ? '\u221e' : esc(fmtNum(a.max_restarts || 0)));
        var death = a.death_cause ? esc(a.death_cause) + (a.death_kind ? ' <span class="muted small">(' + esc(a.death_kind) + ')</span>' : '')
          : '<span class="muted">\u2013</span>';
        return '<tr data-actor-id="' + esc(a.actor_id) + '" data-state="' + esc(a.state) + '"><td>' + idCell(a.actor_id) +
          '</td><td>' + esc(a['class']) + '</td><td>' + name + '</td><td>' + badge(a.state) +
          (a.detached ? ' <span class="chip">detached</span>' : '') + '</td><td>' + idCell(a.node_id) + '</td><td class="num">' +
          (a.pid ? esc(a.pid) : '<span class="muted">\u2013</span>') + '</td><td class="num">' + restarts + '</td><td>' +
          fmtResources(a.resources) + '</td><td class="cause">' + death + '</td></tr>';
      }), 'No actors yet.');
    return html;
  }

  function renderPlacementGroups(d) {
    var pgs = list(d.placement_groups).slice().sort(function (a, b) {
      var o = { CREATED: 0, PENDING: 1, REMOVED: 2 };
      return (o[a.state] === undefined ? 3 : o[a.state]) - (o[b.state] === undefined ? 3 : o[b.state]);
    });
    var html = '<h1>Placement groups <span class="muted small">' + pgs.length + '</span></h1>';
    html += table('placement-groups-table', ['Group', 'Name', 'State', 'Strategy', 'Bundles (resources \u2192 node)', 'Reason'],
      pgs.map(function (p) {
        p = obj(p);
        var nodes = list(p.bundle_nodes);
        var bundles = list(p.bundles).map(function (b, i) {
          return '<li data-bundle="' + i + '"><span class="muted">#' + i + '</span> ' + fmtResources(b) + ' \u2192 ' +
            (nodes[i] ? idCell(nodes[i]) : '<span class="muted">not placed</span>') + '</li>';
        }).join('');
        return '<tr data-pg-id="' + esc(p.placement_group_id) + '" data-state="' + esc(p.state) + '"><td>' +
          idCell(p.placement_group_id) + '</td><td>' + orDash(p.name) + '</td><td>' + badge(p.state) + '</td><td>' +
          esc(p.strategy) + '</td><td><ul class="bundles">' + bundles + '</ul></td><td class="cause">' + orDash(p.reason) + '</td></tr>';
      }), 'No placement groups yet.');
    return html;
  }

  function renderJobs(d) {
    var jobs = list(d.jobs).slice().sort(function (a, b) { return (b.start_time || 0) - (a.start_time || 0); });
    var html = '<h1>Jobs <span class="muted small">' + jobs.length + '</span></h1>';
    html += table('jobs-table', ['Job', 'State', 'PID', 'Entrypoint', 'Namespace', 'Started', 'End cause'], jobs.map(function (j) {
      j = obj(j);
      return '<tr data-job-id="' + esc(j.job_id) + '" data-state="' + esc(j.state) + '"><td>' + idCell(j.job_id) + '</td><td>' +
        badge(j.state) + '</td><td class="num">' + (j.pid ? esc(j.pid) : '<span class="muted">\u2013</span>') + '</td><td><code>' +
        esc(j.entrypoint) + '</code></td><td>' + orDash(j.namespace) + '</td><td>' + esc(fmtTime(j.start_time)) +
        '</td><td class="cause">' + orDash(j.end_cause) + '</td></tr>';
    }), 'No driver has connected.');
    return html;
  }

  function renderSubmissions(d) {
    var subs = list(d.submissions).slice().sort(function (a, b) { return (b.submit_time || 0) - (a.submit_time || 0); });
    var html = '<h1>Submitted jobs <span class="muted small">' + subs.length + '</span></h1>';
    html += table('submissions-table', ['Job', 'State', 'Exit code', 'Entrypoint', 'Node', 'Submitted', 'Message'], subs.map(function (j) {
      j = obj(j);
      var id = String(j.submission_id || '');
      return '<tr data-submission-id="' + esc(id) + '" data-state="' + esc(j.state) + '"><td><a href="/submissions/' +
        encodeURIComponent(id) + '"><code>' + esc(id) + '</code></a></td><td>' + badge(j.state) + '</td><td class="num">' +
        orDash(j.exit_code) + '</td><td><code>' + esc(j.entrypoint) + '</code></td><td>' + idCell(j.node_id) + '</td><td>' +
        esc(fmtTime(j.submit_time)) + '</td><td class="cause">' + orDash(j.message) + '</td></tr>';
    }), 'No job was submitted (orrery job submit).');
    return html;
  }

  function renderSubmission(d) {
    var j = obj(d.submission);
    var html = '<p class="crumbs"><a href="/submissions">&larr; Submitted jobs</a></p>';
    html += '<h1>Job <code>' + esc(j.submission_id) + '</code> ' + badge(j.state) + '</h1>';
    html += '<p><code>' + esc(j.entrypoint) + '</code></p><p class="cause">' + orDash(j.message) +
      (j.exit_code !== undefined && j.exit_code !== null ? ' (exit code ' + esc(j.exit_code) + ')' : '') + '</p>';
    var logs = list(d.logs);
    html += '<h2>Output <span class="muted small">' + logs.length + ' entries</span></h2><pre id="job-logs" class="logs">' +
      logs.map(function (e) {
        e = obj(e);
        return '<span class="' + (e.stream === 'stderr' ? 'stderr' : 'stdout') + '">' + esc(e.text) + '</span>';
      }).join('\n') + '</pre>';
    return html;
  }

  function fmtMetrics(m) {
    m = obj(m);
    var keys = Object.keys(m).sort();
    if (!keys.length) return '<span class="muted">\u2013</span>';
    return keys.map(function (k) {
      return '<span class="chip metric" data-metric="' + esc(k) + '">' + esc(k) + ' ' + esc(fmtNum(m[k])) + '</span>';
    }).join(' ');
  }

  function runDuration(r) {
    if (!isNum(r.start_time) || r.start_time <= 0) return NaN;
    var end = isNum(r.end_time) && r.end_time > 0 ? r.end_time : Date.now() / 1000;
    return end - r.start_time;
  }

  function renderRuns(d) {
    var runs = list(d.runs);
    var html = '<h1>Train runs <span class="muted small">' + runs.length + '</span></h1>';
    html += table('runs-table', ['Name', 'Status', 'Iterations', 'Failures', 'Backend', 'Started', 'Duration', 'Latest metrics'],
      runs.map(function (r) {
        r = obj(r);
        return '<tr data-run-id="' + esc(r.id) + '" data-status="' + esc(r.status) + '"><td><a class="run-link" href="/runs/' +
          encodeURIComponent(r.id || '') + '">' + esc(r.name || r.id) + '</a><br><code class="muted small" title="' + esc(r.id) + '">' +
          esc(shortId(r.id)) + '</code></td><td>' + badge(r.status) + '</td><td class="num">' + esc(fmtNum(r.iterations || 0)) +
          '</td><td class="num">' + esc(fmtNum(r.num_failures || 0)) + '</td><td>' + orDash(r.backend) + '</td><td>' +
          esc(fmtTime(r.start_time)) + '</td><td class="num">' + esc(fmtDuration(runDuration(r))) + '</td><td>' +
          fmtMetrics(r.latest_metrics) + '</td></tr>';
      }), 'No training run yet.');
    return html;
  }

  // ---- plots ------------------------------------------------------------------------

  // About n round tick values covering [lo, hi].
  function ticks(lo, hi, n) {
    var span = hi - lo;
    if (!(span > 0)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log10(span / n)));
    var err = span / n / step;
    if (err >= 7.5) step *= 10;
    else if (err >= 3.5) step *= 5;
    else if (err >= 1.5) step *= 2;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
      out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    }
    return out;
  }

  // An SVG line plot of points [{x, y}] with a circle per point.
  function svgPlot(metric, xLabel, pts) {
    var W = 560, H = 230, L = 62, R = 14, T = 12, B = 38;
    var xs = pts.map(function (p) { return p.x; }), ys = pts.map(function (p) { return p.y; });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    // A positive metric that spans two decades or more (a falling loss) on a log scale.
    var logY = y0 > 0 && y1 / y0 >= 100;
    function fy(y) { return logY ? Math.log10(y) : y; }
    y0 = fy(y0);
    y1 = fy(y1);
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { var dy = Math.abs(y0) * 0.1 || 1; y0 -= dy; y1 += dy; }
    var pad = (y1 - y0) * 0.05;
    y0 -= pad; y1 += pad;
    function sx(x) { return L + (x - x0) / (x1 - x0) * (W - L - R); }
    function sy(y) { return T + (1 - (fy(y) - y0) / (y1 - y0)) * (H - T - B); }
    var yTicks = [];
    if (logY) {
      for (var k = Math.ceil(y0); k <= Math.floor(y1); k++) yTicks.push(Math.pow(10, k));
    } else {
      yTicks = ticks(y0, y1, 5);
    }
    var s = '<svg class="plot-svg" viewBox="0 0 ' + W + ' ' + H + '" width="' + W + '" height="' + H +
      '" role="img" aria-label="' + esc(metric) + ' against ' + esc(xLabel) + '">';
    s += '<rect class="plot-bg" x="' + L + '" y="' + T + '" width="' + (W - L - R) + '" height="' + (H - T - B) + '"/>';
    yTicks.forEach(function (v) {
      var y = sy(v).toFixed(1);
      s += '<line class="grid" x1="' + L + '" x2="' + (W - R) + '" y1="' + y + '" y2="' + y + '"/>' +
        '<text class="tick" x="' + (L - 6) + '" y="' + y + '" text-anchor="end" dominant-baseline="middle">' + esc(fmtNum(v)) + '</text>';
    });
    ticks(x0, x1, 6).forEach(function (v) {
      var x = sx(v).toFixed(1);
      s += '<line class="grid" y1="' + T + '" y2="' + (H - B) + '" x1="' + x + '" x2="' + x + '"/>' +
        '<text class="tick" x="' + x + '" y="' + (H - B + 14) + '" text-anchor="middle">' + esc(fmtNum(v)) + '</text>';
    });
    s += '<line class="axis" x1="' + L + '" x2="' + (W - R) + '" y1="' + (H - B) + '" y2="' + (H - B) + '"/>' +
      '<line class="axis" x1="' + L + '" x2="' + L + '" y1="' + T + '" y2="' + (H - B) + '"/>';
    s += '<text class="axis-label" x="' + ((L + W - R) / 2) + '" y="' + (H - 4) + '" text-anchor="middle">' + esc(xLabel) +
      (logY ? ' (y: log scale)' : '') + '</text>';
    if (pts.length > 1) {
      s += '<polyline class="line" points="' + pts.map(function (p) {
        return sx(p.x).toFixed(1) + ',' + sy(p.y).toFixed(1);
      }).join(' ') + '"/>';
    }
    pts.forEach(function (p) {
      s += '<circle class="point" data-metric="' + esc(metric) + '" data-x="' + esc(p.x) + '" data-y="' + esc(p.y) +
        '" cx="' + sx(p.x).toFixed(1) + '" cy="' + sy(p.y).toFixed(1) + '" r="2.5"><title>' + esc(xLabel) + ' ' +
        esc(fmtNum(p.x)) + ': ' + esc(metric) + ' ' + esc(fmtNum(p.y)) + '</title></circle>';
    });
    return s + '</svg>';
  }

  function renderPlots(entries) {
    entries = list(entries).map(obj);
    var useStep = entries.some(function (e) { return isNum(obj(e.metrics).step); });
    var names = {};
    entries.forEach(function (e) {
      Object.keys(obj(e.metrics)).forEach(function (k) { names[k] = true; });
    });
    var keys = Object.keys(names).sort(function (a, b) {
      // "step" (the x axis) last, the rest by name.
      if (a === 'step' || b === 'step') return a === 'step' ? 1 : -1;
      return a < b ? -1 : a > b ? 1 : 0;
    });
    if (!keys.length) return '<p class="muted" id="plots-empty">No metrics reported yet.</p>';
    var html = '<div class="plots" id="plots">';
    keys.forEach(function (k) {
      // Every metric against step when the reports carry one; step itself against iteration.
      var byStep = useStep && k !== 'step';
      var xLabel = byStep ? 'step' : 'iteration';
      var pts = [];
      entries.forEach(function (e) {
        var m = obj(e.metrics);
        var x = byStep ? m.step : e.iteration, y = m[k];
        if (typeof x === 'string') x = Number(x);
        if (isNum(x) && isNum(y)) pts.push({ x: x, y: y });
      });
      var last = pts.length ? pts[pts.length - 1].y : null;
      html += '<div class="plot" id="plot-' + esc(k) + '" data-metric="' + esc(k) + '" data-points="' + pts.length + '">' +
        '<h3>' + esc(k) + ' <span class="muted small">against ' + esc(xLabel) + '; latest ' + esc(fmtNum(last)) + ', ' +
        pts.length + ' points</span></h3>' + (pts.length ? svgPlot(k, xLabel, pts) : '<p class="muted">No numeric values.</p>') +
        '</div>';
    });
    return html + '</div>';
  }

  function renderRun(d) {
    var r = obj(d.run);
    var html = '<p class="crumbs"><a href="/runs">&larr; Train runs</a></p>';
    html += '<h1 id="run-title" data-run-id="' + esc(r.id) + '">' + esc(r.name || r.id) + ' <span id="run-status">' +
      badge(r.status) + '</span></h1>';
    if (r.error || r.error_kind) {
      html += '<div class="banner error" id="run-error"><strong>' + esc(r.error_kind || 'Error') + ':</strong> ' +
        esc(r.error) + '</div>';
    }
    html += '<dl class="kv" id="run-summary">' +
      '<dt>Run id</dt><dd><code>' + esc(r.id) + '</code></dd>' +
      '<dt>Status</dt><dd>' + esc(r.status) + '</dd>' +
      '<dt>Iterations</dt><dd id="run-iterations">' + esc(fmtNum(r.iterations || 0)) + '</dd>' +
      '<dt>Group restarts</dt><dd>' + esc(fmtNum(r.num_failures || 0)) + '</dd>' +
      '<dt>Train loop</dt><dd><code>' + orDash(r.loop) + '</code></dd>' +
      '<dt>Backend</dt><dd>' + orDash(r.backend) + '</dd>' +
      '<dt>Storage path</dt><dd><code>' + orDash(r.path) + '</code></dd>' +
      '<dt>Started</dt><dd>' + esc(fmtTime(r.start_time)) + '</dd>' +
      '<dt>Ended</dt><dd>' + esc(fmtTime(r.end_time)) + '</dd>' +
      '<dt>Duration</dt><dd>' + esc(fmtDuration(runDuration(r))) + '</dd>' +
      '<dt>Latest metrics</dt><dd>' + fmtMetrics(r.latest_metrics) + '</dd></dl>';

    html += '<h2>Metrics</h2>' + renderPlots(d.metrics);

    var workers = list(r.workers).slice().sort(function (a, b) { return (a.rank || 0) - (b.rank || 0); });
    html += '<h2>Workers</h2>';
    html += table('workers-table', ['Rank', 'Local rank', 'Node rank', 'Node', 'Host', 'IP', 'PID', 'Device'], workers.map(function (w) {
      w = obj(w);
      return '<tr data-rank="' + esc(w.rank) + '" data-node-id="' + esc(w.node_id) + '"><td class="num">' + esc(fmtNum(w.rank)) +
        '</td><td class="num">' + esc(fmtNum(w.local_rank)) + '</td><td class="num">' + esc(fmtNum(w.node_rank)) + '</td><td>' +
        idCell(w.node_id) + '</td><td>' + orDash(w.hostname) + '</td><td>' + orDash(w.node_ip) + '</td><td class="num">' +
        (w.pid ? esc(w.pid) : '<span class="muted">\u2013</span>') + '</td><td>' + orDash(w.device) + '</td></tr>';
    }), 'No workers yet.');

    html += '<h2>Checkpoints <span class="muted small">(best first)</span></h2>';
    html += table('checkpoints-table', ['Iteration', 'Path', 'Metrics'], list(r.checkpoints).map(function (c) {
      c = obj(c);
      return '<tr data-iteration="' + esc(c.iteration) + '"><td class="num">' + esc(fmtNum(c.iteration)) + '</td><td><code>' +
        esc(c.path) + '</code></td><td>' + fmtMetrics(c.metrics) + '</td></tr>';
    }), 'No checkpoints kept.');

    html += '<h2>Config</h2><pre id="run-config" class="json">' + esc(JSON.stringify(r.config === undefined ? null : r.config, null, 2)) +
      '</pre>';
    return html;
  }

  function renderNotFound() {
    return '<h1>Not found</h1><p>There is no page at <code>' + esc(location.pathname) +
      '</code>. <a href="/">Go to the overview.</a></p>';
  }

  // ---- routing and polling ----------------------------------------------------------

  function renderAutoscaler(d) {
    var rows = list(d.autoscaler);
    var st = obj(rows.length ? rows[0] : null);
    var html = '<h1>Autoscaler</h1>';
    if (!rows.length) return html + '<p class="muted">No autoscaler has synced with this cluster (orrery autoscaler --config F).</p>';
    html += table('autoscaler-groups', ['Group', 'Shape', 'Unit', 'Nodes', 'Launching', 'Min', 'Max', 'Last error'],
      list(st.groups).map(function (g) {
        g = obj(g);
        return '<tr data-group="' + esc(g.name) + '"><td>' + esc(g.name) + '</td><td><code>' + esc(g.shape) + '</code></td><td>' +
          esc(g.unit) + '</td><td class="num">' + esc(g.nodes) + '</td><td class="num">' + esc(g.launching) + '</td><td class="num">' +
          esc(g.min) + '</td><td class="num">' + esc(g.max) + '</td><td class="cause">' + orDash(g.error) + '</td></tr>';
      }), 'No groups.');
    var events = list(st.events).slice().reverse();
    html += '<h2>Decisions</h2>' + table('autoscaler-events', ['Time', 'Group', 'Action', 'Count', 'Reason'], events.map(function (e) {
      e = obj(e);
      return '<tr data-action="' + esc(e.action) + '"><td>' + esc(fmtTime(e.time)) + '</td><td>' + esc(e.group) + '</td><td>' +
        badge(e.action) + '</td><td class="num">' + esc(e.count) + '</td><td class="cause">' + esc(e.reason) + '</td></tr>';
    }), 'No decisions yet.');
    var none = list(st.unsatisfiable);
    if (none.length) {
      html += '<h2>Demands no group can hold</h2><ul>' + none.map(function (u) { return '<li>' + esc(u) + '</li>'; }).join('') + '</ul>';
    }
    return html;
  }

  function route(path) {
    path = path.replace(/\/+$/, '') || '/';
    var m;
    if (path === '/') return { nav: 'overview', title: 'Overview', api: '/api/cluster', render: renderOverview };
    if (path === '/nodes') return { nav: 'nodes', title: 'Nodes', api: '/api/nodes', render: renderNodes };
    if (path === '/actors') return { nav: 'actors', title: 'Actors', api: '/api/actors', render: renderActors };
    if (path === '/placement-groups') {
      return { nav: 'placement-groups', title: 'Placement groups', api: '/api/placement_groups', render: renderPlacementGroups };
    }
    if (path === '/jobs') return { nav: 'jobs', title: 'Jobs', api: '/api/jobs', render: renderJobs };
    if (path === '/autoscaler') {
      return { nav: 'autoscaler', title: 'Autoscaler', api: '/api/autoscaler', render: renderAutoscaler };
    }
    if (path === '/submissions') {
      return { nav: 'submissions', title: 'Submitted jobs', api: '/api/submissions', render: renderSubmissions };
    }
    if ((m = /^\/submissions\/(job_[0-9a-z_-]+)$/.exec(path))) {
      var sid = m[1];
      return {
        nav: 'submissions', title: 'Job ' + sid, api: '/api/submissions/' + sid, render: renderSubmission,
        notFound: function () {
          return '<p class="crumbs"><a href="/submissions">&larr; Submitted jobs</a></p><h1>Unknown job</h1>' +
            '<p id="submission-unknown">No job <code>' + esc(sid) + '</code> was submitted to this cluster.</p>';
        }
      };
    }
    if (path === '/runs') return { nav: 'runs', title: 'Train runs', api: '/api/runs', render: renderRuns };
    if ((m = /^\/runs\/([^/]+)$/.exec(path))) {
      var id = decodeURIComponent(m[1]);
      return {
        nav: 'runs', title: 'Run ' + shortId(id), api: '/api/runs/' + encodeURIComponent(id), render: renderRun,
        notFound: function () {
          return '<p class="crumbs"><a href="/runs">&larr; Train runs</a></p><h1>Unknown run</h1><p id="run-unknown">' +
            'No training run with id <code>' + esc(id) + '</code> is recorded in this cluster.</p>';
        }
      };
    }
    return null;
  }

  function setBanners(list) {
    var html = list.map(function (b) {
      return '<div class="banner ' + esc(b.cls || 'error') + '" id="' + esc(b.id) + '" role="alert">' + b.html + '</div>';
    }).join('');
    if (banners.innerHTML !== html) banners.innerHTML = html;
  }

  function clock() {
    var d = new Date();
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  var page = route(location.pathname);
  var lastText = null, lastOk = null, inFlight = false, pollAgain = false;

  Array.prototype.forEach.call(document.querySelectorAll('#nav a'), function (a) {
    if (page && a.getAttribute('data-page') === page.nav) a.className = 'active';
  });
  document.title = (page ? page.title : 'Not found') + ' \u2013 Orrery dashboard';

  function show(html) {
    if (content.innerHTML !== html) content.innerHTML = html;
  }

  function poll() {
    if (inFlight) {
      pollAgain = true;  // a change came in meanwhile: fetch once more when this one is done
      return;
    }
    inFlight = true;
    var status = 0;
    fetch(page.api, { cache: 'no-store', headers: { Accept: 'application/json' } }).then(function (resp) {
      status = resp.status;
      return resp.text();
    }).then(function (text) {
      var data = null;
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = null;
      }
      var bs = [];
      if (status === 404 && page.notFound) {
        show(page.notFound());
      } else if (status < 200 || status >= 300 || !data || typeof data !== 'object') {
        var why = data && data.error ? data.error : (text || '').slice(0, 200);
        bs.push({ id: 'fetch-banner', html: 'The dashboard server answered ' + esc(status) + ' for <code>' + esc(page.api) +
          '</code>: ' + esc(why) + ' <span class="muted">(retrying)</span>' });
      } else {
        if (text !== lastText) {
          lastText = text;
          try {
            show(page.render(data));
          } catch (e) {
            bs.push({ id: 'render-banner', html: 'Could not draw this page: ' + esc(e && e.message) });
          }
        }
      }
      var redis = data && obj(data.redis);
      if (redis && redis.ok === false) {
        bs.unshift({ id: 'redis-banner', html: '<strong>Redis is unreachable</strong>' +
          (redis.address ? ' at <code>' + esc(redis.address) + '</code>' : '') + ': ' + esc(redis.error || 'unknown error') +
          ' <span class="muted">The lists below are empty until it is back.</span>' });
      }
      setBanners(bs);
      statusEl.textContent = (redis && redis.address ? 'Redis ' + redis.address + ' \u00b7 ' : '') + 'updated ' + clock();
      statusEl.className = 'status ' + (bs.length ? 'bad' : 'ok');
      lastOk = Date.now();
    }).catch(function (err) {
      setBanners([{ id: 'fetch-banner', html: '<strong>Cannot reach the dashboard server</strong> (' + esc(err && err.message || err) +
        '). ' + (lastOk ? 'Showing the data of ' + esc(new Date(lastOk).toLocaleTimeString()) + '; ' : '') +
        'retrying.' }]);
      statusEl.textContent = 'server unreachable';
      statusEl.className = 'status bad';
    }).then(function () {
      inFlight = false;
      if (pollAgain) {
        pollAgain = false;
        poll();
      }
    });
  }

  // Live updates (docs/dashboard.md "Live updates"): the server sends an event on
  // /api/events whenever what the pages show changed, and the page fetches its API then.
  // It polls every 2 s instead only when the browser has no EventSource, is headless, or the
  // stream cannot be had (refused, or given up by the browser).
  var pollTimer = null;
  function startPolling() {
    if (pollTimer === null) pollTimer = setInterval(poll, POLL_MS);
  }
  function listen() {
    // A headless browser taking a snapshot (virtual time, as tests/e2e/dashboard_browser_test.sh
    // does) waits for every open request to end, which a stream never does: it polls.
    if (typeof EventSource !== 'function' || /HeadlessChrome/.test(navigator.userAgent)) return startPolling();
    var events = new EventSource('/api/events');
    events.addEventListener('change', poll);
    events.onerror = function () {
      poll();  // shows what is wrong (the server unreachable, ...)
      // While CONNECTING the browser retries by itself; CLOSED means it gave up.
      if (events.readyState === EventSource.CLOSED) startPolling();
    };
  }

  if (!page) {
    content.innerHTML = renderNotFound();
    statusEl.textContent = '';
  } else {
    poll();
    listen();
  }
})();

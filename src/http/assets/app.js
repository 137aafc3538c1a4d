// headroom status page: header, live charts, process table and events.
//
// Data comes only from the daemon that served this page: /api/v1/history for
// the charts' past, /api/v1/stream (server-sent events, one per sample) for
// live updates, /api/v1/processes for the table and /api/v1/events for the
// events panel. Charts are drawn with uPlot (vendored, MIT). In the table a
// job's workers follow their root, indented, and a row with the job's total
// ends the group.
"use strict";

(function () {
  const WINDOW_SECONDS = 10 * 60;
  const TABLE_TOP = 40;
  const TABLE_REFRESH_MS = 2000;
  const EVENTS_REFRESH_MS = 10000;

  const $ = (id) => document.getElementById(id);

  // ---- formatting -------------------------------------------------------

  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  const MIB = 1048576;
  const POW2 = Array.from({ length: 60 }, (_, i) => 2 ** i);
  function fmtBytes(n) {
    if (n == null || !isFinite(n)) return "–";
    const neg = n < 0;
    let v = Math.abs(n);
    if (v < 1024) return (neg ? "-" : "") + Math.round(v) + " B";
    let u = 0;
    while (v >= 1024 && u < UNITS.length - 1) { v /= 1024; u++; }
    return (neg ? "-" : "") + (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " " + UNITS[u];
  }
  function fmtRate(n) {
    if (n == null) return "–";
    if (Math.abs(n) < 1024) return "0 B/s";
    return (n > 0 ? "+" : "") + fmtBytes(n) + "/s";
  }
  function fmtDuration(s) {
    if (s == null || !isFinite(s)) return "–";
    if (s >= 86400) return "> 1 d";
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    if (h) return h + " h " + m + " m";
    if (m) return m + " m " + sec + " s";
    return sec + " s";
  }
  function pct(part, whole) { return whole ? Math.round((part * 100) / whole) + "%" : "–"; }
  function isMl(p) {
    const k = p.workload.kind;
    return (k !== "python" && k !== "other") || (p.workload.frameworks || []).length > 0;
  }
  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // ---- charts -------------------------------------------------------------

  // Raw series, oldest first; `at` in seconds.
  const raw = { at: [], app: [], wired: [], compressed: [], other: [], cached: [], total: [],
                swap: [], gpu: [], psi: [], level: [] };
  const LEVEL = { normal: 0, warn: 1, critical: 2 };
  let swapTotal = 0;
  const charts = {};

  function addPoint(p) {
    const at = p.at / 1000;
    const n = raw.at.length;
    if (n && at <= raw.at[n - 1]) return false;
    const used = p.used;
    const known = (p.app || 0) + (p.wired || 0) + (p.compressed || 0);
    raw.at.push(at);
    raw.app.push(p.app);
    raw.wired.push(p.wired);
    raw.compressed.push(p.compressed);
    raw.other.push(Math.max(0, used - known));
    raw.cached.push(p.cached);
    raw.total.push(p.total);
    raw.swap.push(p.swap_used);
    raw.gpu.push(p.gpu_used);
    raw.psi.push(p.psi_some_avg10);
    raw.level.push(LEVEL[p.pressure]);
    const cutoff = at - WINDOW_SECONDS;
    while (raw.at.length && raw.at[0] < cutoff) {
      for (const k in raw) raw[k].shift();
    }
    return true;
  }

  const MEM_LAYERS = [
    ["app", "app", "--c-app"],
    ["wired", "wired", "--c-wired"],
    ["compressed", "compressed", "--c-compressed"],
    ["other", "other used", "--c-other"],
    ["cached", "cached", "--c-cached"],
  ];

  function memoryData() {
    // Cumulative sums, drawn top layer first so each band shows its own share.
    const sums = [];
    let acc = raw.at.map(() => 0);
    for (const [key] of MEM_LAYERS) {
      acc = acc.map((a, i) => a + (raw[key][i] || 0));
      sums.push(acc);
    }
    return [raw.at, ...sums.slice().reverse(), raw.total];
  }

  function baseOpts(el, series, extra) {
    const fg = cssVar("--fg"), grid = cssVar("--grid");
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    return Object.assign({
      width: Math.max(280, el.clientWidth),
      height: 180,
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      legend: { live: true },
      series: [{}].concat(series.map((x) => Object.assign({ points: { show: false } }, x))),
      // Byte axes step in powers of two: 256 MiB, 512 MiB, 1 GiB, ...
      axes: [axis, Object.assign({}, axis, { size: 70, incrs: POW2, values: (u, v) => v.map(fmtBytes) })],
      hooks: { draw: [(u) => { u._drawnPoints = u.data[0].length; }] },
    }, extra || {});
  }

  function buildCharts() {
    for (const k in charts) charts[k].destroy();
    const layersTopFirst = MEM_LAYERS.slice().reverse();
    const memEl = $("chart-memory");
    charts.memory = new uPlot(baseOpts(memEl,
      layersTopFirst.map(([key, label, color]) => ({
        label, stroke: cssVar(color), fill: cssVar(color), width: 1,
        value: (u, v, si, i) => (i == null ? "–" : fmtBytes(raw[key][i])),
      })).concat([{ label: "total", stroke: cssVar("--muted"), dash: [4, 4], width: 1,
        value: (u, v) => fmtBytes(v) }]),
      { scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, MIB)] } } },
    ), memoryData(), memEl);

    const swapEl = $("chart-swap");
    charts.swap = new uPlot(baseOpts(swapEl,
      [{ label: "swap used", stroke: cssVar("--c-swap"), fill: cssVar("--c-swap") + "55", width: 2,
         value: (u, v) => fmtBytes(v) }],
      { scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, swapTotal, MIB)] } } },
    ), [raw.at, raw.swap], swapEl);

    const gpuEl = $("chart-gpu");
    charts.gpu = new uPlot(baseOpts(gpuEl,
      [{ label: "GPU memory used", stroke: cssVar("--c-gpu"), fill: cssVar("--c-gpu") + "55", width: 2,
         value: (u, v) => fmtBytes(v) }],
      { scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max || 0, MIB)] } } },
    ), [raw.at, raw.gpu], gpuEl);

    const prEl = $("chart-pressure");
    const fg = cssVar("--fg"), grid = cssVar("--grid");
    charts.pressure = new uPlot(baseOpts(prEl,
      [
        { label: "PSI some avg10", scale: "%", stroke: cssVar("--c-psi"), width: 2,
          value: (u, v) => (v == null ? "–" : v.toFixed(2) + "%") },
        { label: "level", scale: "lvl", stroke: cssVar("--c-level"), width: 2,
          paths: uPlot.paths.stepped({ align: 1 }),
          value: (u, v) => (v == null ? "–" : ["normal", "warn", "critical"][v]) },
      ],
      {
        scales: { x: { time: true }, "%": { range: (u, min, max) => [0, Math.max(max || 0, 1)] },
                  lvl: { range: [0, 2.2] } },
        axes: [
          { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } },
          { scale: "%", stroke: fg, size: 50, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 },
            values: (u, v) => v.map((x) => x + "%") },
          { scale: "lvl", side: 1, stroke: fg, size: 70, grid: { show: false }, incrs: [1],
            values: (u, v) => v.map((x) => ["normal", "warn", "critical"][x] || "") },
        ],
      },
    ), [raw.at, raw.psi, raw.level], prEl);
  }

  function redraw() {
    charts.memory.setData(memoryData());
    charts.swap.setData([raw.at, raw.swap]);
    charts.gpu.setData([raw.at, raw.gpu]);
    charts.pressure.setData([raw.at, raw.psi, raw.level]);
    $("gpu-none").hidden = raw.gpu.some((v) => v != null);
    $("swap-none").hidden = swapTotal > 0 || raw.swap.some((v) => v > 0);
    // Without a cursor on it, a chart's legend shows the newest values.
    for (const k in charts) {
      const u = charts[k];
      if (u.cursor.idx == null && u.data[0].length) u.setLegend({ idx: u.data[0].length - 1 });
    }
  }

  function resize() {
    for (const [k, id] of [["memory", "chart-memory"], ["swap", "chart-swap"], ["gpu", "chart-gpu"],
                           ["pressure", "chart-pressure"]]) {
      if (charts[k]) charts[k].setSize({ width: Math.max(280, $(id).clientWidth), height: 180 });
    }
  }

  // ---- header -------------------------------------------------------------

  function showSample(s) {
    const level = s.pressure.level;
    const pr = $("pressure");
    pr.className = "pressure " + level;
    pr.textContent = "pressure: " + level;
    const m = s.system;
    $("mem-used").textContent = fmtBytes(m.used) + " of " + fmtBytes(m.total) + " (" + pct(m.used, m.total) + ")";
    $("mem-avail").textContent = fmtBytes(m.available);
    swapTotal = s.swap.total;
    sampleSource = s.source;
    $("swap").textContent = s.swap.total ? fmtBytes(s.swap.used) + " of " + fmtBytes(s.swap.total) : "none";
    const gpus = s.gpus || [];
    const used = gpus.reduce((a, g) => a + (g.memory_used || 0), 0);
    const total = gpus.reduce((a, g) => a + (g.memory_total || 0), 0);
    $("gpu").textContent = gpus.length ? fmtBytes(used) + (total ? " of " + fmtBytes(total) : "") : "none";
    $("footer-sample").textContent = "last sample " + new Date(s.taken_at).toLocaleTimeString() +
      " (" + s.source + " sampler, " + (s.sample_micros / 1000).toFixed(1) + " ms) · " +
      s.processes + " processes, " + s.ml_processes + " ML workloads" + (s.fast_mode ? " · fast sampling" : "");
  }

  // ---- process table ------------------------------------------------------

  let rows = [];
  let sampleSource = "";
  let sortKey = "footprint", sortAsc = false;
  let tableBusy = false, tableAt = 0;

  const SORT = {
    pid: (r) => r.pid,
    name: (r) => displayName(r).toLowerCase(),
    user: (r) => (r.user || String(r.uid ?? "")).toLowerCase(),
    workload: (r) => r.workload.kind,
    where: (r) => whereText(r),
    footprint: (r) => r.footprint,
    growth: (r) => r.growth_bytes_per_second ?? -Infinity,
    eta: (r) => r.time_to_exhaustion_seconds ?? Infinity,
    gpu: (r) => r.gpu_memory ?? -1,
    rule: (r) => ruleText(r),
    command: (r) => (r.argv || []).join(" "),
  };

  // Where a process runs, as its cgroup says: "ml/train-0 · trainer" for a
  // pod's container, "jupyter-ana" for a Docker container, "slurm 42.0" for
  // a job step, the systemd unit otherwise.
  function whereText(r) {
    const l = r.labels;
    if (!l) return "";
    if (l.pod) return l.namespace + "/" + l.pod + (l.container ? " · " + l.container : "");
    if (l.pod_uid) return "pod " + l.pod_uid.slice(0, 8) + "…";
    if (l.container) return l.container;
    if (l.container_id) return (l.runtime ? l.runtime + " " : "") + l.container_id.slice(0, 12);
    if (l.slurm_job) return "slurm " + l.slurm_job + (l.slurm_step ? "." + l.slurm_step : "");
    return l.unit || l.slice || "";
  }

  function whereTitle(r) {
    const l = r.labels;
    if (!l) return null;
    return Object.keys(l).filter((k) => k !== "private_names").map((k) => k + ": " + l[k]).join("\n");
  }

  // A Jupyter kernel is named by its notebook where its server said which.
  function displayName(r) {
    return (r.workload && r.workload.notebook) || r.name;
  }

  function ruleText(r) {
    if (!Array.isArray(r.rules) || !r.rules.length) return "—";
    return r.rules.map((m) => (m.rule || m.name || "?") + (m.state ? ": " + m.state : "")).join(", ");
  }

  // Its memory cgroup's limit where that stops it before the machine does
  // (a container, a pod, a Slurm job), whether or not a rule watches it.
  function ceilingText(r) {
    const c = r.ceiling;
    if (!c || !c.binding) return "";
    return "cgroup limit " + fmtBytes(c.limit) + ", " + fmtBytes(c.room) + " room";
  }

  function ceilingTitle(r) {
    const c = r.ceiling;
    if (!c) return null;
    return "memory cgroup " + c.cgroup + ": " + c.limit_file + " " + fmtBytes(c.limit) +
      ", " + fmtBytes(c.usage) + " charged, " + fmtBytes(c.room) + " room" +
      (c.binding ? " (less than the machine's available memory: its OOM killer stops it first)" : "");
  }

  async function getJson(url) {
    const res = await fetch(url, { cache: "no-store" });
    if (!res.ok) {
      let msg = res.status + " " + res.statusText;
      try { msg = (await res.json()).error || msg; } catch (e) { /* not JSON */ }
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return res.json();
  }

  async function refreshTable() {
    if (tableBusy) return;
    tableBusy = true;
    tableAt = Date.now();
    try {
      // Every ML workload, plus the largest processes of any kind.
      const [top, ml] = await Promise.all([
        getJson("/api/v1/processes?sort=footprint&limit=" + TABLE_TOP),
        getJson("/api/v1/processes?workload=ml&limit=500"),
      ]);
      const byPid = new Map();
      for (const p of top.processes.concat(ml.processes)) byPid.set(p.pid, p);
      rows = Array.from(byPid.values());
      $("procs-note").textContent = "every ML workload (" + ml.matched + ") and the " + TABLE_TOP +
        " largest processes · growth over the last " + top.growth_window_seconds + " s";
      renderTable();
    } catch (e) {
      $("procs-note").textContent = "cannot load processes: " + e.message;
    } finally {
      tableBusy = false;
    }
  }

  function cell(tr, text, cls, title) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (title) td.title = title;
    tr.appendChild(td);
    return td;
  }

  // How this machine's footprints count shared memory unless a row says
  // otherwise: only another basis is written beside a footprint.
  function usualBasis() {
    return sampleSource === "macos" ? "phys_footprint" : "rss";
  }

  function footprintText(r) {
    let t = (r.detail === "estimated" ? "~" : "") + fmtBytes(r.footprint);
    if (r.basis && r.basis !== usualBasis()) t += " " + r.basis;
    return t;
  }

  // Rows in table order: each row that is no listed root's worker, sorted;
  // a root's workers after it (largest first), then its job's total.
  function grouped() {
    const f = SORT[sortKey];
    const roots = new Map();
    for (const r of rows) if (r.job_role === "root" && r.job_total) roots.set(r.pid, r);
    const workers = new Map();
    const heads = [];
    for (const r of rows) {
      if (r.job_role === "worker" && roots.has(r.job)) {
        if (!workers.has(r.job)) workers.set(r.job, []);
        workers.get(r.job).push(r);
      } else {
        heads.push(r);
      }
    }
    heads.sort((a, b) => {
      const x = f(a), y = f(b);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return (sortAsc ? c : -c) || b.footprint - a.footprint || a.pid - b.pid;
    });
    const out = [];
    for (const r of heads) {
      out.push({ kind: "process", r });
      if (!roots.has(r.pid)) continue;
      const ws = (workers.get(r.pid) || []).sort((a, b) => b.footprint - a.footprint || a.pid - b.pid);
      for (const w of ws) out.push({ kind: "worker", r: w });
      out.push({ kind: "job", r });
    }
    return out;
  }

  function processRow(r, worker) {
    const tr = document.createElement("tr");
    tr.dataset.pid = r.pid;
    const cls = [];
    if (isMl(r)) cls.push("ml");
    if (worker) cls.push("worker");
    if (r.job_role === "root") cls.push("job-root");
    tr.className = cls.join(" ");
    cell(tr, (worker ? "└ " : "") + r.pid, "num");
    if (r.workload.notebook) {
      const td = cell(tr, r.workload.notebook, "notebook",
        r.name + " · " + (r.workload.kernel_name || "kernel") + " " + (r.workload.kernel_id || ""));
      td.dataset.notebook = r.workload.notebook;
    } else {
      cell(tr, r.name, worker ? "name" : null, worker ? "worker of " + r.job : null);
    }
    cell(tr, r.user || (r.uid != null ? String(r.uid) : "?"));
    const kind = r.workload.kind + (r.workload.kernel_id ? "*" : "");
    cell(tr, kind, "workload", (r.workload.evidence || []).join("; "));
    cell(tr, whereText(r), "where", whereTitle(r));
    cell(tr, footprintText(r),
      "num" + (r.detail === "estimated" ? " est" : ""),
      "resident " + fmtBytes(r.resident) + (r.swapped != null ? ", swapped " + fmtBytes(r.swapped) : "") +
      (r.basis ? " · counted by " + r.basis : ""));
    const g = r.growth_bytes_per_second;
    cell(tr, fmtRate(g), "num" + (g != null && g >= 1048576 ? " grow" : ""));
    const eta = r.time_to_exhaustion_seconds;
    cell(tr, fmtDuration(eta), "num" + (eta != null && eta < 600 ? " eta-soon" : ""));
    cell(tr, r.gpu_memory != null ? fmtBytes(r.gpu_memory) : "–", "num");
    const limit = ceilingText(r);
    cell(tr, limit ? limit + " · " + ruleText(r) : ruleText(r), limit ? "ceiling" : null, ceilingTitle(r));
    // Another user's command line is hidden from this viewer (as ps hides it).
    const cmd = (r.argv && r.argv.length) ? r.argv.join(" ") : "[" + r.name + "]";
    cell(tr, cmd, "command", r.redacted ? "another user's process: its command line is shown to root and its owner only" : cmd);
    return tr;
  }

  // The words of a job's total row: "job: kernel + 8 workers".
  function jobText(root) {
    const n = root.job_total.workers;
    const what = root.workload.kind === "jupyter" ? "kernel" : root.name;
    return "job: " + what + " + " + n + " worker" + (n === 1 ? "" : "s");
  }

  function jobRow(root) {
    const t = root.job_total;
    const tr = document.createElement("tr");
    tr.className = "job-total";
    tr.dataset.job = root.pid;
    cell(tr, "");
    cell(tr, jobText(root), "job-name");
    cell(tr, "");
    cell(tr, "");
    cell(tr, whereText(root), "where");
    cell(tr, fmtBytes(t.footprint) + " (" + t.basis + ")", "num",
      t.basis === "pss" ? "shared pages counted once" : "a page shared by members is counted in each");
    cell(tr, "–", "num");
    cell(tr, "–", "num");
    cell(tr, t.gpu_memory != null ? fmtBytes(t.gpu_memory) : "–", "num");
    cell(tr, "");
    cell(tr, "members " + t.members.join(", "), "command");
    return tr;
  }

  function renderTable() {
    const tbody = document.querySelector("#procs tbody");
    const frag = document.createDocumentFragment();
    for (const g of grouped()) {
      if (g.kind === "job") frag.appendChild(jobRow(g.r));
      else frag.appendChild(processRow(g.r, g.kind === "worker"));
    }
    tbody.replaceChildren(frag);
    for (const th of document.querySelectorAll("#procs th")) {
      th.classList.toggle("sorted", th.dataset.key === sortKey);
      th.classList.toggle("asc", th.dataset.key === sortKey && sortAsc);
    }
  }

  for (const th of document.querySelectorAll("#procs th")) {
    th.addEventListener("click", () => {
      const key = th.dataset.key;
      if (key === sortKey) sortAsc = !sortAsc;
      else { sortKey = key; sortAsc = ["pid", "name", "user", "workload", "eta", "rule", "command"].includes(key); }
      renderTable();
    });
  }

  // ---- events -------------------------------------------------------------

  const events = { loaded: false, count: 0 };

  async function refreshEvents() {
    const list = $("events");
    const since = Date.now() - 24 * 3600 * 1000;
    try {
      const body = await getJson("/api/v1/events?limit=50&since=" + since);
      const items = (body.events || []).slice(-50).reverse();
      events.count = items.length;
      if (!items.length) {
        list.replaceChildren(emptyEvent());
      } else {
        const frag = document.createDocumentFragment();
        for (const ev of items) {
          const li = document.createElement("li");
          const at = ev.at != null ? new Date(ev.at).toLocaleTimeString() + " " : "";
          li.textContent = at + (ev.message || ev.kind || JSON.stringify(ev));
          frag.appendChild(li);
        }
        list.replaceChildren(frag);
      }
    } catch (e) {
      // Not reachable: the panel stays "no events yet", with the reason.
      list.replaceChildren(emptyEvent(e.message));
    }
    events.loaded = true;
  }

  function emptyEvent(why) {
    const li = document.createElement("li");
    li.className = "empty";
    li.textContent = "no events yet" + (why ? " (" + why + ")" : "");
    return li;
  }

  // ---- wiring -------------------------------------------------------------

  const status = { history: false, samples: 0, stream: "connecting" };

  async function start() {
    try {
      const h = await getJson("/api/v1/history?minutes=" + WINDOW_SECONDS / 60);
      for (const p of h.points) addPoint(p);
      status.history = true;
    } catch (e) {
      // 503 before the first sample: the stream fills the charts.
    }
    buildCharts();
    redraw();
    window.addEventListener("resize", resize);
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
      buildCharts();
      redraw();
    });

    const es = new EventSource("/api/v1/stream");
    const conn = $("conn");
    es.addEventListener("open", () => {
      status.stream = "live";
      conn.className = "conn live";
      conn.textContent = "live";
    });
    es.addEventListener("error", () => {
      status.stream = "reconnecting";
      conn.className = "conn down";
      conn.textContent = "reconnecting…";
    });
    es.addEventListener("sample", (msg) => {
      let s;
      try { s = JSON.parse(msg.data); } catch (e) { return; }
      status.samples++;
      showSample(s);
      if (s.point && addPoint(s.point)) redraw();
      if (Date.now() - tableAt >= TABLE_REFRESH_MS) refreshTable();
    });
    refreshTable();
    refreshEvents();
    setInterval(refreshEvents, EVENTS_REFRESH_MS);
  }

  // For tests and the curious: what the page has shown so far.
  window.headroomPage = {
    status,
    events,
    rows: () => rows.map((r) => ({ pid: r.pid, name: r.name, workload: r.workload.kind,
                                   job: r.job ?? null, role: r.job_role ?? null, basis: r.basis ?? null })),
    // The job rows as shown, in table order: root pid and text.
    jobs: () => Array.from(document.querySelectorAll("#procs tbody tr.job-total")).map((tr) => ({
      root: +tr.dataset.job,
      text: tr.textContent,
      name: tr.children[1].textContent,
      footprint: tr.children[4].textContent,
    })),
    // Per chart: how many points the last draw had, and the share of the plot
    // area that has ink on it.
    charts: () => {
      const out = {};
      for (const k in charts) {
        const u = charts[k];
        const { left, top, width, height } = u.bbox;
        let inked = 0;
        if (width > 0 && height > 0) {
          const px = u.ctx.getImageData(left, top, width, height).data;
          let n = 0;
          for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
          inked = n / (width * height);
        }
        out[k] = { points: u._drawnPoints || 0, inked };
      }
      return out;
    },
  };

  start();
})();

// intcc dashboard: history on load (/api/snapshot), then one update a second (/api/events).
// A busy sink carries thousands of flows: the page keeps every flow's points but draws
// charts only for the flows chosen in the list and the worst few; the rest are listed,
// searchable, one click from their charts.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token");
  const q = (extra) => { const p = new URLSearchParams(extra || {}); if (token) p.set("token", token); return "?" + p; };
  const WORST_DRAWN = 4;          // flows drawn without being chosen: the worst by loss
  const ALL_DRAWN_UP_TO = 8;      // ... or every flow while there are no more than this
  const LIST_ROWS = 50;           // rows of the flow list shown at once
  const LOSS_WINDOW_S = 10;
  const pct = { scale: 100, range: () => [0, 100] };
  const counts = { range: (u, min, max) => [0, Math.max(1, (max || 0) * 1.1)] };
  // [id, title, [[field, label]], options]: scale multiplies the values, range fixes the y axis
  const HOP_CHARTS = [
    ["occupancy", "queue occupancy (%)", [["occupancy", "mean"], ["occupancy_max", "max"]], pct],
    ["losses", "drops and link losses /s", [["drops", "queue drops"], ["link_losses", "link losses"]], counts],
    ["arrival", "arrival rate (pkt/s)", [["arrival_pps", "arrivals"]], counts],
    ["rssi", "RSSI (dBm)", [["rssi_dbm", "RSSI"]], { wireless: true }],
  ];
  const FLOW_CHARTS = [
    ["rate", "delivered at the sink (pkt/s)", [["packets", "delivered"]], counts],
    ["loss", "losses /s by cause", [["lost_congestion", "congestion"], ["lost_link", "link"], ["lost_reconfig", "reconfiguration"]], counts],
    ["owd", "one-way delay (ms)", [["owd_ms", "delay"]], counts],
  ];
  // the sender's side, when its agent publishes its decisions (--decisions / --broker)
  const DECISION_CHARTS = [
    ["cwnd", "sender's window (KB)", [["cwnd_kb", "cwnd"]], counts],
    ["responses", "loss responses /s", [["keep", "kept (L1)"], ["gentle", "0.95 (L2)"], ["cut", "cut"],
                                        ["timeout", "timeout"]], counts],
  ];
  const COLOURS = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a"];
  const chosenFromHash = new URLSearchParams(location.hash.slice(1)).get("flows");
  // what the page holds: per series key the points by second; charts by id
  // hooks: called after every update is drawn (tests and benchmarks time the page with them)
  const dash = window.intccDash = { series: {}, charts: {}, latest: { hops: {}, flows: {}, decisions: {} }, updates: 0,
                                    lastUpdate: null, seq: 0, events: [], hooks: [], verdicts: {}, paths: {}, ccas: {}, hopCcas: {},
                                    chosen: new Set(chosenFromHash ? chosenFromHash.split(",") : []),
                                    drawn: [], loss: {}, firstChartMs: null };
  const esc = (s) => String(s).replace(/[&<>"]/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

  function merge(key, points) {
    const s = dash.series[key] || (dash.series[key] = new Map());
    for (const p of points) s.set(p.t, p);
  }

  function sorted(key) {
    return [...(dash.series[key] || new Map()).values()].sort((a, b) => a.t - b.t);
  }

  function chart(container, id, title, fields, key, opt) {
    let c = dash.charts[id];
    const pts = sorted(key);
    const scale = opt.scale || 1;
    // a single point gets an empty second a minute before it: uPlot spans one x value over years
    const xs = pts.length === 1 ? [pts[0].t - 60, pts[0].t] : pts.map(p => p.t);
    const pad = pts.length === 1 ? [null] : [];
    const data = [xs].concat(fields.map(([f]) => pad.concat(pts.map(p => p[f] == null ? null : p[f] * scale))));
    if (!c) {
      const div = document.createElement("div");
      div.className = "chart"; div.id = id;
      div.innerHTML = `<h3>${esc(title)}</h3>`;
      container.appendChild(div);
      const opts = { width: 380, height: 160, series: [{}].concat(fields.map(([, label], i) =>
        ({ label, stroke: COLOURS[i % COLOURS.length], width: 1.5 }))),
        scales: {
          x: { time: true },
          ...(opt.range ? { y: { range: opt.range } } : {}) } };
      c = dash.charts[id] = { plot: new uPlot(opts, data, div), points: pts.length, div };
      if (dash.firstChartMs === null) dash.firstChartMs = performance.now();
    } else {
      c.plot.setData(data);
    }
    c.points = pts.length;
    c.last = pts.length ? pts[pts.length - 1] : null;
  }

  function dropCharts(prefix) {
    for (const id of Object.keys(dash.charts)) {
      if (!id.startsWith(prefix)) continue;
      dash.charts[id].plot.destroy();
      dash.charts[id].div.remove();
      delete dash.charts[id];
    }
  }

  function group(containerId, key, title) {
    let g = document.getElementById(`${containerId}-${key}`);
    if (!g) {
      g = document.createElement("div");
      g.id = `${containerId}-${key}`;
      g.className = "group";
      g.innerHTML = `<h3></h3><div class="charts"></div>`;
      document.getElementById(containerId).appendChild(g);
    }
    g.querySelector("h3").textContent = title;
    return g.querySelector(".charts");
  }

  // -- which flows are drawn --------------------------------------------------------------
  function flowLoss(fid) {
    // points are keyed by their second: the window's seconds are looked up, not the history scanned
    const s = dash.series[`flow/${fid}`] || new Map();
    const now = Math.floor(dash.now || 0);
    let sent = 0, lost = 0, link = 0, pps = 0;
    for (let t = now - LOSS_WINDOW_S; t <= now; t++) {
      const p = s.get(t);
      if (!p) continue;
      const gone = p.lost_congestion + p.lost_link + (p.lost_reconfig || 0);
      sent += p.packets + gone; lost += gone; link += p.lost_link;
      pps = p.packets;
    }
    return { loss: sent ? lost / sent : 0, linkShare: lost ? link / lost : null, pps };
  }

  function drawnFlows() {
    const ids = Object.keys(dash.latest.flows);
    if (ids.length <= ALL_DRAWN_UP_TO) return ids;
    const worst = ids.map(fid => [fid, dash.loss[fid].loss]).sort((a, b) => b[1] - a[1]).slice(0, WORST_DRAWN)
      .map(([fid]) => fid);
    return [...new Set([...[...dash.chosen].filter(fid => fid in dash.latest.flows), ...worst])];
  }

  function algorithmOf(fid) {
    const d = dash.latest.decisions[fid];
    return d ? d.algorithm : null;
  }

  function verdictOf(fid) {
    const v = dash.verdicts[fid];
    // an identification still undecided shows its most likely hypothesis with a "?"
    return v ? `${v.estimate}${v.committed === false ? "?" : ""} (${Math.round(v.confidence * 100)} %)` : null;
  }

  function ccaOf(fid) {
    // a node's classifier (Dragonfly) on the flow's own CCA
    const c = dash.ccas[fid];
    return c ? `${c.cca} (${Math.round(c.confidence * 100)} %, node ${c.node_id})` : null;
  }

  function hopCcas(node) {
    const named = dash.hopCcas[node];
    return named ? Object.entries(named).sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c} ${n}`).join(", ") : "";
  }

  function flowTitle(fid) {
    const f = dash.latest.flows[fid];
    return `flow ${fid} [${f.src}]:${f.sport} → [${f.dst}]:${f.dport}` +
      (algorithmOf(fid) ? ` — sender on ${algorithmOf(fid)}` : "") +
      (verdictOf(fid) ? `, competitor looks like ${verdictOf(fid)}` : "") +
      (ccaOf(fid) ? `, in the network: ${ccaOf(fid)}` : "");
  }

  // -- drawing ----------------------------------------------------------------------------
  function drawCharts() {
    for (const node of Object.keys(dash.latest.hops)) {
      const h = dash.latest.hops[node];
      const box = group("hop-charts", node, `node ${node}`);
      const wireless = sorted(`hop/${node}`).some(p => p.rssi_dbm != null) || h.rssi_dbm != null;
      for (const [id, title, fields, opt] of HOP_CHARTS)
        if (!opt.wireless || wireless) chart(box, `hop-${node}-${id}`, title, fields, `hop/${node}`, opt);
    }
    const drawn = drawnFlows();
    for (const fid of dash.drawn) {
      if (drawn.includes(fid)) continue;
      dropCharts(`flow-${fid}-`); dropCharts(`decision-${fid}-`);
      const g = document.getElementById(`flow-charts-${fid}`);
      if (g) g.remove();
    }
    dash.drawn = drawn;
    for (const fid of drawn) {
      const box = group("flow-charts", fid, flowTitle(fid));
      for (const [id, title, fields, opt] of FLOW_CHARTS) chart(box, `flow-${fid}-${id}`, title, fields, `flow/${fid}`, opt);
      const d = dash.latest.decisions[fid];
      if (d) {
        for (const [id, title, fields, opt] of DECISION_CHARTS)
          chart(box, `decision-${fid}-${id}`, `${title} — ${d.algorithm}`, fields, `decision/${fid}`, opt);
        let why = box.parentElement.querySelector(".why");
        if (!why) { why = document.createElement("p"); why.className = "why"; box.parentElement.appendChild(why); }
        why.textContent = `last decision: ${d.event}, ${d.reason}`;
      }
    }
    const n = Object.keys(dash.latest.flows).length;
    document.getElementById("flow-charts-note").textContent = n > drawn.length ?
      `charts of ${drawn.length} of ${n} flows: those chosen in the list above and the ${WORST_DRAWN} with the most loss` : "";
  }

  function nodeClass(h) {
    const occ = h.queue_occupancy || 0;
    return occ > 0.8 ? "bad" : occ > 0.3 ? "busy" : "ok";
  }

  function drawPaths() {
    const box = document.getElementById("paths");
    const ids = dash.drawn.filter(fid => dash.paths[fid]);
    if (!ids.length) return;
    box.innerHTML = "";
    for (const fid of ids) {
      const row = document.createElement("div");
      row.className = "path"; row.dataset.flow = fid;
      const alg = algorithmOf(fid), verdict = verdictOf(fid);
      row.innerHTML = `<span class="label">${esc(fid)}` +
        `<span class="alg">${alg ? "sender: " + esc(alg) : "sender: not reporting"}</span>` +
        `<span class="verdict">${verdict ? "competitor: " + esc(verdict) : "no verdict"}</span></span>`;
      dash.paths[fid].forEach((node, i) => {
        const h = dash.latest.hops[node] || { node_id: node };
        const pts = sorted(`hop/${node}`);
        const last = pts.length ? pts[pts.length - 1] : {};
        const wireless = h.rssi_dbm !== null && h.rssi_dbm !== undefined;
        if (i) row.insertAdjacentHTML("beforeend", `<span class="arrow">→</span>`);
        row.insertAdjacentHTML("beforeend",
          `<div class="node ${nodeClass(h)}" data-node="${esc(node)}"><b>node ${esc(node)}</b>` +
          `queue <span class="occ">${((h.queue_occupancy || 0) * 100).toFixed(1)}</span> %, ` +
          `drops ${last.drops ?? 0}/s, link losses ${last.link_losses ?? 0}/s` +
          (wireless ? `<br>RSSI ${h.rssi_dbm} dBm, MCS ${h.mcs}, ${(h.data_rate_kbps / 1000).toFixed(1)} Mbit/s` : "") +
          (hopCcas(node) ? `<br><span class="hop-ccas">CCAs here: ${esc(hopCcas(node))}</span>` : "") +
          `</div>`);
      });
      box.appendChild(row);
    }
    const n = Object.keys(dash.paths).length;
    document.getElementById("paths-note").textContent = n > ids.length ? `the paths of ${ids.length} of ${n} flows (those charted below)` : "";
  }

  function drawList() {
    const search = document.getElementById("flow-search").value.trim().toLowerCase();
    const ids = Object.keys(dash.latest.flows);
    const rows = [];
    for (const fid of ids) {
      const f = dash.latest.flows[fid];
      const text = `${fid} ${f.src} ${f.dst} ${f.sport} ${f.dport} ${algorithmOf(fid) || ""} ${verdictOf(fid) || ""} ${ccaOf(fid) || ""}`.toLowerCase();
      if (!search || text.includes(search)) rows.push([fid, f, dash.loss[fid] || flowLoss(fid)]);
    }
    rows.sort((a, b) => b[2].loss - a[2].loss);
    const drawn = new Set(dash.drawn);
    document.querySelector("#flow-list tbody").innerHTML = rows.slice(0, LIST_ROWS).map(([fid, f, l]) =>
      `<tr data-flow="${esc(fid)}"><td><input type="checkbox" class="choose" ${dash.chosen.has(fid) ? "checked" : ""}` +
      ` title="draw this flow's charts"></td><td>${esc(fid)}</td><td>[${esc(f.src)}]:${f.sport} → [${esc(f.dst)}]:${f.dport}</td>` +
      `<td>${(l.loss * 100).toFixed(2)} %</td><td>${l.pps}</td><td>${esc(algorithmOf(fid) || "–")}</td>` +
      `<td>${esc(verdictOf(fid) || "–")}</td><td class="cca">${esc(ccaOf(fid) || "–")}</td>` +
      `<td>${drawn.has(fid) ? "charted" : ""}</td></tr>`).join("");
    document.getElementById("flow-count").textContent = `${ids.length} flows` +
      (search ? `, ${rows.length} match` : "") + (rows.length > LIST_ROWS ? `, the ${LIST_ROWS} with the most loss shown` : "");
  }

  function drawWorst(w) {
    if (!w) return;
    document.querySelector("#worst-flows tbody").innerHTML = w.flows_by_loss.map(f =>
      `<tr data-flow="${esc(f.flow_id)}"><td>${esc(f.flow_id)}</td><td>${(f.loss * 100).toFixed(2)} %</td>` +
      `<td class="link-share">${f.link_share === null ? "–" : (f.link_share * 100).toFixed(0) + " %"}</td></tr>`).join("");
    document.querySelector("#worst-hops tbody").innerHTML = w.hops_by_queue.map(h =>
      `<tr><td>${esc(h.node_id)}</td><td>${(h.occupancy * 100).toFixed(1)} %</td></tr>`).join("");
  }

  // RTT separation's queues at each hop and the flows in them (absent where ports have one FIFO);
  // a busy queue names its first few flows and counts the rest
  const QUEUE_FLOWS_SHOWN = 8;
  function drawQueues(queues) {
    if (!queues) return;
    const rows = [];
    for (const node of Object.keys(queues).sort((a, b) => a - b)) {
      for (const idx of Object.keys(queues[node]).sort((a, b) => a - b)) {
        const q = queues[node][idx];
        const occ = q.occupancy === null || q.occupancy === undefined ? "–" : (q.occupancy * 100).toFixed(1) + " %";
        rows.push(`<tr><td>${esc(node)}</td><td>${esc(idx)} of ${esc(q.of)}</td><td>${esc(q.weight)}</td>` +
          `<td>${occ}</td><td>${(q.depth_bytes / 1e3).toFixed(1)} / ${(q.capacity_bytes / 1e3).toFixed(1)} kB</td>` +
          `<td><b>${q.flows.length}</b>: ${q.flows.slice(0, QUEUE_FLOWS_SHOWN).map(f => `<span data-flow="${esc(f)}">${esc(f)}</span>`).join(" ")}` +
          `${q.flows.length > QUEUE_FLOWS_SHOWN ? ` and ${q.flows.length - QUEUE_FLOWS_SHOWN} more` : ""}</td></tr>`);
      }
    }
    document.getElementById("queues-section").hidden = rows.length === 0;
    document.querySelector("#queues tbody").innerHTML = rows.join("");
  }

  function drawHealth(u) {
    const conn = document.getElementById("conn");
    const broker = u.feed && u.feed.broker;
    const up = broker ? broker.connected : true;
    conn.className = "state " + (up ? "up" : "down");
    conn.textContent = up ? "broker connected" : "broker disconnected";
    const r = (u.health && u.health.records_per_s) || {};
    document.getElementById("rates").textContent =
      Object.entries(r).map(([k, v]) => `${k} ${v}/s`).join(", ");
    document.getElementById("feed").textContent = broker ?
      `received ${broker.received}, rejected ${broker.rejected}` : "–";
  }

  // active identification: what it named (or leans to) and the stages' measurements behind it
  function identifyText(e) {
    const pct = Math.round(e.confidence * 100);
    const said = e.committed ? `competitor named ${e.estimate} (${pct} %)`
                             : `identifying: most likely ${e.estimate} (${pct} %)`;
    const measured = (e.evidence || []).filter(([, v]) => v !== null)
      .map(([stage, v]) => `${stage} ${Number(v).toFixed(2)}`).join(", ");
    return measured ? `${said}; ${measured}` : said;
  }

  function drawEvents(events) {
    for (const e of events || []) {
      if (dash.events.some(x => x.t === e.t && x.flow_id === e.flow_id && x.kind === e.kind)) continue;
      dash.events.push(e);
      const li = document.createElement("li");
      const when = new Date(e.t * 1000).toLocaleTimeString();
      li.textContent = e.kind === "switch" ? `${when} flow ${e.flow_id}: ${e.from} → ${e.to} ` +
                                             (e.verdict ? `(verdict ${e.verdict})` : "(to identify the competitor anew)")
                     : e.kind === "identify" ? `${when} flow ${e.flow_id}: ${identifyText(e)}`
                     : `${when} flow ${e.flow_id}: competitor looks like ${e.estimate}`;
      const list = document.getElementById("events");
      list.prepend(li);
      while (list.children.length > 200) list.lastChild.remove();
    }
  }

  // the list holds still under the pointer: rewritten every second, a row would be replaced
  // between a person's press and release, and the click lost
  let listHeld = false;
  const list = document.getElementById("flow-list");
  list.addEventListener("mouseenter", () => { listHeld = true; });
  list.addEventListener("mouseleave", () => { listHeld = false; drawList(); });

  function redraw(listToo = true) {
    dash.loss = {};
    for (const fid of Object.keys(dash.latest.flows)) dash.loss[fid] = flowLoss(fid);
    drawCharts(); drawPaths();
    if (listToo) drawList();
  }

  function apply(u) {
    for (const [node, h] of Object.entries(u.hops || {})) { merge(`hop/${node}`, h.points); if (h.latest) dash.latest.hops[node] = h.latest; }
    for (const [fid, f] of Object.entries(u.flows || {})) { merge(`flow/${fid}`, f.points); if (f.latest) dash.latest.flows[fid] = f.latest; }
    for (const [fid, d] of Object.entries(u.decisions || {})) { merge(`decision/${fid}`, d.points); if (d.latest) dash.latest.decisions[fid] = d.latest; }
    Object.assign(dash.verdicts, u.verdicts || {});
    if (u.ccas) dash.ccas = u.ccas;
    if (u.hop_ccas) dash.hopCcas = u.hop_ccas;
    if (u.paths) dash.paths = u.paths;
    dash.seq = u.seq; dash.now = u.t;
    redraw(!listHeld); drawWorst(u.worst); drawQueues(u.queues); drawHealth(u); drawEvents(u.events);
    dash.updates += 1; dash.lastUpdate = Date.now();
    for (const h of dash.hooks) h(u);
  }

  function choose(fid, on) {
    if (on) dash.chosen.add(fid); else dash.chosen.delete(fid);
    history.replaceState(null, "", dash.chosen.size ? `#flows=${[...dash.chosen].join(",")}` : location.pathname + location.search);
    redraw();
  }
  dash.choose = choose;

  document.getElementById("flow-search").addEventListener("input", drawList);
  document.querySelector("#flow-list tbody").addEventListener("change", (ev) => {
    const row = ev.target.closest("tr");
    if (row && ev.target.classList.contains("choose")) choose(row.dataset.flow, ev.target.checked);
  });

  function listen() {
    const es = new EventSource("api/events" + q({ seq: dash.seq }));
    es.addEventListener("update", (ev) => apply(JSON.parse(ev.data)));
    es.onerror = () => {
      const conn = document.getElementById("conn");
      conn.className = "state down"; conn.textContent = "dashboard unreachable, retrying…";
    };
  }

  fetch("api/snapshot" + q()).then(r => r.json()).then(apply).then(listen)
    .catch(() => { document.getElementById("conn").textContent = "snapshot failed, retrying…"; setTimeout(() => location.reload(), 3000); });
})();

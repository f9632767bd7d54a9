// intcc dashboard: history on load (/api/snapshot), then one update a second (/api/events).
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token");
  const q = (extra) => { const p = new URLSearchParams(extra || {}); if (token) p.set("token", token); return "?" + p; };
  const HOP_CHARTS = [
    ["occupancy", "queue occupancy", [["occupancy", "mean"], ["occupancy_max", "max"]]],
    ["losses", "drops and link losses /s", [["drops", "queue drops"], ["link_losses", "link losses"]]],
    ["arrival", "arrival rate (pkt/s)", [["arrival_pps", "arrivals"]]],
    ["rssi", "RSSI (dBm)", [["rssi_dbm", "RSSI"]]],
  ];
  const FLOW_CHARTS = [
    ["rate", "delivered at the sink (pkt/s)", [["packets", "delivered"]]],
    ["loss", "losses /s by cause", [["lost_congestion", "congestion"], ["lost_link", "link"]]],
    ["owd", "one-way delay (ms)", [["owd_ms", "delay"]]],
  ];
  // the sender's side, when its agent publishes its decisions (--decisions / --broker)
  const DECISION_CHARTS = [
    ["cwnd", "sender's window (KB)", [["cwnd_kb", "cwnd"]]],
    ["responses", "loss responses /s", [["keep", "kept (L1)"], ["gentle", "0.95 (L2)"], ["cut", "cut"],
                                        ["timeout", "timeout"]]],
  ];
  const COLOURS = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a"];
  // what the page holds: per series key the points by second; charts by id
  // hooks: called after every update is drawn (tests and benchmarks time the page with them)
  const dash = window.intccDash = { series: {}, charts: {}, latest: { hops: {}, flows: {}, decisions: {} }, updates: 0,
                                    lastUpdate: null, seq: 0, events: [], hooks: [] };

  function merge(key, points) {
    const s = dash.series[key] || (dash.series[key] = new Map());
    for (const p of points) s.set(p.t, p);
  }

  function chart(container, id, title, fields, key) {
    let c = dash.charts[id];
    const pts = [...(dash.series[key] || new Map()).values()].sort((a, b) => a.t - b.t);
    const data = [pts.map(p => p.t)].concat(fields.map(([f]) => pts.map(p => p[f] ?? null)));
    if (!c) {
      const div = document.createElement("div");
      div.className = "chart"; div.id = id;
      div.innerHTML = `<h3>${title}</h3>`;
      container.appendChild(div);
      const opts = { width: 380, height: 160, series: [{}].concat(fields.map(([, label], i) =>
        ({ label, stroke: COLOURS[i % COLOURS.length], width: 1.5 }))),
        // one point: a minute around it, not uPlot's years
        scales: { x: { time: true, range: (u, min, max) => min === max ? [min - 60, max + 1] : [min, max] } } };
      c = dash.charts[id] = { plot: new uPlot(opts, data, div), points: pts.length };
    } else {
      c.plot.setData(data);
    }
    c.points = pts.length;
    c.last = pts.length ? pts[pts.length - 1] : null;
  }

  function group(containerId, key, title) {
    let g = document.getElementById(`${containerId}-${key}`);
    if (!g) {
      g = document.createElement("div");
      g.id = `${containerId}-${key}`;
      g.innerHTML = `<h3>${title}</h3><div class="charts"></div>`;
      document.getElementById(containerId).appendChild(g);
    }
    return g.querySelector(".charts");
  }

  function drawAll() {
    for (const node of Object.keys(dash.latest.hops)) {
      const box = group("hop-charts", node, `node ${node}`);
      for (const [id, title, fields] of HOP_CHARTS) chart(box, `hop-${node}-${id}`, title, fields, `hop/${node}`);
    }
    for (const fid of Object.keys(dash.latest.flows)) {
      const f = dash.latest.flows[fid];
      const box = group("flow-charts", fid, `flow ${fid} [${f.src}]:${f.sport} → [${f.dst}]:${f.dport}`);
      for (const [id, title, fields] of FLOW_CHARTS) chart(box, `flow-${fid}-${id}`, title, fields, `flow/${fid}`);
      const d = dash.latest.decisions[fid];
      if (d) {
        for (const [id, title, fields] of DECISION_CHARTS)
          chart(box, `decision-${fid}-${id}`, `${title} — ${d.algorithm}`, fields, `decision/${fid}`);
        let why = box.parentElement.querySelector(".why");
        if (!why) { why = document.createElement("p"); why.className = "why"; box.parentElement.appendChild(why); }
        why.textContent = `last decision: ${d.event}, ${d.reason}`;
      }
    }
  }

  function nodeClass(h) {
    const occ = h.queue_occupancy || 0;
    return occ > 0.8 ? "bad" : occ > 0.3 ? "busy" : "ok";
  }

  function drawPaths(paths) {
    const box = document.getElementById("paths");
    const ids = Object.keys(paths || {});
    if (!ids.length) return;
    box.innerHTML = "";
    for (const fid of ids) {
      const row = document.createElement("div");
      row.className = "path"; row.dataset.flow = fid;
      row.innerHTML = `<span class="label">${fid}</span>`;
      paths[fid].forEach((node, i) => {
        const h = dash.latest.hops[node] || { node_id: node };
        const pts = [...(dash.series[`hop/${node}`] || new Map()).values()];
        const last = pts.length ? pts.sort((a, b) => a.t - b.t)[pts.length - 1] : {};
        const wireless = h.rssi_dbm !== null && h.rssi_dbm !== undefined;
        if (i) row.insertAdjacentHTML("beforeend", `<span class="arrow">→</span>`);
        row.insertAdjacentHTML("beforeend",
          `<div class="node ${nodeClass(h)}" data-node="${node}"><b>node ${node}</b>` +
          `queue <span class="occ">${((h.queue_occupancy || 0) * 100).toFixed(1)}</span> %, ` +
          `drops ${last.drops ?? 0}/s, link losses ${last.link_losses ?? 0}/s` +
          (wireless ? `<br>RSSI ${h.rssi_dbm} dBm, MCS ${h.mcs}, ${(h.data_rate_kbps / 1000).toFixed(1)} Mbit/s` : "") +
          `</div>`);
      });
      box.appendChild(row);
    }
  }

  function drawWorst(w) {
    if (!w) return;
    document.querySelector("#worst-flows tbody").innerHTML = w.flows_by_loss.map(f =>
      `<tr data-flow="${f.flow_id}"><td>${f.flow_id}</td><td>${(f.loss * 100).toFixed(2)} %</td>` +
      `<td class="link-share">${f.link_share === null ? "–" : (f.link_share * 100).toFixed(0) + " %"}</td></tr>`).join("");
    document.querySelector("#worst-hops tbody").innerHTML = w.hops_by_queue.map(h =>
      `<tr><td>${h.node_id}</td><td>${(h.occupancy * 100).toFixed(1)} %</td></tr>`).join("");
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

  function drawEvents(events) {
    for (const e of events || []) {
      if (dash.events.some(x => x.t === e.t && x.flow_id === e.flow_id && x.kind === e.kind)) continue;
      dash.events.push(e);
      const li = document.createElement("li");
      const when = new Date(e.t * 1000).toLocaleTimeString();
      li.textContent = e.kind === "switch" ? `${when} flow ${e.flow_id}: ${e.from} → ${e.to} (verdict ${e.verdict})`
                                           : `${when} flow ${e.flow_id}: competitor looks like ${e.estimate}`;
      document.getElementById("events").prepend(li);
    }
  }

  function apply(u) {
    for (const [node, h] of Object.entries(u.hops || {})) { merge(`hop/${node}`, h.points); if (h.latest) dash.latest.hops[node] = h.latest; }
    for (const [fid, f] of Object.entries(u.flows || {})) { merge(`flow/${fid}`, f.points); if (f.latest) dash.latest.flows[fid] = f.latest; }
    for (const [fid, d] of Object.entries(u.decisions || {})) { merge(`decision/${fid}`, d.points); if (d.latest) dash.latest.decisions[fid] = d.latest; }
    dash.seq = u.seq;
    drawAll(); drawPaths(u.paths); drawWorst(u.worst); drawHealth(u); drawEvents(u.events);
    dash.updates += 1; dash.lastUpdate = Date.now();
    for (const h of dash.hooks) h(u);
  }

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

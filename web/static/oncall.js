// The on-call page: live stock per activity and SKU (remaining, occupied,
// ordered, drift, accepted and rejected purchases per second), accept and
// reject rates of the whole edge, consumer lag, and the switches on-call
// needs at 3 a.m. — sold out on/off per SKU, activity online/offline, the
// degrade switches per activity (reserved users only, paused intake, poll
// interval) and the non-core buyer routes open/closed — each behind a
// confirmation step. Everything goes
// through the admin API with the bearer token. Charts (uPlot, vendored in
// uplot/) show the last minutes of the same samples: accepted and rejected
// per second, the consumer lag, and per SKU its remaining stock and its
// accepted and rejected purchases per second (the edge's
// seckill_edge_sku_purchases_total).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem("seckill.admin") || "";
  let prev = null; // last counters sample, for rates
  let prevSKU = null; // last per-SKU sample: {t, counts: {"activity-sku": {accepted, rejected}}}
  let pending = null; // the action waiting for confirmation

  async function call(method, path, body) {
    const r = await fetch(path, {
      method,
      headers: Object.assign({ Authorization: `Bearer ${token}` }, body ? { "Content-Type": "application/json" } : {}),
      body: body ? JSON.stringify(body) : undefined,
      cache: "no-store",
    });
    const text = await r.text();
    const data = text ? JSON.parse(text) : null;
    if (r.status === 401) { logout(); throw new Error("the admin token was refused"); }
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${data && data.message}`);
    return data;
  }

  function logout() {
    token = "";
    sessionStorage.removeItem("seckill.admin");
    $("login").hidden = false; $("board").hidden = true; $("logout").hidden = true;
  }
  $("logout").addEventListener("click", logout);
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem("seckill.admin", token);
    start();
  });

  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k.startsWith("on")) n.addEventListener(k.slice(2), v); else n.setAttribute(k, v);
    }
    for (const k of kids) n.append(k);
    return n;
  }

  // A two-step button: the first click asks, "Confirm" acts.
  function guarded(id, label, question, act) {
    if (pending && pending.id === id) {
      return el("span", { class: "confirm", id: `confirm-${id}` }, question + " ",
        el("button", { id: `yes-${id}`, onclick: async () => {
          pending = null;
          try { await act(); $("error").textContent = ""; } catch (e) { $("error").textContent = e.message; }
          refresh();
        } }, "Confirm"),
        el("button", { class: "secondary", onclick: () => { pending = null; refresh(); } }, "Cancel"));
    }
    return el("button", { id, class: "secondary", onclick: () => { pending = { id }; refresh(); } }, label);
  }

  function sum(counters, name, pred) {
    let n = 0;
    for (const c of counters) if (c.name === name && (!pred || pred(c.labels))) n += c.value;
    return n;
  }

  // Charts: one uPlot per series group, kept across refreshes (the tables
  // are rebuilt every second, the charts only get new data). Exposed as
  // window.seckillCharts for the browser test.
  const windowSec = 300;
  const charts = {};
  window.seckillCharts = charts;
  function chart(name, parent, title, series) {
    if (charts[name]) return charts[name];
    const box = el("div", { class: "chart", id: `chart-${name}` });
    if (parent.id === `chart-${name}`) parent.replaceWith(box); else parent.append(box);
    const opts = {
      // Two charts a row in the card (about 900px); uPlot draws at a fixed size.
      title, width: 440, height: 170,
      scales: { x: { time: true } },
      series: [{}].concat(series.map(([label, stroke]) => ({ label, stroke, width: 2, spanGaps: true }))),
    };
    const u = new uPlot(opts, [[]].concat(series.map(() => [])), box);
    charts[name] = u;
    return u;
  }
  // sample appends one point (x in unix seconds) and drops what is older
  // than the window.
  function sample(u, t, ...ys) {
    const d = u.data.map((a) => a.slice());
    d[0].push(t);
    ys.forEach((y, i) => d[i + 1].push(y));
    while (d[0].length && d[0][0] < t - windowSec) d.forEach((a) => a.shift());
    u.setData(d);
  }
  // skuCounts reads the per-SKU purchase counters, keyed "activity-sku".
  function skuCounts(counters) {
    const out = {};
    for (const c of counters) {
      if (c.name !== "seckill_edge_sku_purchases_total") continue;
      const k = `${c.labels.activity}-${c.labels.sku}`;
      const o = out[k] || (out[k] = { accepted: 0, rejected: 0 });
      if (c.labels.outcome === "accepted" || c.labels.outcome === "rejected") o[c.labels.outcome] += c.value;
    }
    return out;
  }
  // skuRates turns two samples into rates per second; a SKU without a
  // sample before, or whose counter went back (the process restarted), has
  // none yet (null).
  function skuRates(before, now) {
    const out = {};
    if (!before) return out;
    const dt = (now.t - before.t) / 1000;
    for (const [k, c] of Object.entries(now.counts)) {
      const b = before.counts[k];
      if (!b || dt <= 0 || c.accepted < b.accepted || c.rejected < b.rejected) continue;
      out[k] = { accepted: (c.accepted - b.accepted) / dt, rejected: (c.rejected - b.rejected) / dt };
    }
    return out;
  }

  function drawCharts(acts, reports, rates, lag, perSKU) {
    const t = Date.now() / 1000;
    if (rates) sample(chart("rates", $("chart-rates"), "accepted / rejected per second",
      [["accepted/s", "#1f8a4c"], ["rejected/s", "#d9352b"]]), t, rates.accepted, rates.rejected);
    sample(chart("lag", $("chart-lag"), "consumer lag (messages)", [["lag", "#b7791f"]]), t, lag ? lag.total : null);
    acts.forEach((a, i) => {
      for (const s of reports[i].skus) {
        // Side by side: the SKU's stock and its purchases.
        sample(chart(`stock-${a.id}-${s.skuId}`, $("chart-stock"), `activity ${a.id} · SKU ${s.skuId}: remaining`,
          [["remaining", "#3b6fd4"]]), t, s.remaining);
        const r = perSKU[`${a.id}-${s.skuId}`];
        sample(chart(`sku-${a.id}-${s.skuId}`, $("chart-stock"), `activity ${a.id} · SKU ${s.skuId}: accepted / rejected per second`,
          [["accepted/s", "#1f8a4c"], ["rejected/s", "#d9352b"]]), t, r ? r.accepted : null, r ? r.rejected : null);
      }
    });
  }

  async function refresh() {
    try {
      const [acts, counters, lag, routes] = await Promise.all([
        call("GET", "/admin/v1/activities"),
        call("GET", "/admin/v1/counters"),
        call("GET", "/admin/v1/lag").catch(() => null),
        call("GET", "/admin/v1/routes").catch(() => null),
      ]);
      renderRoutes(routes);
      const reports = await Promise.all((acts || []).map((a) => call("GET", `/admin/v1/activities/${a.id}/stock`)));
      const now = Date.now();
      const skuNow = { t: now, counts: skuCounts(counters) };
      const perSKU = skuRates(prevSKU, skuNow);
      prevSKU = skuNow;
      render(acts || [], reports, perSKU);
      const accepted = sum(counters, "seckill_edge_engine_calls_total", (l) => l.outcome === "queued");
      const rejected = sum(counters, "seckill_edge_requests_total", (l) => l.status !== "200");
      let rates = null;
      if (prev) {
        const dt = (now - prev.t) / 1000;
        rates = { accepted: (accepted - prev.accepted) / dt, rejected: (rejected - prev.rejected) / dt };
        $("rate-accept").textContent = rates.accepted.toFixed(0);
        $("rate-reject").textContent = rates.rejected.toFixed(0);
      }
      prev = { t: now, accepted, rejected };
      $("lag").textContent = lag ? String(lag.total) : "n/a";
      drawCharts(acts || [], reports, rates, lag, perSKU);
      $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      $("error").textContent = "";
    } catch (e) {
      $("error").textContent = e.message;
    }
  }

  const perSec = (v) => (v == null ? "–" : v.toFixed(1));

  // The non-core buyer routes on-call may close (503 + Retry-After).
  function renderRoutes(routes) {
    const box = $("routes");
    box.replaceChildren();
    if (!routes) { box.append(el("span", { class: "muted" }, "route switches: not available")); return; }
    box.append(el("b", {}, "Routes "));
    for (const r of routes) {
      box.append(el("span", { class: `phase ${r.open ? "OPEN" : "OFFLINE"}`, id: `route-${r.name}` }, `${r.name} ${r.open ? "open" : "closed"}`), " ",
        guarded(`route-toggle-${r.name}`, r.open ? `Close ${r.name}` : `Open ${r.name}`,
          `${r.open ? "Close" : "Open"} the ${r.name} route at every edge?`,
          () => call("PUT", `/admin/v1/routes/${r.name}`, { open: !r.open })), " ");
    }
  }

  // An activity's degrade switches, each a guarded toggle; the poll
  // interval is set from its field.
  function degradeLine(a) {
    const put = (body) => call("PUT", `/admin/v1/activities/${a.id}/degrade`, body);
    const poll = el("input", { type: "number", min: "0", max: "60000", step: "500", id: `poll-${a.id}`, value: String(a.pollAfterMs || 0), size: "6" });
    return el("div", { class: "degrade", id: `degrade-${a.id}` }, el("span", { class: "muted" }, "degrade: "),
      el("span", { id: `reserved-only-${a.id}` }, `reserved only ${a.reservedOnly ? "ON" : "off"}`), " ",
      guarded(`reserved-toggle-${a.id}`, a.reservedOnly ? "Let everyone buy" : "Reserved users only",
        `${a.reservedOnly ? "Let everyone buy" : "Serve only the reserved users of"} activity ${a.id}?`,
        () => put({ reservedOnly: !a.reservedOnly })), " ",
      el("span", { id: `paused-${a.id}` }, `intake ${a.paused ? "PAUSED" : "open"}`), " ",
      guarded(`pause-toggle-${a.id}`, a.paused ? "Resume intake" : "Pause intake",
        `${a.paused ? "Resume" : "Pause"} the intake of activity ${a.id} (results stay readable)?`,
        () => put({ paused: !a.paused })), " ",
      el("label", {}, "poll after (ms, 0: default) ", poll), " ",
      guarded(`poll-set-${a.id}`, "Set", `Tell queuing buyers of activity ${a.id} to poll every ${poll.value || 0} ms?`,
        () => put({ pollAfterMs: Number(poll.value || 0) })));
  }

  // A SKU's mode (queue mode, docs/operations-queue.md): direct, or
  // queue with its drain rate; a guarded toggle switches it.
  function modeCell(a, skuId) {
    const k = (a.skus || []).find((x) => x.id === skuId) || {};
    const queued = k.mode === "queue";
    const label = queued ? `queue${k.rate ? ` ${k.rate}/s` : ""}` : "direct";
    return el("td", { class: "mode", id: `mode-${a.id}-${skuId}` }, `${label} `,
      guarded(`mode-toggle-${a.id}-${skuId}`, queued ? "Serve direct" : "Queue",
        queued ? `Serve SKU ${skuId} direct again (the line already taken is still drained)?`
          : `Put SKU ${skuId} in queue mode (buyers get 202 WAITING and are served in line order)?`,
        () => call("PUT", `/admin/v1/skus/${skuId}/mode`, { mode: queued ? "direct" : "queue", activityId: a.id })));
  }

  function render(acts, reports, perSKU) {
    const box = $("activities");
    box.replaceChildren();
    acts.forEach((a, i) => {
      const rep = reports[i];
      const online = a.state !== "OFFLINE";
      const head = el("div", {}, el("b", {}, `Activity ${a.id} `),
        el("span", { class: `phase ${online ? "OPEN" : "OFFLINE"}`, id: `state-${a.id}` }, a.state || "ONLINE"), " ",
        guarded(`state-toggle-${a.id}`, online ? "Take offline" : "Bring online",
          `Set activity ${a.id} ${online ? "OFFLINE" : "ONLINE"}?`,
          () => call("PUT", `/admin/v1/activities/${a.id}/state`, { state: online ? "OFFLINE" : "ONLINE" })));
      const rows = rep.skus.map((s) => { const r = perSKU[`${a.id}-${s.skuId}`] || {}; return el("tr", { id: `row-${a.id}-${s.skuId}` },
        el("td", {}, `${s.skuId}${s.hot ? " (hot)" : ""}${s.shard ? " · " + s.shard : ""}`),
        el("td", {}, String(s.initial)), el("td", { class: "remaining" }, String(s.remaining)),
        el("td", {}, String(s.occupied)), el("td", {}, String(s.ordered)),
        el("td", { class: s.drift !== 0 ? "drift-bad" : "" }, String(s.drift)),
        el("td", { class: "accepted" }, perSec(r.accepted)), el("td", { class: "rejected" }, perSec(r.rejected)),
        el("td", { class: "soldout" }, s.soldOut ? (s.markedSoldOut ? "yes (marked)" : "yes") : "no"),
        el("td", {}, guarded(`soldout-${a.id}-${s.skuId}`, s.markedSoldOut ? "Clear sold out" : "Mark sold out",
          `${s.markedSoldOut ? "Clear" : "Mark"} SKU ${s.skuId} sold out?`,
          () => call("PUT", `/admin/v1/skus/${s.skuId}/soldout`, { soldOut: !s.markedSoldOut, activityId: a.id }))),
        modeCell(a, s.skuId)); });
      box.append(el("div", { class: "card", id: `activity-${a.id}` }, head, degradeLine(a),
        el("table", {}, el("thead", {}, el("tr", {}, ...["SKU", "initial", "remaining", "occupied", "ordered", "drift", "accepted/s", "rejected/s", "sold out", "", "mode"].map((h) => el("th", {}, h)))),
          el("tbody", {}, ...rows))));
    });
  }

  let timer = null;
  function start() {
    $("login").hidden = true; $("board").hidden = false; $("logout").hidden = false;
    refresh();
    if (!timer) timer = setInterval(() => { if (token && !pending) refresh(); }, 1000);
  }
  if (token) start();
})();

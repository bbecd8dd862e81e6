// The on-call page: live stock per activity and SKU (remaining, occupied,
// ordered, drift), accept and reject rates, consumer lag, and the two
// switches on-call needs at 3 a.m. — sold out on/off per SKU and activity
// online/offline — each behind a confirmation step. Everything goes
// through the admin API with the bearer token.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem("seckill.admin") || "";
  let prev = null; // last counters sample, for rates
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

  async function refresh() {
    try {
      const [acts, counters, lag] = await Promise.all([
        call("GET", "/admin/v1/activities"),
        call("GET", "/admin/v1/counters"),
        call("GET", "/admin/v1/lag").catch(() => null),
      ]);
      const reports = await Promise.all((acts || []).map((a) => call("GET", `/admin/v1/activities/${a.id}/stock`)));
      render(acts || [], reports);
      const now = Date.now();
      const accepted = sum(counters, "seckill_edge_engine_calls_total", (l) => l.outcome === "queued");
      const rejected = sum(counters, "seckill_edge_requests_total", (l) => l.status !== "200");
      if (prev) {
        const dt = (now - prev.t) / 1000;
        $("rate-accept").textContent = ((accepted - prev.accepted) / dt).toFixed(0);
        $("rate-reject").textContent = ((rejected - prev.rejected) / dt).toFixed(0);
      }
      prev = { t: now, accepted, rejected };
      $("lag").textContent = lag ? String(lag.total) : "n/a";
      $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
      $("error").textContent = "";
    } catch (e) {
      $("error").textContent = e.message;
    }
  }

  function render(acts, reports) {
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
      const rows = rep.skus.map((s) => el("tr", { id: `row-${a.id}-${s.skuId}` },
        el("td", {}, `${s.skuId}${s.hot ? " (hot)" : ""}`),
        el("td", {}, String(s.initial)), el("td", { class: "remaining" }, String(s.remaining)),
        el("td", {}, String(s.occupied)), el("td", {}, String(s.ordered)),
        el("td", { class: s.drift !== 0 ? "drift-bad" : "" }, String(s.drift)),
        el("td", { class: "soldout" }, s.soldOut ? (s.markedSoldOut ? "yes (marked)" : "yes") : "no"),
        el("td", {}, guarded(`soldout-${a.id}-${s.skuId}`, s.markedSoldOut ? "Clear sold out" : "Mark sold out",
          `${s.markedSoldOut ? "Clear" : "Mark"} SKU ${s.skuId} sold out?`,
          () => call("PUT", `/admin/v1/skus/${s.skuId}/soldout`, { soldOut: !s.markedSoldOut, activityId: a.id })))));
      box.append(el("div", { class: "card", id: `activity-${a.id}` }, head,
        el("table", {}, el("thead", {}, el("tr", {}, ...["SKU", "initial", "remaining", "occupied", "ordered", "drift", "sold out", ""].map((h) => el("th", {}, h)))),
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

// The buyer page: activity view with a countdown from server time, one buy
// button per SKU that greys out when the SKU sells out, the ticket, the
// result streamed by server-sent events (polling when the stream fails), and
// "My orders" from the orders database, read again when a purchase succeeds.
"use strict";
(function () {
  const params = new URLSearchParams(location.search);
  const activity = params.get("activity") || "1";
  const api = "/api/v1/flash-sale";
  const $ = (id) => document.getElementById(id);
  let view = null;      // last activity view
  let offset = 0;       // server time - local time, ms
  let busy = false;     // a purchase is in flight
  const tickets = {};   // sku -> requestNo held by this buyer

  const userInput = $("user");
  userInput.value = params.get("user") || sessionStorage.getItem("seckill.user") || String(1 + Math.floor(Math.random() * 1e9));
  userInput.addEventListener("change", () => { sessionStorage.setItem("seckill.user", userInput.value); loadOrders(); });
  const user = () => userInput.value.trim();

  function fmt(ms) {
    if (ms < 0) ms = 0;
    const s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return [h, m, s % 60].map((n) => String(n).padStart(2, "0")).join(":");
  }
  function phase(now) {
    if (!view) return "…";
    if (view.state === "OFFLINE") return "OFFLINE";
    if (now < Date.parse(view.start)) return "UPCOMING";
    if (now >= Date.parse(view.end)) return "ENDED";
    return "OPEN";
  }

  async function loadView() {
    try {
      const t0 = Date.now();
      const r = await fetch(`${api}/activities/${activity}`, { cache: "no-store" });
      if (!r.ok) throw new Error(`activity ${activity}: ${r.status}`);
      view = await r.json();
      // The server's clock, corrected by half the round trip.
      offset = view.serverTimeMs + (Date.now() - t0) / 2 - Date.now();
      $("error").textContent = "";
      renderSkus();
    } catch (e) {
      $("error").textContent = String(e.message || e);
    }
  }

  function renderSkus() {
    const box = $("skus");
    const now = Date.now() + offset;
    // A queue-mode SKU takes its line's pre-queue from lineOpens on.
    const lineOpen = view.lineOpens && now >= Date.parse(view.lineOpens) && phase(now) === "UPCOMING";
    for (const s of view.skus) {
      const open = phase(now) === "OPEN" || (lineOpen && s.queued);
      let el = document.getElementById(`sku-${s.id}`);
      if (!el) {
        el = document.createElement("div");
        el.className = "sku";
        el.id = `sku-${s.id}`;
        el.innerHTML = `<div class="title"></div><div class="muted">SKU ${s.id}</div>` +
          `<div><span class="price"></span> <s class="muted original"></s></div>` +
          `<div class="muted limit"></div><button data-sku="${s.id}">Buy now</button>`;
        el.querySelector("button").addEventListener("click", () => buy(s.id));
        box.appendChild(el);
      }
      // textContent: a title is the operator's text, never markup.
      el.querySelector(".title").textContent = s.title || `SKU ${s.id}`;
      el.querySelector(".price").textContent = `¥${s.price}`;
      el.querySelector(".original").textContent = s.originalPrice ? `¥${s.originalPrice}` : "";
      el.querySelector(".limit").textContent = `limit ${s.limitPerUser} per buyer`;
      const b = el.querySelector("button");
      // paused: on-call paused the intake (the edge answers 503 PAUSED).
      b.disabled = s.soldOut || !open || view.paused || busy || tickets[s.id] !== undefined;
      b.textContent = s.soldOut ? "Sold out" : tickets[s.id] ? "Ticket held" : !open ? "Not open" : view.paused ? "Paused, back soon" : "Buy now";
      el.dataset.soldout = s.soldOut ? "true" : "false";
    }
  }

  function tick() {
    const now = Date.now() + offset;
    const p = phase(now);
    $("phase").textContent = p;
    $("phase").className = `phase ${p}`;
    if (view) {
      $("window").textContent = `${new Date(view.start).toLocaleString()} – ${new Date(view.end).toLocaleString()}`;
      if (p === "UPCOMING") { $("countdown").textContent = fmt(Date.parse(view.start) - now); $("countdown-label").textContent = "until the sale starts"; }
      else if (p === "OPEN") { $("countdown").textContent = fmt(Date.parse(view.end) - now); $("countdown-label").textContent = "until the sale ends"; }
      else { $("countdown").textContent = "00:00:00"; $("countdown-label").textContent = p === "ENDED" ? "the sale has ended" : "the sale is offline"; }
      renderSkus();
    }
  }

  async function buy(sku) {
    busy = true;
    renderSkus();
    try {
      const r = await fetch(`${api}/order`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-User-Id": user() },
        body: JSON.stringify({ activityId: Number(activity), skuId: sku, quantity: 1 }),
      });
      const a = await r.json();
      if (r.status === 200 || r.status === 202 || (r.status === 409 && a.requestNo)) {
        // 202 WAITING: the SKU is in queue mode and the attempt waits in
        // its line (409 WAITING: it already does).
        tickets[sku] = a.requestNo;
        $("ticket-card").hidden = false;
        $("ticket").textContent = a.requestNo;
        showResult(a.code === "WAITING" ? a : { code: "QUEUING" });
        follow(a.requestNo, a.pollAfterMs);
      } else {
        $("error").textContent = `${a.code}: ${a.message || ""}`;
        if (a.code === "SOLD_OUT") loadView();
      }
    } catch (e) {
      $("error").textContent = String(e.message || e);
    } finally {
      busy = false;
      renderSkus();
    }
  }

  // inLine tells a WAITING ticket's place: "#12,345 in line, about 40 s".
  function inLine(ev) {
    if (ev.prequeued) {
      const sec = Math.max(1, Math.round(ev.startsInMs / 1000));
      return `in the pre-queue: served in a random order drawn at the start, in ${sec < 120 ? `${sec} s` : `${Math.round(sec / 60)} min`}`;
    }
    if (!(ev.position >= 0)) return "waiting in line";
    let s = `#${Number(ev.position).toLocaleString("en-US")} in line`;
    if (ev.etaMs >= 0) {
      const sec = Math.max(1, Math.round(ev.etaMs / 1000));
      s += sec < 120 ? `, about ${sec} s` : `, about ${Math.round(sec / 60)} min`;
    }
    return s;
  }

  function showResult(ev) {
    $("result").textContent = ev.code;
    $("result").className = `result ${ev.code}`;
    $("detail").textContent = ev.orderNo ? `order ${ev.orderNo}` : ev.reason ? `reason ${ev.reason}` :
      ev.code === "WAITING" ? inLine(ev) : "";
    if (ev.code === "SUCCESS" && ev.orderNo && !shown[ev.orderNo]) loadOrders();
  }

  // My orders: the first page, newest first; "More" appends the next.
  const shown = {};     // orderNo -> true, for the orders listed
  let next = "";        // cursor of the next page
  let ordersTimer = null;
  async function loadOrders(more) {
    clearTimeout(ordersTimer);
    const q = more && next ? `?cursor=${encodeURIComponent(next)}` : "";
    try {
      const r = await fetch(`${api}/orders${q}`, { headers: { "X-User-Id": user() }, cache: "no-store" });
      if (r.status === 429) {
        // The list is rate-limited per buyer: come back when told.
        const wait = Number(r.headers.get("Retry-After")) || 1;
        $("orders-note").textContent = `busy, again in ${wait}s`;
        ordersTimer = setTimeout(() => loadOrders(more), wait * 1000);
        return;
      }
      const a = await r.json();
      if (!r.ok) throw new Error(`my orders: ${a.code}: ${a.message || ""}`);
      if (!more) { $("orders").replaceChildren(); for (const k in shown) delete shown[k]; }
      for (const o of a.orders) {
        const tr = document.createElement("tr");
        tr.id = `order-${o.orderNo}`;
        tr.dataset.state = o.state;
        for (const [cls, v] of [["order-no", o.orderNo], ["sku", o.skuId], ["qty", o.quantity], ["amount", `¥${o.amount}`],
          ["state", o.state], ["deadline", o.state === "PENDING_PAYMENT" ? new Date(o.payDeadline).toLocaleTimeString() : ""]]) {
          const td = document.createElement("td");
          td.className = cls;
          td.textContent = String(v);
          tr.appendChild(td);
        }
        $("orders").appendChild(tr);
        shown[o.orderNo] = true;
      }
      next = a.next || "";
      $("orders-more").hidden = !next;
      $("orders-note").textContent = Object.keys(shown).length ? "" : "none yet";
    } catch (e) {
      $("orders-note").textContent = String(e.message || e);
    }
  }
  $("orders-more").addEventListener("click", () => loadOrders(true));

  // follow reads the result stream (fetch, so X-User-Id can be sent), and
  // falls back to polling the result if the stream breaks (or on-call has
  // closed it) before a final answer, at the pace the edge asks for.
  async function follow(rn, pollAfterMs) {
    try {
      const r = await fetch(`${api}/result/${rn}/events`, { headers: { "X-User-Id": user() } });
      if (!r.ok || !r.body) throw new Error(`stream ${r.status}`);
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "", last = null;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const chunk = buf.slice(0, i); buf = buf.slice(i + 2);
          const data = chunk.split("\n").find((l) => l.startsWith("data: "));
          if (data) { last = JSON.parse(data.slice(6)); showResult(last); }
        }
      }
      if (last && last.code !== "QUEUING" && last.code !== "WAITING") return;
    } catch (e) { /* fall through to polling */ }
    poll(rn, pollAfterMs);
  }

  // waitMs is how long to wait before the next poll: the answer's
  // pollAfterMs (QUEUING answers and results carry it: on-call may lengthen
  // it), else its Retry-After, else half a second; at most a minute.
  function waitMs(a, r, fallback) {
    let ms = a && Number(a.pollAfterMs);
    if (!(ms > 0)) ms = 1000 * Number(r && r.headers.get("Retry-After"));
    if (!(ms > 0)) ms = fallback;
    return Math.min(ms, 60000);
  }

  async function poll(rn, firstMs) {
    let wait = firstMs > 0 ? Math.min(firstMs, 60000) : 500;
    window.seckillPollWaits = [];
    for (let i = 0; i < 600; i++) {
      await new Promise((res) => setTimeout(res, wait));
      window.seckillPollWaits.push(wait);
      let r = null, a = null;
      try {
        r = await fetch(`${api}/result/${rn}`, { headers: { "X-User-Id": user() }, cache: "no-store" });
        a = await r.json();
        if (r.ok) showResult(a);
        if (a.code === "SUCCESS" || a.code === "FAIL") return;
      } catch (e) { /* retry */ }
      wait = waitMs(a, r, 500);
    }
  }

  loadView();
  loadOrders();
  setInterval(loadView, 1000);
  setInterval(tick, 250);
})();

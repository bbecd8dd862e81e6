// The on-call page's search box: support's lookup of one buyer
// (GET /admin/v1/users/{id}/requests), every attempt and ticket newest
// first with its outcome, reason, order and the steps of its story, a page
// at a time ("Older" follows the cursor). Everything is written as text,
// never as markup: remarks and trace ids come from buyers.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  let next = "";

  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  }

  async function search(more) {
    const user = $("why-user").value.trim(), act = $("why-activity").value.trim();
    $("why-error").textContent = "";
    if (!/^[1-9][0-9]{0,18}$/.test(user) || (act && !/^[1-9][0-9]{0,18}$/.test(act))) {
      $("why-error").textContent = "user and activity are positive numbers";
      return;
    }
    const q = new URLSearchParams();
    if (act) q.set("activity", act);
    if (more && next) q.set("cursor", next);
    const token = sessionStorage.getItem("seckill.admin") || "";
    try {
      const r = await fetch(`/admin/v1/users/${user}/requests?${q}`, { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
      const data = await r.json();
      if (!r.ok) throw new Error(`${r.status} ${data && data.message}`);
      const body = $("why-rows");
      if (!more) body.replaceChildren();
      for (const e of data.requests) {
        const tr = document.createElement("tr");
        tr.id = `why-${e.requestNo}`;
        tr.className = `why-${e.outcome}`;
        const story = (e.history || []).map((h) => h.status + (h.remark ? ` (${h.remark})` : "")).join(" → ");
        const order = e.order ? `${e.order.orderNo} ${e.order.status}` : (e.orderNo || "");
        tr.append(cell(new Date(e.created).toLocaleString()), cell(String(e.activityId)), cell(String(e.skuId)),
          cell(String(e.quantity)), cell(e.outcome, "outcome"), cell(e.reason || "", "reason"),
          cell(e.requestNo.startsWith("R-") ? "–" : e.requestNo, "ticket"), cell(order, "order"), cell(story, "story"));
        body.append(tr);
      }
      next = data.next || "";
      $("why-table").hidden = false;
      $("why-more").hidden = !next;
      if (!more && data.requests.length === 0) $("why-error").textContent = `nothing in the request log for user ${user}`;
    } catch (e) {
      $("why-error").textContent = String(e.message || e);
    }
  }

  $("why-form").addEventListener("submit", (e) => { e.preventDefault(); search(false); });
  $("why-more").addEventListener("click", () => search(true));
})();

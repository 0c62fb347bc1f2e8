// The ops page: the runner's metric totals (GET /__metrics), what only the runner can read
// (GET /__ops: breaker, queues, seats' claims, recent terminal intents), and the admin routes when this
// build has them (an intent's history, redrive, reconcile), with an admin token from
// POST /dev/token.
"use strict";

(() => {
  const { call, metrics, total, el } = seatgate;
  const POLL_MS = 2000;
  const $ = (id) => document.getElementById(id);
  let adminToken = null;
  let adminRoutes = [];
  let lastRecentKey = null;
  let lastClaimsKey = null;

  async function admin() {
    if (!adminToken) {
      adminToken = (await call("POST", "/dev/token", { body: { sub: "ops-page", admin: true } })).token;
    }
    return adminToken;
  }

  const has = (key) => adminRoutes.includes(key);

  function fillTable(id, rows) {
    const body = $(id).querySelector("tbody");
    body.replaceChildren(...rows.map((cells) => el("tr", {}, ...cells.map((c, i) =>
      el("td", { class: i === cells.length - 1 && typeof c === "number" ? "num" : "" }, c instanceof Node ? c : String(c))))));
  }

  function when(ms) {
    return typeof ms === "number" ? new Date(ms).toLocaleTimeString() : "";
  }

  async function refresh() {
    const [samples, ops] = await Promise.all([metrics(), call("GET", "/__ops")]);
    adminRoutes = ops.admin_routes ?? [];

    $("reserve-posts").textContent = String(total(samples, "seatgate_reserve_posts_total"));
    $("claims-taken").textContent = String(total(samples, "seatgate_seat_claims_taken_total"));
    const calls = samples
      .filter((s) => s.name === "seatgate_upstream_calls_total")
      .sort((a, b) => (a.labels.route + a.labels.outcome).localeCompare(b.labels.route + b.labels.outcome));
    fillTable("calls", calls.length ? calls.map((s) => [s.labels.route, s.labels.outcome, s.value]) : [["none yet", "", 0]]);

    const terminal = samples
      .filter((s) => s.name === "seatgate_intents_terminal_total")
      .sort((a, b) => (a.labels.status + a.labels.reason).localeCompare(b.labels.status + b.labels.reason));
    fillTable("terminal", terminal.length ? terminal.map((s) => [s.labels.status, s.labels.reason ?? "", s.value]) : [["none yet", "", 0]]);

    const b = ops.breaker ?? {};
    const badge = $("breaker");
    badge.textContent = b.error ? "unreadable" : b.phase ?? "?";
    badge.className = `badge ${b.phase ?? ""}`;
    $("breaker-detail").textContent = b.error
      ? b.error
      : b.generation === 0
        ? "never opened since this store was created"
        : `since ${when(b.since)}${b.until ? `, until ${when(b.until)}` : ""} · generation ${b.generation}`;

    const uh = ops.upstream_pauses;
    $("upstream-pauses").textContent = !uh
      ? "?"
      : uh.error
        ? `unreadable: ${uh.error}`
        : uh.length === 0
          ? "none: every route may be called"
          : uh.map((h) => `${h.route} until ${when(h.until)}`).join(" · ");

    const q = ops.queues?.seats ?? {};
    const show = (v) => (v === null || v === undefined ? "n/a" : String(v));
    $("q-ready").textContent = show(q.ready);
    $("q-inflight").textContent = show(q.in_flight);
    $("q-dead").textContent = show(q.dead);
    $("q-events-dead").textContent = show(ops.queues?.events_dead);
    const claimed = ops.seat_claims?.seats ?? [];

    // Rebuilt only when it changed, so a keyboard user's focus on a button survives the refresh.
    const recentKey = JSON.stringify([(ops.recent ?? []).map((e) => e.event_id), adminRoutes]);
    if (recentKey !== lastRecentKey) {
      lastRecentKey = recentKey;
      renderRecent(ops.recent ?? []);
    }
    const claimsKey = JSON.stringify([claimed.map((c) => c.seat_id), adminRoutes]);
    if (claimsKey !== lastClaimsKey) {
      lastClaimsKey = claimsKey;
      renderClaims(claimed);
    }

    const redrive = has("POST /admin/dead-letters/redrive");
    const reconcile = has("POST /admin/reconcile");
    $("redrive").hidden = !redrive;
    $("reconcile").hidden = !reconcile;
    $("admin-actions").hidden = !(redrive || reconcile);
    $("seat-form").hidden = !has("GET /admin/seats/{seat_id}");
    $("updated").textContent = `Updated ${new Date().toLocaleTimeString()}; refreshed every ${POLL_MS / 1000} s.`;
    document.body.dataset.ready = "true";
  }

  function renderRecent(recent) {
    fillTable("recent", recent.map((e) => {
      let idCell = e.intent_id;
      if (has("GET /admin/intents/{intent_id}")) {
        idCell = el("button", { type: "button", "aria-label": `History of intent ${e.intent_id}`, text: `…${e.intent_id.slice(-8)} history` });
        idCell.addEventListener("click", () => history(e.intent_id));
      }
      return [new Date(e.occurred_at).toLocaleTimeString(), e.seat_id, e.user_id, e.status, e.reason ?? "", idCell];
    }));
  }

  function renderClaims(claimed) {
    const claimsNow = $("claims-now");
    claimsNow.replaceChildren(String(claimed.length));
    for (const c of claimed) {
      claimsNow.append(" ");
      if (has("GET /admin/seats/{seat_id}")) {
        const b = el("button", { type: "button", "aria-label": `Inspect claimed seat ${c.seat_id}`, text: c.seat_id });
        b.addEventListener("click", () => seat(c.seat_id));
        claimsNow.append(b);
      } else {
        claimsNow.append(c.seat_id);
      }
    }
  }

  function showDetail(id, body, history) {
    $("detail-id").textContent = id;
    $("detail-body").textContent = JSON.stringify(body, null, 2);
    const table = $("history-table");
    table.hidden = !history;
    if (history) {
      fillTable("history-table", history.map((r) =>
        [r.version, new Date(r.at).toLocaleTimeString(), r.from ?? "–", r.to, r.fencing_token ?? "", r.reason ?? ""]));
    }
    $("detail").hidden = false;
    $("detail").focus();
  }

  const MAX_HISTORY_PAGES = 20;

  async function history(intentId) {
    try {
      // The history comes a page at a time; follow the cursors, at most MAX_HISTORY_PAGES.
      const token = await admin();
      const body = await call("GET", `/admin/intents/${intentId}`, { token });
      const records = [...(body.history ?? [])];
      let next = body.next_cursor;
      for (let page = 1; next && page < MAX_HISTORY_PAGES; page++) {
        const more = await call("GET", `/admin/intents/${intentId}?cursor=${encodeURIComponent(next)}`, { token });
        records.push(...(more.history ?? []));
        next = more.next_cursor;
      }
      body.history = records;
      showDetail(`intent ${intentId}`, body, records);
      const cut = next ? ` (the first ${records.length} shown)` : "";
      $("ops-status").textContent = `Intent ${intentId}: ${body.intent?.status}, ${records.length} transitions${cut}.`;
    } catch (e) {
      $("ops-status").textContent = `History of ${intentId}: ${e.message}`;
    }
  }

  async function seat(seatId) {
    try {
      const body = await call("GET", `/admin/seats/${encodeURIComponent(seatId)}`, { token: await admin() });
      showDetail(`seat ${seatId}`, body, null);
      const last = body.last_intent ? `last intent ${body.last_intent.status}` : "no intent yet";
      $("ops-status").textContent = `Seat ${seatId}: ${body.hold ? "claimed" : "not claimed"}, ${last}.`;
    } catch (e) {
      $("ops-status").textContent = `Seat ${seatId}: ${e.message}`;
    }
  }
  $("seat-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    seat($("seat-id").value.trim());
  });

  async function adminAction(path, label) {
    const status = $("ops-status");
    try {
      status.textContent = `${label}…`;
      const result = await call("POST", path, { token: await admin() });
      status.textContent = `${label}: ${JSON.stringify(result)}`;
      await refresh();
    } catch (e) {
      status.textContent = `${label} failed: ${e.message}`;
    }
  }
  $("redrive").addEventListener("click", () => adminAction("/admin/dead-letters/redrive", "Redrive"));
  $("reconcile").addEventListener("click", () => adminAction("/admin/reconcile", "Reconcile"));

  async function loop() {
    for (;;) {
      try {
        await refresh();
      } catch (e) {
        $("updated").textContent = `Could not refresh: ${e.message}`;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }
  loop();
})();

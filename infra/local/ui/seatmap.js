// The seat map: a room's seats with live availability, reserving one as a demo user, and a
// burst of N fresh users on one seat. Everything goes through the API a client would use; the
// runner-only POST /__demo/setup only registers users with the upstream and seeds the room.
"use strict";

(() => {
  const { call, metrics, total, pool, TERMINAL, sleep, el } = seatgate;
  const ROOM_POLL_MS = 1000;
  const INTENT_POLL_MS = 200;
  // The browser keeps 6 connections per origin: the burst takes 5, so the room reads
  // that keep the map live never queue behind a thousand burst requests.
  const BURST_LANES = 5;

  const $ = (id) => document.getElementById(id);
  const state = {
    room: "demo",
    users: [],          // [{user_id, credential}]
    sessions: new Map(), // user_id -> Promise<token> (token issued, credential put)
    user: null,
    seats: new Map(),   // seat_id -> {button, available}
    order: [],          // seat ids in map order
    mine: new Set(),    // seats this page reserved
    pending: null,      // seat id being reserved by the visitor
    bursting: false,
  };
  // Figures the browser test reads (and anyone curious, from the console).
  const stats = (window.seatgateStats = { roomPolls: [], firstMapAt: null, burst: null });

  function say(node, text, bad = false) {
    node.textContent = text;
    node.classList.toggle("bad", bad);
  }

  /** A token for `user` from POST /dev/token, with the user's upstream credential put once. */
  function session(user) {
    if (!state.sessions.has(user.user_id)) {
      const ready = (async () => {
        const { token } = await call("POST", "/dev/token", { body: { sub: user.user_id } });
        await call("PUT", "/me/credential", { token, body: { upstream_token: user.credential } });
        return token;
      })();
      ready.catch(() => state.sessions.delete(user.user_id));
      state.sessions.set(user.user_id, ready);
    }
    return state.sessions.get(user.user_id);
  }

  const currentUser = () => state.users.find((u) => u.user_id === state.user);

  // ---- the map -------------------------------------------------------------------------

  function rowOf(seatId) {
    const i = seatId.lastIndexOf("-");
    return i > 0 ? seatId.slice(0, i) : seatId;
  }

  function buildMap(seatIds) {
    const grid = $("seats");
    grid.replaceChildren();
    state.seats.clear();
    state.order = seatIds.slice();
    const rows = new Map();
    for (const id of seatIds) {
      const r = rowOf(id);
      if (!rows.has(r)) rows.set(r, []);
      rows.get(r).push(id);
    }
    for (const [r, ids] of rows) {
      const group = el("div", { class: "seat-row", role: "group", "aria-label": `Row ${r}` },
        el("span", { class: "row-name", "aria-hidden": "true", text: r }));
      for (const id of ids) {
        const button = el("button", { type: "button", class: "seat", "data-seat": id, tabindex: "-1" },
          el("span", { class: "name", text: id }), el("span", { class: "state", text: "…" }));
        button.addEventListener("click", () => reserve(id));
        group.append(button);
        state.seats.set(id, { button, available: null, row: r });
      }
      grid.append(group);
    }
    const first = state.seats.get(seatIds[0]);
    if (first) first.button.tabIndex = 0;
  }

  function paintSeat(id) {
    const seat = state.seats.get(id);
    if (!seat) return;
    const mine = state.mine.has(id);
    const pending = state.pending === id;
    const taken = seat.available === false;
    const label = mine ? "yours" : pending ? "reserving" : taken ? "taken" : seat.available ? "free" : "unknown";
    seat.button.classList.toggle("taken", taken && !mine);
    seat.button.classList.toggle("mine", mine);
    seat.button.classList.toggle("pending", pending);
    seat.button.setAttribute("aria-disabled", String(taken || mine || pending));
    seat.button.setAttribute("aria-label", `Seat ${id}, ${label}`);
    seat.button.dataset.state = label;
    seat.button.querySelector(".state").textContent = label;
  }

  // Arrow keys move between seats (one Tab stop for the whole map: a roving tabindex).
  $("seats").addEventListener("keydown", (ev) => {
    const current = ev.target.closest?.("button.seat");
    if (!current) return;
    const id = current.dataset.seat;
    const rows = [...new Set(state.order.map(rowOf))];
    const inRow = (r) => state.order.filter((s) => rowOf(s) === r);
    const row = inRow(rowOf(id));
    const col = row.indexOf(id);
    let target = null;
    switch (ev.key) {
      case "ArrowRight": target = row[Math.min(col + 1, row.length - 1)]; break;
      case "ArrowLeft": target = row[Math.max(col - 1, 0)]; break;
      case "Home": target = row[0]; break;
      case "End": target = row[row.length - 1]; break;
      case "ArrowDown":
      case "ArrowUp": {
        const ri = rows.indexOf(rowOf(id)) + (ev.key === "ArrowDown" ? 1 : -1);
        if (ri >= 0 && ri < rows.length) {
          const other = inRow(rows[ri]);
          target = other[Math.min(col, other.length - 1)];
        }
        break;
      }
      default: return;
    }
    ev.preventDefault();
    if (target && target !== id) {
      current.tabIndex = -1;
      const next = state.seats.get(target).button;
      next.tabIndex = 0;
      next.focus();
    }
  });
  $("seats").addEventListener("focusin", (ev) => {
    const b = ev.target.closest?.("button.seat");
    if (!b) return;
    for (const { button } of state.seats.values()) button.tabIndex = button === b ? 0 : -1;
  });

  async function pollRoom() {
    const user = currentUser();
    if (!user) return;
    const started = performance.now();
    try {
      const token = await session(user);
      const room = await call("GET", `/rooms/${encodeURIComponent(state.room)}/seats`, { token });
      stats.roomPolls.push(Math.round(performance.now() - started));
      if (stats.roomPolls.length > 600) stats.roomPolls.shift();
      const ids = room.seats.map((s) => s.seat_id);
      if (ids.join() !== state.order.join()) buildMap(ids);
      for (const s of room.seats) {
        state.seats.get(s.seat_id).available = s.available;
        paintSeat(s.seat_id);
      }
      const free = room.seats.filter((s) => s.available).length;
      const asOf = new Date(room.as_of).toLocaleTimeString();
      $("seats-meta").textContent =
        `${free} of ${room.seats.length} free · read at ${asOf}${room.stale ? " (stale: the upstream was not asked again yet)" : ""}`;
      if (stats.firstMapAt === null) stats.firstMapAt = Math.round(performance.now());
      $("seats").dataset.ready = "true";
    } catch (e) {
      $("seats-meta").textContent = `Could not read the room: ${e.message}`;
    }
  }

  async function roomLoop() {
    for (;;) {
      await pollRoom();
      await sleep(ROOM_POLL_MS);
    }
  }

  // ---- one reservation -----------------------------------------------------------------

  /** Polls an intent until it is terminal, calling `onStatus` on every change. */
  async function follow(token, intentId, onStatus, { interval = INTENT_POLL_MS, timeoutMs = 120000 } = {}) {
    const deadline = performance.now() + timeoutMs;
    let last = null;
    for (;;) {
      const intent = await call("GET", `/intents/${intentId}`, { token });
      if (intent.status !== last) {
        last = intent.status;
        onStatus(intent);
      }
      if (TERMINAL.has(intent.status)) return intent;
      if (performance.now() > deadline) throw new Error(`still ${intent.status} after ${timeoutMs / 1000} s`);
      await sleep(interval);
    }
  }

  async function reserve(seatId) {
    const status = $("status");
    const seat = state.seats.get(seatId);
    if (state.pending) {
      say(status, `Wait: seat ${state.pending} is still being reserved.`);
      return;
    }
    if (state.mine.has(seatId)) {
      say(status, `Seat ${seatId} is already yours.`);
      return;
    }
    if (seat.available === false) {
      say(status, `Seat ${seatId} is taken. Choose a free seat.`);
      return;
    }
    const user = currentUser();
    state.pending = seatId;
    paintSeat(seatId);
    const trail = $("intent-trail");
    trail.replaceChildren();
    delete trail.dataset.final;
    delete trail.dataset.intent;
    const step = (text) => trail.append(el("li", { text }));
    try {
      say(status, `Preparing seat ${seatId} as ${user.user_id}…`);
      const token = await session(user);
      const action = await call("POST", "/actions", { token, body: { kind: "reserve_seat", seat_id: seatId } });
      // Ids are UUIDv7: their first characters are the time, the last ones tell them apart.
      step(`PREPARED (action …${action.action_id.slice(-8)})`);
      const confirmed = await call("POST", `/actions/${action.action_id}/confirm`, { token });
      const intentId = confirmed.intent_id;
      trail.dataset.intent = intentId;
      const final = await follow(token, intentId, (intent) => {
        step(`${intent.status}${intent.reason ? ` (${intent.reason})` : ""}`);
        say(status, `Seat ${seatId}: ${intent.status}${intent.reason ? ` (${intent.reason})` : ""}`,
          intent.status.startsWith("FAILED"));
      });
      if (final.status === "SUCCEEDED") state.mine.add(seatId);
      say(status, `Seat ${seatId} for ${user.user_id}: ${final.status}${final.reason ? ` (${final.reason})` : ""}`,
        final.status !== "SUCCEEDED");
      $("intent-trail").dataset.final = final.status;
    } catch (e) {
      say(status, `Seat ${seatId}: ${e.message}`, true);
    } finally {
      state.pending = null;
      paintSeat(seatId);
      pollRoom();
    }
  }

  // ---- the burst -----------------------------------------------------------------------

  async function burst(n) {
    const out = $("burst-status");
    const phase = $("burst-phase");
    const progress = $("burst-progress");
    const free = state.order.filter((id) => state.seats.get(id).available && !state.mine.has(id) && state.pending !== id);
    if (free.length === 0) {
      say(out, "No free seat left in this room for a burst.", true);
      return;
    }
    const seatId = free[0];
    state.bursting = true;
    stats.burst = null;
    $("burst").disabled = true;
    $("burst-result").hidden = true;
    const figures = { n, seat: seatId };
    try {
      say(out, `Burst on seat ${seatId}: registering ${n} fresh users…`);
      const prefix = `b${Date.now().toString(36)}-u`;
      const setup = await call("POST", "/__demo/setup", { body: { users: n, prefix } });
      const before = total(await metrics(), "seatgate_reserve_posts_total");

      progress.max = n * 3;
      let t = performance.now();
      say(out, `Burst on seat ${seatId}: ${n} users sign in and prepare…`);
      phase.textContent = "preparing";
      const prepared = await pool(setup.users, BURST_LANES, async (user) => {
        const { token } = await call("POST", "/dev/token", { body: { sub: user.user_id } });
        await call("PUT", "/me/credential", { token, body: { upstream_token: user.credential } });
        const action = await call("POST", "/actions", { token, body: { kind: "reserve_seat", seat_id: seatId } });
        return { token, action_id: action.action_id };
      }, (k) => { progress.value = k; phase.textContent = `prepared ${k}/${n}`; });
      const ok = prepared.filter((p) => !p.error);
      if (ok.length < n) throw new Error(`${n - ok.length} of ${n} users could not prepare: ${prepared.find((p) => p.error).error.message}`);
      figures.prepareMs = Math.round(performance.now() - t);

      say(out, `Burst on seat ${seatId}: ${n} users confirm at once…`);
      t = performance.now();
      // As at once as a browser can: every user prepared first, then the confirms back to back
      // on every lane the burst has (a browser sends at most 6 requests to one origin at a time).
      const confirmed = await pool(ok, BURST_LANES, async (p) => {
        const c = await call("POST", `/actions/${p.action_id}/confirm`, { token: p.token });
        return { token: p.token, intent_id: c.intent_id };
      }, (k) => { progress.value = n + k; phase.textContent = `confirmed ${k}/${n}`; });
      const failedConfirm = confirmed.filter((c) => c.error);
      if (failedConfirm.length) throw new Error(`${failedConfirm.length} confirms failed: ${failedConfirm[0].error.message}`);
      figures.confirmMs = Math.round(performance.now() - t);

      say(out, `Burst on seat ${seatId}: waiting for ${n} intents to settle…`);
      const outcome = new Map();
      let open = confirmed;
      const deadline = performance.now() + 180000;
      while (open.length) {
        const read = await pool(open, BURST_LANES, (c) => call("GET", `/intents/${c.intent_id}`, { token: c.token }));
        const still = [];
        read.forEach((intent, i) => {
          if (!intent.error && TERMINAL.has(intent.status)) outcome.set(open[i].intent_id, intent.status);
          else still.push(open[i]);
        });
        open = still;
        progress.value = 2 * n + outcome.size;
        phase.textContent = `terminal ${outcome.size}/${n}`;
        if (!open.length) break;
        if (performance.now() > deadline) throw new Error(`${open.length} intents not terminal after 180 s`);
        await sleep(300);
      }
      figures.terminalMs = Math.round(performance.now() - t);
      // Reserve POSTs are counted as attempts settle, just before the intent turns terminal.
      await sleep(200);
      const reserves = total(await metrics(), "seatgate_reserve_posts_total") - before;
      const counts = {};
      for (const s of outcome.values()) counts[s] = (counts[s] ?? 0) + 1;
      figures.reserves = reserves;
      figures.counts = counts;
      stats.burst = figures;

      $("burst-seat").textContent = seatId;
      $("burst-users").textContent = String(n);
      $("burst-reserves").textContent = String(reserves);
      $("burst-outcomes").textContent = Object.entries(counts).map(([s, k]) => `${s} ${k}`).join(" · ");
      $("burst-time").textContent = `${figures.terminalMs} ms`;
      $("burst-result").hidden = false;
      $("burst-result").dataset.done = "true";
      phase.textContent = "done";
      say(out, `Burst done: ${n} users confirmed seat ${seatId}; the upstream saw ${reserves} reserve POST${reserves === 1 ? "" : "s"}.`,
        reserves !== 1);
    } catch (e) {
      stats.burst = { ...figures, error: e.message };
      say(out, `Burst failed: ${e.message}`, true);
    } finally {
      state.bursting = false;
      $("burst").disabled = false;
      pollRoom();
    }
  }

  $("burst-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = $("burst-n");
    const n = Number(input.value);
    if (!Number.isInteger(n) || n < 1 || n > 1000) {
      say($("burst-status"), "Users must be a whole number from 1 to 1000.", true);
      input.focus();
      return;
    }
    if (!state.bursting) burst(n);
  });

  // ---- start ---------------------------------------------------------------------------

  async function start() {
    const select = $("user");
    try {
      const setup = await call("POST", "/__demo/setup", { body: {} });
      state.room = setup.room_id;
      state.users = setup.users;
      $("room-name").textContent = setup.room_id;
      buildMap(setup.seats);
      select.replaceChildren(...setup.users.map((u) => el("option", { value: u.user_id, text: u.user_id })));
      select.disabled = false;
      state.user = setup.users[0].user_id;
      select.addEventListener("change", async () => {
        state.user = select.value;
        $("user-state").textContent = "signing in…";
        try {
          await session(currentUser());
          $("user-state").textContent = `signed in as ${state.user}`;
        } catch (e) {
          $("user-state").textContent = `could not sign in: ${e.message}`;
        }
      });
      await session(currentUser());
      $("user-state").textContent = `signed in as ${state.user}`;
    } catch (e) {
      say($("status"), `The demo setup failed: ${e.message}`, true);
      return;
    }
    roomLoop();
  }

  start();
})();

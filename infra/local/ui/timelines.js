// The ops page's last ten minutes and its flight view.
//
// The runner samples its metrics, the breaker, the Retry-After pauses, the queues and the watched
// flights once a second (GET /__ops/history); this page fetches the whole window once, then
// only what is new (`since`), and keeps the derived figures of each sample as it arrives, so a
// redraw walks at most 600 small records. Per-second rates are a sample's counter increases
// over its interval. Every chart has a heading, a one-sentence summary (its text alternative)
// and, in a <details>, the table it was drawn from; the tables are built only while open.
//
// The flight view reads one flight's exact stock, shard by shard (GET /__ops/flights/{id}, the
// inventory read GET /flights/{id} makes), and draws its seats left from the history.
"use strict";

(() => {
  const { call, el } = seatgate;
  const POLL_MS = 1000;
  const WINDOW_MS = 600000;
  const $ = (id) => document.getElementById(id);

  const OUTCOMES = ["ok", "taken", "busy", "refused", "failed", "timeout", "dropped", "unreadable"];
  const BOOKINGS = ["booked", "sold_out", "limit_reached"];
  const LEFT = ["budget", "limit", "deferred", "postponed"];

  const hist = { started: null, series: [], samples: [], lastAt: null, watched: [], meta: null };
  // For the browser tests and the curious: how long each redraw took (ms), the last 300, and
  // how many redraws there have been.
  const stats = { draws: [], drawn: 0, history: hist };
  window.seatgateOps = stats;

  let flightId = null;
  let flightNow = null;
  let drawPending = false;
  // The charts' span: the whole ten minutes, or the last two for a closer look.
  let windowMs = WINDOW_MS;

  // ---- derived figures, once per sample -------------------------------------------------

  const add = (o, k, n) => { o[k] = (o[k] ?? 0) + n; };

  /** Prometheus-style quantile of one interval's cumulative bucket increases. */
  function quantile(buckets, count, q) {
    if (!count) return null;
    const les = [...buckets.keys()].filter((le) => le !== "+Inf").map(Number).sort((a, b) => a - b);
    const rank = q * count;
    let prevLe = 0;
    let prevCum = 0;
    for (const le of les) {
      const cum = buckets.get(String(le)) ?? prevCum;
      if (cum >= rank) {
        return cum === prevCum ? le : prevLe + ((le - prevLe) * (rank - prevCum)) / (cum - prevCum);
      }
      prevLe = le;
      prevCum = cum;
    }
    // Past the last finite bucket: say at least that much.
    return prevLe;
  }

  function figures(sample) {
    const f = {
      calls: {}, callsTotal: 0, confirms: {}, buckets: new Map(), terminal: 0,
      passes: 0, left: {}, bookings: {}, checkout: {}, probes: 0,
    };
    for (const [i, n] of sample.d) {
      const s = hist.series[i];
      if (!s) continue;
      const l = s.labels;
      switch (s.metric) {
        case "seatgate_upstream_calls_total": add(f.calls, l.outcome, n); f.callsTotal += n; break;
        case "seatgate_confirms_total": add(f.confirms, l.kind, n); break;
        case "seatgate_time_to_terminal_milliseconds_bucket": f.buckets.set(l.le, (f.buckets.get(l.le) ?? 0) + n); break;
        case "seatgate_time_to_terminal_milliseconds_count": f.terminal += n; break;
        case "seatgate_reaper_pass_duration_milliseconds_count": f.passes += n; break;
        case "seatgate_reaper_left_total": add(f.left, l.what, n); break;
        case "seatgate_bookings_total": add(f.bookings, l.outcome, n); break;
        case "seatgate_checkout_total": add(f.checkout, l.event, n); break;
        case "seatgate_breaker_transitions_total": if (l.phase === "probing") f.probes += n; break;
        default: break;
      }
    }
    f.p50 = quantile(f.buckets, f.terminal, 0.5);
    f.p95 = quantile(f.buckets, f.terminal, 0.95);
    f.buckets = null;
    f.secs = sample.interval_ms / 1000;
    return f;
  }

  /** Takes a history answer; false if it came from a restarted runner (then start over). */
  function ingest(body) {
    if (hist.started !== null && body.started !== hist.started) {
      Object.assign(hist, { started: null, series: [], samples: [], lastAt: null });
      return false;
    }
    hist.started = body.started;
    hist.meta = body;
    for (const s of body.series) hist.series[s.i] = s;
    for (const s of body.samples) {
      s.fig = figures(s);
      hist.samples.push(s);
      hist.lastAt = s.at;
    }
    hist.watched = body.watched_flights ?? [];
    const from = (hist.lastAt ?? 0) - WINDOW_MS;
    let drop = 0;
    while (drop < hist.samples.length && hist.samples[drop].at < from) drop++;
    if (drop) hist.samples.splice(0, drop);
    return true;
  }

  // ---- breaker and pauses as intervals ---------------------------------------------------

  /** Spans of the breaker not closed (open, or probing between opens), from its generations. */
  function breakerSpans() {
    const byGen = new Map();
    for (const s of hist.samples) if (s.breaker) byGen.set(s.breaker.generation, s.breaker);
    const spans = [];
    let cur = null;
    for (const b of [...byGen.values()].sort((a, b2) => a.generation - b2.generation)) {
      if (b.phase === "closed") {
        if (cur) { cur.to = b.since; spans.push(cur); cur = null; }
        continue;
      }
      if (!cur) cur = { from: b.since, to: null, opens: 0 };
      if (b.phase === "open") cur.opens += 1;
    }
    if (cur) spans.push(cur);
    return spans;
  }

  /** Each route's Retry-After pauses: from the sample that first saw one to its end. */
  function holdSpans() {
    const current = new Map();
    const spans = [];
    for (const s of hist.samples) {
      for (const h of s.pauses ?? []) {
        const start = s.at - (s.interval_ms || 1000);
        const cur = current.get(h.route);
        if (cur && start <= cur.to) {
          cur.to = Math.max(cur.to, h.until);
        } else {
          const span = { route: h.route, from: start, to: h.until };
          current.set(h.route, span);
          spans.push(span);
        }
      }
    }
    return spans;
  }

  function overlap(span, t0, t1, now) {
    return Math.max(0, Math.min(t1, span.to ?? now) - Math.max(t0, span.from));
  }

  // ---- formatting -----------------------------------------------------------------------

  // By hand: toLocaleTimeString costs about 0.1 ms a call, too much for 600 table rows.
  const two = (n) => (n < 10 ? `0${n}` : String(n));
  const clock = (ms) => {
    const d = new Date(ms);
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  };
  const lasting = (ms) => (ms < 90000 ? `${Math.max(1, Math.round(ms / 1000))} s` : `${Math.round(ms / 60000)} min`);
  const round = (v) => (v === null ? "" : v >= 100 ? String(Math.round(v)) : String(Math.round(v * 10) / 10));
  const perSec = (n, f) => (f.secs > 0 ? n / f.secs : 0);
  const sum = (xs) => xs.reduce((a, b) => a + b, 0);

  const legends = new Map();
  function legend(id, items) {
    const key = JSON.stringify(items);
    if (legends.get(id) === key) return;
    legends.set(id, key);
    $(id).replaceChildren(...items.map(([cls, text]) =>
      el("li", {}, el("span", { class: `swatch ${cls}`, "aria-hidden": "true" }), text)));
  }

  /** Fills a table's head and body (columns: [label, numeric?]). */
  function table(id, columns, rows) {
    const t = $(id);
    t.tHead.replaceChildren(el("tr", {}, ...columns.map(([label, num]) =>
      el("th", { scope: "col", class: num ? "num" : "" }, label))));
    // A row may carry `sampleAt` (its sample's time, ms): tests and tools read it from data-at.
    t.tBodies[0].replaceChildren(...(rows.length ? rows : [["nothing in the window"]]).map((cells) =>
      el("tr", cells.sampleAt ? { "data-at": cells.sampleAt } : {}, ...cells.map((c, i) =>
        el("td", { class: columns[i]?.[1] ? "num" : "" }, c instanceof Node ? c : String(c))))));
  }

  // ---- the charts -----------------------------------------------------------------------

  function window_() {
    const to = hist.lastAt;
    const from = to - windowMs;
    return { to, from, samples: hist.samples.filter((s) => s.interval_ms > 0 && s.at > from) };
  }

  const slot = (s) => [s.at - s.interval_ms, s.at];

  function drawCalls(w, spans, holds) {
    const seen = new Set();
    for (const s of w.samples) for (const k of Object.keys(s.fig.calls)) seen.add(k);
    const outcomes = [...OUTCOMES.filter((o) => seen.has(o)), ...[...seen].filter((o) => !OUTCOMES.includes(o)).sort()];
    const shades = [
      ...holds.map((h) => ({ cls: "shade-hold", from: h.from, to: h.to })),
      ...spans.map((sp) => ({ cls: "shade-breaker", from: sp.from, to: sp.to ?? w.to })),
    ];
    seatgateCharts.time($("calls-chart"), {
      from: w.from, to: w.to, unit: "/s", min: 5, shades,
      bars: outcomes.map((o) => ({ cls: `o-${o}`, points: w.samples.map((s) => [...slot(s), perSec(s.fig.calls[o] ?? 0, s.fig)]) })),
    });
    legend("calls-legend", [
      ...outcomes.map((o) => [`o-${o}`, o]),
      ["shade-breaker", "breaker open (shaded)"],
      ["shade-hold", "Retry-After pause (shaded)"],
    ]);
    const total = sum(w.samples.map((s) => s.fig.callsTotal));
    let peak = null;
    for (const s of w.samples) if (!peak || perSec(s.fig.callsTotal, s.fig) > perSec(peak.fig.callsTotal, peak.fig)) peak = s;
    const byOutcome = outcomes.map((o) => `${o} ${sum(w.samples.map((s) => s.fig.calls[o] ?? 0))}`).join(", ");
    const openSecs = sum(spans.map((sp) => ((sp.to ?? w.to) - Math.max(sp.from, w.from)) / 1000));
    $("calls-sum").textContent =
      `${total} upstream calls in the last ${lasting(w.to - (w.samples[0]?.at ?? w.to) + 1000)}` +
      (total ? ` (${byOutcome}); at most ${round(perSec(peak.fig.callsTotal, peak.fig))} a second, at ${clock(peak.at)}.` : ".") +
      (spans.length ? ` The breaker opened ${spans.length} time(s), ${Math.round(openSecs)} s in all${spans.at(-1).to === null ? ", and is open now" : ""}.` : " The breaker stayed closed.") +
      (holds.length ? ` Retry-After pauses: ${holds.map((h) => `${h.route} until ${clock(h.to)}`).join(", ")}.` : " No Retry-After pause.");

    if ($("calls-details").open) {
      const rows = [];
      for (const s of w.samples) {
        const [t0, t1] = slot(s);
        const open = sum(spans.map((sp) => overlap(sp, t0, t1, w.to)));
        const held = holds.filter((h) => overlap(h, t0, t1, w.to) > 0).map((h) => h.route);
        if (!s.fig.callsTotal && !open && !held.length) continue;
        const breaker = open >= t1 - t0 ? "open" : open > 0 ? "partly open" : "closed";
        const row = [clock(s.at), ...outcomes.map((o) => s.fig.calls[o] ?? 0), s.fig.callsTotal, breaker, held.join(" ") || "–"];
        row.sampleAt = s.at;
        rows.push(row);
      }
      rows.reverse();
      table("calls-table", [["Second to", false], ...outcomes.map((o) => [o, true]), ["All calls", true], ["Breaker", false], ["Holds", false]], rows);
    }
    // The breaker's open intervals, with what was sent during them.
    const rows = spans.slice().reverse().map((sp) => {
      let probes = 0;
      let callsWhileOpen = 0;
      for (const s of w.samples) {
        const [t0, t1] = slot(s);
        const o = overlap(sp, t0, t1, w.to);
        if (o > 0) probes += s.fig.probes;
        if (o >= t1 - t0) callsWhileOpen += s.fig.callsTotal;
      }
      const row = [clock(sp.from), sp.to === null ? "open now" : clock(sp.to),
        Math.round(((sp.to ?? w.to) - sp.from) / 100) / 10, sp.opens, probes, callsWhileOpen];
      row.sampleAt = sp.from;
      return row;
    });
    table("breaker-table", [["Opened", false], ["Closed", false], ["Seconds", true], ["Open phases", true],
      ["Probes", true], ["Calls in whole seconds open", true]], rows);
  }

  function drawQueues(w) {
    const all = hist.samples.filter((s) => s.at >= w.from);
    const line = (cls, key) => ({ cls, points: all.map((s) => [s.at, s.queues ? s.queues[key] : null]) });
    seatgateCharts.time($("queues-chart"), {
      from: w.from, to: w.to, min: 5,
      lines: [line("q-ready", "ready"), line("q-inflight", "in_flight"), line("q-dead", "dead"), line("q-events-dead", "events_dead")],
    });
    legend("queues-legend", [["q-ready", "seat queue: ready"], ["q-inflight", "seat queue: in flight"],
      ["q-dead", "seat dead letters"], ["q-events-dead", "event dead letters"]]);
    const known = all.filter((s) => s.queues);
    const max = (k) => Math.max(0, ...known.map((s) => s.queues[k]));
    const last = known.at(-1)?.queues;
    $("queues-sum").textContent = !known.length
      ? "The queues' depths could not be read."
      : `Now: ${last.ready} ready, ${last.in_flight} in flight, ${last.dead} seat dead letters, ${last.events_dead} event dead letters. ` +
        `Most in the window: ${max("ready")} ready, ${max("in_flight")} in flight, ${max("dead")} seat dead letters, ${max("events_dead")} event dead letters.`;
    if ($("queues-details").open) {
      const rows = [];
      let prev = null;
      for (const s of all) {
        const key = s.queues ? `${s.queues.ready}/${s.queues.in_flight}/${s.queues.dead}/${s.queues.events_dead}` : "?";
        if (key !== prev) rows.push(s.queues
          ? [clock(s.at), s.queues.ready, s.queues.in_flight, s.queues.dead, s.queues.events_dead]
          : [clock(s.at), "?", "?", "?", "?"]);
        prev = key;
      }
      rows.reverse();
      table("queues-table", [["At", false], ["Ready", true], ["In flight", true], ["Seat dead letters", true], ["Event dead letters", true]], rows);
    }
  }

  function drawTerminal(w) {
    seatgateCharts.time($("confirms-chart"), {
      from: w.from, to: w.to, unit: "/s", min: 5,
      bars: ["fresh", "replay"].map((k) => ({ cls: `c-${k}`, points: w.samples.map((s) => [...slot(s), perSec(s.fig.confirms[k] ?? 0, s.fig)]) })),
    });
    legend("confirms-legend", [["c-fresh", "fresh confirms"], ["c-replay", "replayed confirms"]]);
    seatgateCharts.time($("ttt-chart"), {
      from: w.from, to: w.to, unit: " ms", min: 100,
      lines: [
        { cls: "t-p50", points: w.samples.map((s) => [s.at, s.fig.p50]) },
        { cls: "t-p95", points: w.samples.map((s) => [s.at, s.fig.p95]) },
      ],
    });
    legend("ttt-legend", [["t-p50", "p50"], ["t-p95", "p95"]]);
    const confirms = sum(w.samples.map((s) => sum(Object.values(s.fig.confirms))));
    const terminal = sum(w.samples.map((s) => s.fig.terminal));
    const worst = Math.max(0, ...w.samples.map((s) => s.fig.p95 ?? 0));
    $("terminal-sum").textContent = `${confirms} confirms and ${terminal} intents reaching a terminal status in the window` +
      (terminal ? `; the worst second's p95 time to terminal ${round(worst)} ms (estimated within the histogram's buckets).` : ".");
    if ($("terminal-details").open) {
      const rows = w.samples.filter((s) => s.fig.terminal || sum(Object.values(s.fig.confirms)))
        .map((s) => [clock(s.at), s.fig.confirms.fresh ?? 0, s.fig.confirms.replay ?? 0, s.fig.terminal, round(s.fig.p50), round(s.fig.p95)])
        .reverse();
      table("terminal-table", [["Second to", false], ["Fresh confirms", true], ["Replays", true], ["Terminal", true],
        ["p50 ms", true], ["p95 ms", true]], rows);
    }
  }

  function drawReaper(w) {
    const seen = new Set();
    for (const s of w.samples) for (const k of Object.keys(s.fig.left)) seen.add(k);
    const whats = [...LEFT.filter((k) => seen.has(k)), ...[...seen].filter((k) => !LEFT.includes(k)).sort()];
    seatgateCharts.time($("reaper-chart"), {
      from: w.from, to: w.to, unit: "/s", min: 5,
      bars: whats.map((k) => ({ cls: `l-${k}`, points: w.samples.map((s) => [...slot(s), perSec(s.fig.left[k] ?? 0, s.fig)]) })),
      lines: [{ cls: "r-passes", points: w.samples.map((s) => [s.at, perSec(s.fig.passes, s.fig)]) }],
    });
    legend("reaper-legend", [["r-passes", "passes per second (line)"], ...whats.map((k) => [`l-${k}`, `left: ${k}`])]);
    const passes = sum(w.samples.map((s) => s.fig.passes));
    const left = whats.map((k) => `${k} ${sum(w.samples.map((s) => s.fig.left[k] ?? 0))}`);
    $("reaper-sum").textContent = `${passes} reaper passes in the window; ` +
      (left.length ? `they left ${left.join(", ")} for the next pass.` : "none left anything for the next.");
    if ($("reaper-details").open) {
      const rows = w.samples.filter((s) => s.fig.passes || Object.keys(s.fig.left).length)
        .map((s) => [clock(s.at), s.fig.passes, ...whats.map((k) => s.fig.left[k] ?? 0)]).reverse();
      table("reaper-table", [["Second to", false], ["Passes", true], ...whats.map((k) => [`Left: ${k}`, true])], rows);
    }
  }

  // ---- the flight view ------------------------------------------------------------------

  function pickList() {
    const select = $("flight-pick");
    const ids = [...new Set([...(flightId ? [flightId] : []), ...hist.watched])];
    const have = [...select.options].map((o) => o.value).filter(Boolean);
    // Rebuilt only when the list changed, so a keyboard user's place in it survives a refresh.
    if (JSON.stringify(have) !== JSON.stringify(ids)) {
      select.replaceChildren(el("option", { value: "", text: ids.length ? "choose a flight" : "no flight yet" }),
        ...ids.map((id) => el("option", { value: id, text: id })));
    }
    // With none chosen, follow the newest flight: in a flash sale, the one on sale.
    if (!flightId && hist.watched.length) pick(hist.watched[0]);
    select.value = flightId ?? "";
  }

  function pick(id) {
    flightId = id || null;
    $("flight-view").dataset.flight = flightId ?? "";
    delete $("flight-view").dataset.available;
  }

  function show(id) {
    pick(id);
    refreshFlight().then(schedule);
  }

  async function refreshFlight() {
    const id = flightId;
    if (!id) {
      $("flight-state").textContent = "Create a flight (POST /admin/flights) or enter its id.";
      return;
    }
    try {
      const f = await call("GET", `/__ops/flights/${encodeURIComponent(id)}`);
      if (id !== flightId) return;
      flightNow = f;
      $("flight-capacity").textContent = String(f.capacity);
      const held = f.held ?? 0;
      $("flight-available").textContent = String(f.available);
      $("flight-held").textContent = String(held);
      $("flight-booked").textContent = String(f.capacity - f.available - held);
      $("flight-soldout").textContent = f.sold_out ? "yes" : "no";
      const list = f.waitlist ?? {};
      $("flight-waiting").textContent = list.error ? "unreadable" : String(list.waiting ?? 0);
      $("flight-next").textContent = list.oldest
        ? `${list.oldest.headCount} seat(s), waiting since ${new Date(list.oldest.created_at).toLocaleTimeString()}`
        : "nobody";
      $("flight-view").dataset.available = String(f.available);
      $("flight-view").dataset.held = String(held);
      $("flight-view").dataset.waiting = String(list.waiting ?? 0);
      $("flight-state").textContent = `Flight ${f.flight_id}: ${f.available} of ${f.capacity} seats left over ${f.shards.length} shard(s)` +
        `${f.max_per_user ? `, at most ${f.max_per_user} per user` : ""}${f.sold_out ? "; marked sold out" : ""}.`;
      const shards = f.shards.map((s) => [s.shard, s.available, s.held ?? 0, s.share, s.share - s.available - (s.held ?? 0),
        el("meter", { min: 0, max: s.share, value: s.available, "aria-label": `Shard ${s.shard}: ${s.available} of ${s.share} left` })]);
      table("shards-table", [["Shard", true], ["Remaining", true], ["Held", true], ["Share", true], ["Sold from it", true], ["Stock left", false]], shards);
    } catch (e) {
      if (id !== flightId) return;
      flightNow = null;
      $("flight-state").textContent = `Flight ${id}: ${e.message}`;
      delete $("flight-view").dataset.available;
    }
  }

  function drawFlight(w) {
    const id = flightId;
    const all = hist.samples.filter((s) => s.at >= w.from);
    seatgateCharts.time($("flight-chart"), {
      from: w.from, to: w.to, min: 10, max: flightNow?.flight_id === id ? flightNow.capacity : undefined,
      lines: [{ cls: "f-left", points: all.map((s) => [s.at, id && id in (s.flights ?? {}) ? s.flights[id] : null]) }],
    });
    legend("flight-legend", [["f-left", `seats left${id ? ` on ${id}` : ""}`]]);
    seatgateCharts.time($("bookings-chart"), {
      from: w.from, to: w.to, unit: "/s", min: 5,
      bars: BOOKINGS.map((o) => ({ cls: `b-${o}`, points: w.samples.map((s) => [...slot(s), perSec(s.fig.bookings[o] ?? 0, s.fig)]) })),
    });
    legend("bookings-legend", BOOKINGS.map((o) => [`b-${o}`, o]));
    const total = (o) => sum(w.samples.map((s) => s.fig.bookings[o] ?? 0));
    const checkout = (e) => sum(w.samples.map((s) => s.fig.checkout[e] ?? 0));
    $("flight-lapsed").textContent = String(checkout("lapsed"));
    $("flight-view").dataset.lapsed = String(checkout("lapsed"));
    const left = all.filter((s) => id && id in (s.flights ?? {}));
    $("flight-sum").textContent = (id && left.length
      ? `${id}: ${left[0].flights[id]} seats left at ${clock(left[0].at)}, ${left.at(-1).flights[id]} at ${clock(left.at(-1).at)}. `
      : "") + `All flights in the window: ${total("booked")} booked, ${total("sold_out")} refused sold out, ${total("limit_reached")} refused over the per-user limit; ` +
      `checkout holds ${checkout("held")} made, ${checkout("confirmed")} confirmed, ${checkout("released")} released, ${checkout("lapsed")} lapsed.`;
    if ($("flight-details").open) {
      const rows = [];
      let prev = null;
      for (const s of all) {
        const now = id && id in (s.flights ?? {}) ? s.flights[id] : null;
        const taken = prev !== null && now !== null ? prev - now : "";
        if (s.interval_ms > 0 && (taken || BOOKINGS.some((o) => s.fig.bookings[o]))) {
          const row = [clock(s.at), now ?? "?", taken, ...BOOKINGS.map((o) => s.fig.bookings[o] ?? 0)];
          row.sampleAt = s.at;
          rows.push(row);
        }
        if (now !== null) prev = now;
      }
      rows.reverse();
      table("flight-table", [["Second to", false], ["Seats left", true], ["Seats taken", true],
        ...BOOKINGS.map((o) => [`${o} (all flights)`, true])], rows);
    }
  }

  // ---- drawing and polling --------------------------------------------------------------

  function draw() {
    drawPending = false;
    if (document.hidden || hist.lastAt === null) return;
    const t = performance.now();
    const w = window_();
    const spans = breakerSpans();
    const holds = holdSpans();
    drawCalls(w, spans, holds);
    drawQueues(w);
    drawTerminal(w);
    drawReaper(w);
    drawFlight(w);
    const m = hist.meta;
    $("tl-updated").textContent = `Last sample ${clock(hist.lastAt)}; ${m.held} of ${m.capacity} seconds kept in the runner ` +
      `(${Math.round(m.memory_bytes / 1000)} kB of memory, at most ${Math.round(m.memory_bound_bytes / 1e5) / 10} MB).`;
    stats.draws.push(Math.round((performance.now() - t) * 10) / 10);
    if (stats.draws.length > 300) stats.draws.shift();
    stats.drawn += 1;
    document.body.dataset.history = "ready";
  }

  /** Draws at the next frame, once however many things asked. */
  function schedule() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(draw);
  }

  for (const d of ["calls-details", "queues-details", "terminal-details", "reaper-details", "flight-details"]) {
    $(d).addEventListener("toggle", schedule);
  }
  document.addEventListener("visibilitychange", schedule);
  $("flight-pick").addEventListener("change", (ev) => show(ev.target.value));
  $("tl-window").addEventListener("change", (ev) => {
    windowMs = Number(ev.target.value) || WINDOW_MS;
    schedule();
  });
  $("flight-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    show($("flight-id").value.trim());
  });

  async function poll() {
    for (;;) {
      try {
        const since = hist.lastAt === null ? "" : `since=${hist.lastAt}&`;
        const body = await call("GET", `/__ops/history?${since}series_from=${hist.series.length}`);
        if (!ingest(body)) continue;
        pickList();
        if (flightId) await refreshFlight();
        schedule();
      } catch (e) {
        $("tl-updated").textContent = `Could not read the history: ${e.message}`;
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }
  poll();
})();

// Browser tests of the local runner's pages (`/` and `/ops`) in headless Debian Chromium,
// driven by playwright-core. Started by scripts/browser-tests.sh, which runs the runner on free
// loopback ports and passes SEATGATE_API and SEATGATE_UPSTREAM.
//
// The cases run in order on one stack, because each leaves what the next checks: two seats
// reserved by hand, then a burst of N, then a burst of 1,000 while the page is timed, then the
// ops page's count of every reserve so far against the upstream simulator's own count.
//
// Timings are printed (and a `browser-figures:` JSON line), not asserted tightly: the machine
// is shared, so only bounds generous enough never to flake on it are checked.
import { chromium } from "playwright-core";
import { mkdirSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";

const API = required("SEATGATE_API");
const UPSTREAM = required("SEATGATE_UPSTREAM");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = process.env.BROWSER_ARTIFACTS ?? "target/browser-artifacts";
const BURST_N = Number(process.env.BURST_N ?? 100);
const BIG_BURST_N = Number(process.env.BIG_BURST_N ?? 1000);

function required(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`browser tests: ${name} is not set (run them through scripts/browser-tests.sh)`);
    process.exit(2);
  }
  return v.replace(/\/$/, "");
}

if (!existsSync(CHROMIUM)) {
  console.error(
    `browser tests: no Chromium at ${CHROMIUM}. Install Debian's package: ` +
      "`scripts/browser-tests.sh install` (runs `apt-get install -y chromium`), or set CHROMIUM.",
  );
  process.exit(1);
}

class Failed extends Error {}
function check(cond, message) {
  if (!cond) throw new Failed(message);
}

const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => (s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN);
  return { n: s.length, p50: q(0.5), p95: q(0.95), max: s.length ? s[s.length - 1] : NaN };
};
const fmt = (o) => `n=${o.n} p50=${o.p50} ms p95=${o.p95} ms max=${o.max} ms`;

async function timedFetch(url) {
  const t = performance.now();
  const resp = await fetch(url);
  await resp.arrayBuffer();
  check(resp.ok, `GET ${url} answered ${resp.status}`);
  return Math.round((performance.now() - t) * 10) / 10;
}

async function reservePostsUpstream() {
  const resp = await fetch(`${UPSTREAM}/__admin/stats`);
  const body = await resp.json();
  return body.calls?.["POST /api/reservations"] ?? 0;
}

const figures = {};
const results = [];
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  // Debian's Chromium as root (CI runs as root) refuses to start with its sandbox on.
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
const context = await browser.newContext({ viewport: { width: 1200, height: 1000 } });
const consoleLines = [];
context.on("console", (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
context.on("weberror", (e) => consoleLines.push(`[pageerror] ${e.error().message}`));
const page = await context.newPage();

async function test(name, fn) {
  const t = performance.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`ok    ${name} (${Math.round(performance.now() - t)} ms)`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`FAIL  ${name}: ${e.message}`);
    mkdirSync(ARTIFACTS, { recursive: true });
    const base = join(ARTIFACTS, name.replace(/[^a-z0-9]+/gi, "-").toLowerCase());
    for (const [i, p] of context.pages().entries()) {
      try {
        await p.screenshot({ path: `${base}-${i}.png`, fullPage: true });
        writeFileSync(`${base}-${i}.html`, await p.content());
      } catch (err) {
        console.log(`      (no screenshot of page ${i}: ${err.message})`);
      }
    }
    writeFileSync(`${base}-console.txt`, consoleLines.join("\n"));
    console.log(`      screenshots, HTML and the console log: ${base}-*`);
  }
}

await test("the seat map loads fast and is accessible", async () => {
  const loads = [];
  const firstMap = [];
  for (let i = 0; i < 5; i++) {
    await page.goto(`${API}/`, { waitUntil: "load" });
    const nav = await page.evaluate(() => {
      const e = performance.getEntriesByType("navigation")[0];
      return { response: e.responseEnd - e.requestStart, load: e.loadEventEnd || performance.now() };
    });
    loads.push(Math.round(nav.load));
    await page.locator('#seats[data-ready="true"]').waitFor({ timeout: 15000 });
    firstMap.push(await page.evaluate(() => window.seatgateStats.firstMapAt));
  }
  const server = [];
  for (let i = 0; i < 20; i++) server.push(await timedFetch(`${API}/`));
  figures.page_load_ms = stats(loads);
  figures.seat_map_shown_ms = stats(firstMap);
  figures.get_index_ms = stats(server);
  console.log(`      page load (navigation start to load event): ${fmt(figures.page_load_ms)}`);
  console.log(`      seats shown (navigation start to first room read painted): ${fmt(figures.seat_map_shown_ms)}`);
  console.log(`      GET / from the runner: ${fmt(figures.get_index_ms)}`);
  check(figures.page_load_ms.max < 2000, `a page load took ${figures.page_load_ms.max} ms`);

  check((await page.locator(".seat").count()) === 40, "the demo room shows 40 seats");
  // Every form control is labelled, the status areas are live regions.
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, progress")].filter((e) => e.labels.length === 0).map((e) => e.id),
  );
  check(unlabelled.length === 0, `unlabelled controls: ${unlabelled}`);
  check((await page.locator('#status[role="status"][aria-live="polite"]').count()) === 1, "#status is a live region");
  // One Tab stop for the map, arrow keys move, and the focus ring is visible.
  await page.getByRole("button", { name: "Seat A-1, free" }).focus();
  await page.keyboard.press("ArrowRight");
  const focused = await page.evaluate(() => document.activeElement?.dataset.seat);
  check(focused === "A-2", `ArrowRight from A-1 focused ${focused}`);
  await page.keyboard.press("ArrowDown");
  check((await page.evaluate(() => document.activeElement?.dataset.seat)) === "B-2", "ArrowDown from A-2 is B-2");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Shift+Tab");
  const outline = await page.evaluate(() => {
    const s = getComputedStyle(document.activeElement);
    return { style: s.outlineStyle, width: parseFloat(s.outlineWidth), seat: document.activeElement?.dataset.seat };
  });
  check(outline.seat === "B-2", `Shift+Tab came back to ${outline.seat}, not the last seat focused`);
  check(outline.style !== "none" && outline.width >= 2, `focus ring ${JSON.stringify(outline)}`);
});

await test("a click reserves a seat: SUCCEEDED", async () => {
  await page.getByLabel("Demo user").selectOption("u1");
  await page.getByRole("button", { name: "Seat A-1, free" }).click();
  await page.locator('#intent-trail[data-final]').waitFor({ timeout: 30000 });
  const final = await page.locator("#intent-trail").getAttribute("data-final");
  const status = await page.locator("#status").textContent();
  check(final === "SUCCEEDED", `A-1 ended ${final}: ${status}`);
  check(/SUCCEEDED/.test(status), `the live region says ${status}`);
  const trail = await page.locator("#intent-trail li").allTextContents();
  check(trail[0].startsWith("PREPARED") && trail.at(-1).startsWith("SUCCEEDED"), `trail ${trail}`);
  await page.getByRole("button", { name: "Seat A-1, yours" }).waitFor({ timeout: 5000 });
});

await test("the keyboard reserves a seat as another user", async () => {
  await page.getByLabel("Demo user").selectOption("u2");
  await page.locator("#user-state", { hasText: "signed in as u2" }).waitFor({ timeout: 10000 });
  await page.getByRole("button", { name: "Seat A-1, yours" }).focus();
  await page.keyboard.press("ArrowRight");
  await page.keyboard.press("Enter");
  await page.locator("#intent-trail[data-final]").waitFor({ timeout: 30000 });
  const status = await page.locator("#status").textContent();
  check(/Seat A-2 for u2: SUCCEEDED/.test(status), `the live region says ${status}`);
  // A taken seat is refused on the page, without a request.
  await page.getByLabel("Demo user").selectOption("u3");
  await page.locator("#user-state", { hasText: "signed in as u3" }).waitFor({ timeout: 10000 });
  // u3 has not reserved A-1: the map must show it taken (read from the room), not free.
  await page.getByRole("button", { name: "Seat A-1, yours" }).or(page.getByRole("button", { name: "Seat A-1, taken" })).waitFor();
});

async function runBurst(n) {
  await page.evaluate(() => { window.seatgateStats.burst = null; });
  await page.getByLabel("Users", { exact: true }).fill(String(n));
  await page.getByRole("button", { name: "Run burst" }).click();
  await page.waitForFunction(() => window.seatgateStats.burst && (window.seatgateStats.burst.reserves !== undefined || window.seatgateStats.burst.error), null, { timeout: 240000, polling: 250 });
  const burst = await page.evaluate(() => window.seatgateStats.burst);
  check(!burst.error, `the burst failed: ${burst.error}`);
  return burst;
}

await test(`a burst of ${BURST_N} users on one seat: 1 reserve against N`, async () => {
  const upstreamBefore = await reservePostsUpstream();
  const burst = await runBurst(BURST_N);
  const users = await page.locator("#burst-users").textContent();
  const reserves = await page.locator("#burst-reserves").textContent();
  const upstreamAfter = await reservePostsUpstream();
  console.log(`      N=${users}: ${reserves} reserve POST(s) shown, ${upstreamAfter - upstreamBefore} at the simulator; ${JSON.stringify(burst.counts)}; prepare ${burst.prepareMs} ms, confirms ${burst.confirmMs} ms, to all terminal ${burst.terminalMs} ms`);
  check(users === String(BURST_N), `N shown ${users}`);
  check(reserves === "1", `reserves shown ${reserves}`);
  check(upstreamAfter - upstreamBefore === 1, `the simulator counted ${upstreamAfter - upstreamBefore} reserves`);
  check(burst.counts.SUCCEEDED === 1 && burst.counts.FAILED_RACE === BURST_N - 1, `outcomes ${JSON.stringify(burst.counts)}`);
  figures.burst = burst;
});

await test(`the page stays responsive during a ${BIG_BURST_N}-user burst`, async () => {
  const mainThread = [];
  const server = [];
  const pollsBefore = (await page.evaluate(() => window.seatgateStats.roomPolls.length));
  let running = true;
  const probe = (async () => {
    while (running) {
      const t = performance.now();
      // A round trip through the page's main thread: what a click would wait for.
      await page.evaluate(() => document.querySelectorAll(".seat").length);
      mainThread.push(Math.round(performance.now() - t));
      server.push(await timedFetch(`${API}/`));
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  let burst;
  try {
    burst = await runBurst(BIG_BURST_N);
  } finally {
    running = false;
    await probe;
  }
  const polls = await page.evaluate((from) => window.seatgateStats.roomPolls.slice(from), pollsBefore);
  const reserves = await page.locator("#burst-reserves").textContent();
  figures.big_burst = burst;
  figures.during_big_burst = { main_thread_ms: stats(mainThread), get_index_ms: stats(server), room_poll_ms: stats(polls) };
  console.log(`      N=${BIG_BURST_N}: ${reserves} reserve POST(s); ${JSON.stringify(burst.counts)}; prepare ${burst.prepareMs} ms, confirms ${burst.confirmMs} ms, to all terminal ${burst.terminalMs} ms`);
  console.log(`      during it: page main-thread round trip ${fmt(figures.during_big_burst.main_thread_ms)}`);
  console.log(`      during it: GET / from the runner ${fmt(figures.during_big_burst.get_index_ms)}`);
  console.log(`      during it: the page's room reads ${fmt(figures.during_big_burst.room_poll_ms)}`);
  check(reserves === "1", `reserves shown ${reserves}`);
  check(burst.counts.SUCCEEDED === 1, `outcomes ${JSON.stringify(burst.counts)}`);
  check(mainThread.length >= 3 && server.length >= 3, "the probes ran during the burst");
  check(figures.during_big_burst.main_thread_ms.max < 5000, "the page's main thread stalled over 5 s");
  check(figures.during_big_burst.get_index_ms.max < 5000, "GET / took over 5 s during the burst");
});

await test("the ops page shows the reserve count and the recent intents", async () => {
  const expected = await reservePostsUpstream();
  const ops = await context.newPage();
  const t = performance.now();
  await ops.goto(`${API}/ops`, { waitUntil: "load" });
  await ops.locator('body[data-ready="true"]').waitFor({ timeout: 15000 });
  figures.ops_ready_ms = Math.round(performance.now() - t);
  const shown = await ops.locator("#reserve-posts").textContent();
  console.log(`      reserve POSTs: ${shown} on the ops page, ${expected} at the simulator; ready in ${figures.ops_ready_ms} ms`);
  check(shown === String(expected), `the ops page shows ${shown}, the simulator counted ${expected}`);
  // 2 by hand + one per burst.
  check(expected === 4, `the simulator counted ${expected} reserves, expected 4`);
  const reserveRow = ops.locator("#calls tbody tr", { hasText: "reserve" }).filter({ hasText: "ok" });
  check((await reserveRow.count()) === 1, "the calls table has the reserve/ok row");
  check((await reserveRow.locator("td").last().textContent()) === String(expected), "reserve/ok counts every reserve");
  check((await ops.locator("#breaker").textContent()) === "closed", "the breaker is closed");
  check((await ops.locator("#q-dead").textContent()) === "0", "no dead letters");
  const recent = await ops.locator("#recent tbody tr").count();
  check(recent > 0, "recent terminal intents are listed");
  // The last burst's 999 races push the earlier successes out of the 50 kept.
  const statuses = await ops.locator("#recent tbody tr td:nth-child(4)").allTextContents();
  check(statuses.includes("FAILED_RACE"), `the recent statuses ${[...new Set(statuses)]}`);
  await ops.close();
});

await test("the ops page uses the admin routes this build has", async () => {
  const routes = (await (await fetch(`${API}/__ops`)).json()).admin_routes;
  const ops = await context.newPage();
  await ops.goto(`${API}/ops`, { waitUntil: "load" });
  await ops.locator('body[data-ready="true"]').waitFor({ timeout: 15000 });
  const visible = async (sel) => !(await ops.locator(sel).evaluate((e) => e.hidden));
  for (const [route, sel] of [
    ["POST /admin/dead-letters/redrive", "#redrive"],
    ["POST /admin/reconcile", "#reconcile"],
    ["GET /admin/seats/{seat_id}", "#seat-form"],
  ]) {
    check((await visible(sel)) === routes.includes(route), `${sel} shown iff ${route} is served`);
  }
  const historyButtons = ops.getByRole("button", { name: /^History of intent / });
  check((await historyButtons.count() > 0) === routes.includes("GET /admin/intents/{intent_id}"),
    "history buttons iff GET /admin/intents/{intent_id} is served");
  if (routes.includes("GET /admin/intents/{intent_id}")) {
    const status = (await ops.locator("#recent tbody tr").first().locator("td").nth(3).textContent());
    await historyButtons.first().click();
    await ops.locator("#history-table:not([hidden]) tbody tr").first().waitFor({ timeout: 10000 });
    const rows = await ops.locator("#history-table tbody tr").evaluateAll((trs) =>
      trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    const versions = rows.map((r) => Number(r[0]));
    console.log(`      intent history: ${rows.map((r) => `${r[2]}→${r[3]}`).join(", ")}`);
    check(rows.length >= 2, `history has ${rows.length} transitions`);
    check(versions.every((v, i) => i === 0 || v > versions[i - 1]), `versions in order: ${versions}`);
    check(rows.at(-1)[3] === status, `the history ends ${rows.at(-1)[3]}, the intent is ${status}`);
    check((await ops.evaluate(() => document.activeElement?.id)) === "detail", "focus moves to the details");
  }
  if (routes.includes("GET /admin/seats/{seat_id}")) {
    await ops.getByLabel("Seat id").fill("A-1");
    await ops.getByRole("button", { name: "Inspect seat" }).click();
    await ops.locator("#ops-status", { hasText: "Seat A-1:" }).waitFor({ timeout: 10000 });
    const text = await ops.locator("#ops-status").textContent();
    check(text === "Seat A-1: not held, last intent SUCCEEDED.", `the live region says ${text}`);
  }
  if (routes.includes("POST /admin/reconcile")) {
    await ops.getByRole("button", { name: "Reconcile now" }).click();
    await ops.locator("#ops-status", { hasText: /^Reconcile(:| failed)/ }).waitFor({ timeout: 15000 });
    const text = await ops.locator("#ops-status").textContent();
    console.log(`      ${text}`);
    check(text.startsWith("Reconcile: {"), `the live region says ${text}`);
  }
  if (routes.includes("POST /admin/dead-letters/redrive")) {
    await ops.getByRole("button", { name: "Redrive dead letters" }).click();
    await ops.locator("#ops-status", { hasText: /^Redrive(:| failed)/ }).waitFor({ timeout: 15000 });
    const text = await ops.locator("#ops-status").textContent();
    console.log(`      ${text}`);
    const moved = text.startsWith("Redrive: ") ? JSON.parse(text.slice("Redrive: ".length)) : null;
    check(Number.isInteger(moved?.seat_messages) && Number.isInteger(moved?.webhook_deliveries)
      && typeof moved?.more === "boolean", `the live region says ${text}`);
    // Whatever was dead is back in its queue now.
    await ops.locator("#q-dead", { hasText: /^0$/ }).waitFor({ timeout: 15000 });
  }
  await ops.close();
});

await browser.close();
console.log(`browser-figures: ${JSON.stringify(figures)}`);
const failed = results.filter((r) => !r.ok);
console.log(`${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length ? 1 : 0);

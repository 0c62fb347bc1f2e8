// Shared by the runner's pages: JSON calls to the runner, and reading its Prometheus text.
"use strict";

const seatgate = (() => {
  /** An error carrying the API's stable code, so callers can say what went wrong. */
  class ApiError extends Error {
    constructor(status, code, message) {
      super(`${status} ${code}: ${message}`);
      this.status = status;
      this.code = code;
    }
  }

  /** `fetch` of a same-origin path with a JSON body and an optional bearer token. */
  async function call(method, path, { token, body } = {}) {
    const headers = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
    const text = await resp.text();
    let json = null;
    if (text) {
      try { json = JSON.parse(text); } catch { json = null; }
    }
    if (!resp.ok) {
      throw new ApiError(resp.status, json?.error ?? "http_error", json?.message ?? text.slice(0, 200));
    }
    return json;
  }

  /** Every sample of the Prometheus text: `{name, labels, value}`. */
  function parseMetrics(text) {
    const samples = [];
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[2]) {
        for (const pair of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
          labels[pair[1]] = pair[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        }
      }
      samples.push({ name: m[1], labels, value: Number(m[3]) });
    }
    return samples;
  }

  async function metrics() {
    const resp = await fetch("/__metrics", { cache: "no-store" });
    if (!resp.ok) throw new ApiError(resp.status, "metrics", "GET /__metrics failed");
    return parseMetrics(await resp.text());
  }

  /** The sum of one metric's samples (over all its label values). */
  function total(samples, name) {
    return samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0);
  }

  /** Runs `work` over `items` with at most `limit` in flight; results in input order. */
  async function pool(items, limit, work, onDone) {
    const results = new Array(items.length);
    let next = 0;
    let done = 0;
    async function lane() {
      while (next < items.length) {
        const i = next++;
        try {
          results[i] = await work(items[i], i);
        } catch (e) {
          results[i] = { error: e };
        }
        done += 1;
        if (onDone) onDone(done);
      }
    }
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
    return results;
  }

  const TERMINAL = new Set([
    "SUCCEEDED", "FAILED_RACE", "FAILED_AUTH", "FAILED_UPSTREAM", "CANCELLED", "WAIT_EXPIRED",
  ]);

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c);
    return node;
  }

  return { ApiError, call, parseMetrics, metrics, total, pool, TERMINAL, sleep, el };
})();

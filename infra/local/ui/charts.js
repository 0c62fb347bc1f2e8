// Time charts as inline SVG, drawn by hand: no library, no build step, nothing fetched.
//
// One function, `seatgateCharts.time(svg, spec)`, redraws an <svg> in place: a time axis
// (clock minutes), a y axis with three gridlines at a round maximum, shaded intervals (the
// breaker open, a Retry-After pause) under the data, then stacked bars and lines. Each bar series
// is ONE <path> and each line ONE <path>, however many seconds are shown, so a redraw is a few
// dozen elements and a few string joins: cheap enough to run every second beside a burst.
// Colours come from classes in app.css (the page's CSP allows no inline style); the chart is an
// image to assistive technology (role="img", labelled by the page's heading and summary), and
// its numbers are in the table beside it.
"use strict";

const seatgateCharts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 720;
  const H = 160;
  const M = { left: 46, right: 8, top: 8, bottom: 20 };
  const PW = W - M.left - M.right;
  const PH = H - M.top - M.bottom;

  function svgEl(tag, attrs = {}, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** The smallest 1, 2 or 5 times a power of ten at least `v` (at least `min`). */
  function roundUp(v, min = 1) {
    const x = Math.max(v, min);
    const p = 10 ** Math.floor(Math.log10(x));
    for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
    return 10 * p;
  }

  function fmt(v) {
    if (v >= 10000) return `${Math.round(v / 1000)}k`;
    if (v >= 1000) return `${(v / 1000).toFixed(1)}k`;
    return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }

  const r1 = (v) => Math.round(v * 10) / 10;

  /**
   * Redraws `svg`. `spec`:
   *   from, to      the time window, ms since the epoch
   *   bars          [{ cls, points: [[t0, t1, value], ...] }], stacked in this order
   *   lines         [{ cls, points: [[t, value | null], ...] }] (null breaks the line)
   *   shades        [{ cls, from, to }]
   *   unit          a word after the y axis maximum ("/s", "ms")
   *   min           the least y maximum (so a quiet chart does not magnify noise)
   *   max           a fixed y maximum (a flight's capacity), unless the data goes past it
   */
  function time(svg, spec) {
    const { from, to } = spec;
    const span = Math.max(1, to - from);
    const x = (t) => M.left + ((Math.min(Math.max(t, from), to) - from) / span) * PW;
    // The stacked bars' heights per slot, for the y scale.
    let top = 0;
    const stack = new Map();
    for (const s of spec.bars ?? []) {
      for (const [t0, , v] of s.points) {
        const h = (stack.get(t0) ?? 0) + v;
        stack.set(t0, h);
        if (h > top) top = h;
      }
    }
    for (const s of spec.lines ?? []) {
      for (const [, v] of s.points) if (v !== null && v > top) top = v;
    }
    const yMax = spec.max && top <= spec.max ? spec.max : roundUp(top, spec.min ?? 1);
    const y = (v) => M.top + PH - (v / yMax) * PH;

    const nodes = [];
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    for (const s of spec.shades ?? []) {
      const x0 = x(s.from);
      const x1 = x(s.to);
      if (x1 - x0 <= 0) continue;
      nodes.push(svgEl("rect", { class: s.cls, x: r1(x0), y: M.top, width: r1(Math.max(1, x1 - x0)), height: PH }));
    }
    // Gridlines and labels: 0, half and the maximum; a tick at each clock minute.
    for (const v of [0, yMax / 2, yMax]) {
      nodes.push(svgEl("line", { class: "grid", x1: M.left, x2: W - M.right, y1: r1(y(v)), y2: r1(y(v)) }));
      nodes.push(svgEl("text", { class: "tick", x: M.left - 4, y: r1(y(v) + 4), "text-anchor": "end" },
        v === yMax && spec.unit ? `${fmt(v)}${spec.unit}` : fmt(v)));
    }
    const minute = 60000;
    for (let t = Math.ceil(from / minute) * minute; t <= to; t += minute) {
      nodes.push(svgEl("line", { class: "grid", x1: r1(x(t)), x2: r1(x(t)), y1: M.top, y2: M.top + PH }));
      const d = new Date(t);
      const label = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
      nodes.push(svgEl("text", { class: "tick", x: r1(x(t)), y: H - 5, "text-anchor": "middle" }, label));
    }
    // Bars: one path per series, each slot a rectangle stacked on those before it.
    const base = new Map();
    for (const s of spec.bars ?? []) {
      const parts = [];
      for (const [t0, t1, v] of s.points) {
        if (!(v > 0) || t1 <= from) continue;
        const b = base.get(t0) ?? 0;
        base.set(t0, b + v);
        const x0 = x(t0);
        const w = Math.max(0.8, x(t1) - x0);
        parts.push(`M${r1(x0)} ${r1(y(b))}h${r1(w)}V${r1(y(b + v))}h${r1(-w)}Z`);
      }
      if (parts.length) nodes.push(svgEl("path", { class: s.cls, d: parts.join("") }));
    }
    for (const s of spec.lines ?? []) {
      const parts = [];
      let pen = "M";
      for (const [t, v] of s.points) {
        if (v === null || v === undefined || t < from) {
          pen = "M";
          continue;
        }
        parts.push(`${pen}${r1(x(t))} ${r1(y(v))}`);
        pen = "L";
      }
      if (parts.length) nodes.push(svgEl("path", { class: `line ${s.cls}`, d: parts.join("") }));
    }
    nodes.push(svgEl("rect", { class: "frame", x: M.left, y: M.top, width: PW, height: PH }));
    svg.replaceChildren(...nodes);
    return { yMax };
  }

  return { time, roundUp };
})();

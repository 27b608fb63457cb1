// seqlab serve: how the Explore tab (static/explore.js) draws a view, by its kind (`seqlab.contract.views`):
// tokens (a heat strip, a token's details on hover or focus), matrix (heat maps by group and panel on a canvas,
// units sorted and searched as LSTMVis does, bertviz's lines), bars, tree (a search left to right by step, its
// finished hypotheses ranked). Each `draw` appends to a view's box what the view's JSON holds; none knows which
// family or view it draws. Plain JavaScript over page.js's `el` and `$`.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const child of children) node.append(child);
  return node;
}

const fixed = (value, digits = 3) => (value == null ? "—" : Number(value).toFixed(digits));
const percent = (value) => (value == null ? "—" : `${(100 * value).toFixed(1)}%`);
// a token as shown: its line breaks and tabs visible, and the spaces it starts or ends with (a character's, a
// piece's); a label's inner space ("unit 17") as it is
const shownToken = (token) => String(token).replace(/^ +| +$/g, (spaces) => "␣".repeat(spaces.length))
  .replaceAll("\n", "↵").replaceAll("\t", "⇥") || "∅";

// ---- the kinds: what draws each (explore.js's drawExplanation calls it with the view and its box) ----

const KINDS = { tokens: drawTokens, matrix: drawMatrix, bars: drawBars, tree: drawTree };

// ---- colour scales: one hue from low to high, or two about zero when the range holds both signs ----

const BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
const DIVERGING = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [244, 165, 130], [178, 24, 43]];
const MISSING = "#d9d9d9";

function finiteRange(values) {
  let low = Infinity, high = -Infinity;
  for (const v of values) if (v != null && Number.isFinite(v)) { low = Math.min(low, v); high = Math.max(high, v); }
  return low > high ? [0, 1] : [low, high];
}

function scaleOf(values, range) {
  let [low, high] = range || finiteRange(values);
  const diverging = low < 0 && high > 0;
  if (diverging) { high = Math.max(-low, high); low = -high; }
  if (high === low) high = low + 1;
  const stops = diverging ? DIVERGING : BLUES;
  const rgb = (value) => {
    const t = Math.min(1, Math.max(0, (value - low) / (high - low))) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(t)), f = t - i;
    return stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c)));
  };
  const colour = (value) => (value == null || !Number.isFinite(value) ? MISSING : `rgb(${rgb(value).join(",")})`);
  const ink = (value) => {
    if (value == null) return "#1d2330";
    const [r, g, b] = rgb(value);
    return 0.299 * r + 0.587 * g + 0.114 * b < 140 ? "#fff" : "#1d2330";
  };
  return { low, high, colour, ink, stops };
}

function legend(scale, label) {
  const gradient = scale.stops.map((c, i) => `rgb(${c.join(",")}) ${(100 * i) / (scale.stops.length - 1)}%`);
  return el("div", { class: "legend-scale", "aria-hidden": "true" },
    el("span", { class: "legend-label" }, label || "value"),
    el("span", { class: "legend-end" }, fixed(scale.low)),
    el("span", { class: "legend-bar", style: { background: `linear-gradient(to right, ${gradient.join(", ")})` } }),
    el("span", { class: "legend-end" }, fixed(scale.high)));
}

// ---- tokens: a heat strip; hover or focus a token for its details ----

function drawTokens(view, box) {
  const scale = scaleOf(view.values, null);
  const detail = el("div", { class: "token-detail", "aria-live": "polite" },
    el("p", { class: "muted" }, "Hover over or focus a token to see its details."));
  const strip = el("div", { class: "strip", role: "list" });
  view.tokens.forEach((token, i) => {
    const value = view.values[i];
    const chip = el("span", { class: "tok", tabindex: "0", role: "listitem", "data-index": String(i),
      "aria-label": `${token}: ${view.label || "value"} ${fixed(value)}`,
      style: { background: scale.colour(value), color: scale.ink(value) } }, shownToken(token));
    const show = () => {
      for (const other of strip.querySelectorAll(".tok.on")) other.classList.remove("on");
      chip.classList.add("on");
      detail.replaceChildren(...tokenDetail(token, value, view.label, (view.details || [])[i]));
    };
    chip.addEventListener("mouseenter", show);
    chip.addEventListener("focus", show);
    strip.append(chip);
  });
  box.append(legend(scale, view.label), strip, detail);
}

function tokenDetail(token, value, label, details) {
  const out = [el("p", {}, el("code", { class: "tok-name" }, JSON.stringify(token)), ` ${label || "value"} `,
    el("strong", {}, fixed(value)))];
  if (!details) return out;
  const facts = Object.entries(details).filter(([key, v]) => key !== "alternatives" && typeof v !== "object");
  const alternatives = details.alternatives || [];
  if (facts.length) {
    out.push(el("dl", { class: "facts" }, ...facts.flatMap(([key, v]) =>
      [el("dt", {}, key.replaceAll("_", " ")), el("dd", {}, typeof v === "number" && !Number.isInteger(v) ?
        fixed(v, 4) : String(v))])));
  }
  if (details.alternatives) {
    out.push(el("ol", { class: "alternatives", "aria-label": "the model's most likely tokens here" },
      ...alternatives.map(([alternative, p]) => el("li", { class: alternative === token ? "actual" : "" },
        el("code", {}, shownToken(alternative)),
        el("span", { class: "alt-track" }, el("span", { class: "alt-fill", style: { width: percent(p) } })),
        el("span", { class: "alt-value" }, percent(p))))));
  }
  return out;
}

// ---- bars: a horizontal bar per label, the largest first ----

function drawBars(view, box) {
  const rows = view.labels.map((label, i) => [label, view.values[i]])
    .sort(([, p], [, q]) => (q ?? -Infinity) - (p ?? -Infinity));
  box.append(el("ol", { class: "xbars", "aria-label": view.label || view.title }, ...rows.map(([label, p], i) =>
    el("li", { class: i === 0 ? "xbar top" : "xbar", "data-label": label },
      el("span", { class: "bar-label" }, label),
      el("span", { class: "bar-track", role: "img", "aria-label": `${label}: ${percent(p)}` },
        el("span", { class: "bar-fill", style: { width: percent(Math.max(0, p ?? 0)) } })),
      el("span", { class: "bar-value" }, percent(p))))));
}

// ---- matrix: a heat map per panel (canvas), chosen by group and panel; units sorted and searched (by the value at
// a clicked column, or by how they fire on a selected range of columns: LSTMVis's rule); a strip above (a layer's
// hidden-state norms); lines ----

const UNIT = /^unit (\d+)$/;

function drawMatrix(view, box) {
  const groups = [...new Set(view.panels.map((p) => p.group))];
  const ui = { group: groups[0], panel: 0, sort: "index", column: null, range: null, search: "", mode: "heat" };
  const inGroup = () => view.panels.filter((p) => p.group === ui.group);
  const controls = el("div", { class: "controls row wrap" });
  const figure = el("div", { class: "figure" });
  const uid = `m-${view.name}`;

  const groupSelect = el("select", { id: `${uid}-group`, class: "group-select" },
    ...groups.map((g) => el("option", { value: g }, g || "all")));
  const panelSelect = el("select", { id: `${uid}-panel`, class: "panel-select" });
  const fillPanels = () => {
    panelSelect.replaceChildren(...inGroup().map((p, i) => el("option", { value: String(i) }, p.title)));
    panelSelect.value = String(ui.panel);
    panelSelect.parentElement.hidden = inGroup().length < 2;
  };
  groupSelect.addEventListener("change", () => { ui.group = groupSelect.value; ui.panel = 0; fillPanels(); render(); });
  panelSelect.addEventListener("change", () => { ui.panel = Number(panelSelect.value); render(); });
  const groupField = el("div", { class: "field small" }, el("label", { for: groupSelect.id }, "Group"), groupSelect);
  groupField.hidden = groups.length < 2;
  controls.append(groupField, el("div", { class: "field grow" }, el("label", { for: panelSelect.id }, "Panel"),
    panelSelect));

  const units = view.panels.some((p) => p.rows.length && p.rows.every((r) => UNIT.test(r)));
  const sortSelect = el("select", { id: `${uid}-sort`, class: "sort-select" },
    el("option", { value: "index" }, "unit number"), el("option", { value: "variance" }, "variance, largest first"),
    el("option", { value: "column", disabled: "" }, "value at a clicked column"),
    el("option", { value: "range", disabled: "" }, "firing in a selected range"));
  const search = el("input", { id: `${uid}-search`, class: "unit-search", type: "search",
    placeholder: "e.g. 17, 3-10", autocomplete: "off" });
  if (units) {
    sortSelect.addEventListener("change", () => { ui.sort = sortSelect.value; render(); });
    search.addEventListener("input", () => { ui.search = search.value; render(); });
    controls.append(el("div", { class: "field small" }, el("label", { for: sortSelect.id }, "Sort units by"),
      sortSelect), el("div", { class: "field small" }, el("label", { for: search.id }, "Find units"), search));
  }
  if (view.lines) {
    const modes = el("div", { class: "modes", role: "group", "aria-label": "drawing" });
    for (const [mode, text] of [["heat", "Heat map"], ["lines", "Lines"]]) {
      const button = el("button", { type: "button", class: "mode", "data-mode": mode,
        "aria-pressed": String(mode === ui.mode) }, text);
      button.addEventListener("click", () => {
        ui.mode = mode;
        for (const b of modes.children) b.setAttribute("aria-pressed", String(b.dataset.mode === mode));
        render();
      });
      modes.append(button);
    }
    controls.append(modes);
  }
  box.append(controls, figure);
  fillPanels();

  function render() {
    const panel = inGroup()[ui.panel];
    if (!panel) return figure.replaceChildren(el("p", { class: "muted" }, "(no panel)"));
    const order = rowOrder(panel, ui);
    const byColumn = sortSelect.querySelector("[value=column]"), byRange = sortSelect.querySelector("[value=range]");
    if (units) {
      sortSelect.value = ui.sort;
      byColumn.disabled = ui.column == null;
      byColumn.textContent = ui.column == null ? "value at a clicked column" :
        `value at column ${ui.column + 1} (${shownToken(panel.cols[ui.column] ?? "")})`;
      byRange.disabled = ui.range == null;
      byRange.textContent = ui.range == null ? "firing in a selected range" :
        `firing in columns ${ui.range[0] + 1}-${ui.range[1] + 1}`;
    }
    // a click sorts the units by its column; a drag over the columns, or a shift-click from the last clicked
    // column, selects a range and ranks the units by how they fire in it
    const pick = (column, to = column) => {
      if (!units) return;
      if (to === column) {
        ui.sort = "column";
        ui.column = column;
      } else {
        ui.sort = "range";
        ui.range = [Math.min(column, to), Math.max(column, to)];
      }
      render();
    };
    const focused = figure.contains(document.activeElement);        // the keyboard stays on the heat map
    const range = ui.sort === "range" ? ui.range : null;
    figure.replaceChildren(el("h3", { class: "panel-title" }, panel.title),
      ui.mode === "lines" ? lines(panel) : heatmap(panel, order, pick, ui.column, range));
    if (units && range && ui.mode !== "lines") figure.append(firingList(panel, order, range));
    if (focused && figure.querySelector("canvas")) figure.querySelector("canvas").focus();
  }
  render();
}

function variance(row) {
  const seen = row.filter((v) => v != null);
  if (!seen.length) return 0;
  const mean = seen.reduce((a, b) => a + b, 0) / seen.length;
  return seen.reduce((a, b) => a + (b - mean) ** 2, 0) / seen.length;
}

// LSTMVis's "which units fire on this pattern" (Strobelt et al., 2018), as one score per unit: the mean of its
// values on the selected columns from..to minus its mean on the other columns (missing values skipped; null when
// it has none inside; the mean inside alone when the range holds every column). Units are ranked by it, highest
// first: those on inside the range and off outside it come first.
function firing(row, from, to) {
  let inside = 0, counted = 0, outside = 0, others = 0;
  row.forEach((v, c) => {
    if (v == null) return;
    if (c >= from && c <= to) { inside += v; counted += 1; } else { outside += v; others += 1; }
  });
  if (!counted) return null;
  return inside / counted - (others ? outside / others : 0);
}

const FIRING_LISTED = 10;

// the units that fire most on the selected range, listed with their scores (the heat map shows them first)
function firingList(panel, order, range) {
  const [from, to] = range;
  const words = panel.cols.slice(from, to + 1).map(shownToken).join(" ");
  const top = order.slice(0, FIRING_LISTED);
  return el("div", { class: "firing" },
    el("p", {}, `The units that fire most on columns ${from + 1}-${to + 1} (`, el("code", {}, words),
      `), by the mean inside the range minus the mean outside it:`),
    el("ol", { class: "firing-units", "aria-label": "units ranked by how they fire on the selected range" },
      ...top.map((r) => el("li", { "data-row": panel.rows[r] }, el("span", {}, panel.rows[r]),
        el("span", { class: "firing-score" }, fixed(firing(panel.values[r], from, to)))))));
}

// the rows shown, in their order: units filtered by the search ("17", "3-10", "17, 40") and sorted as chosen
function rowOrder(panel, ui) {
  let order = panel.rows.map((_, i) => i);
  const wanted = ui.search.split(/[\s,]+/).filter(Boolean).map((part) => {
    const range = part.match(/^(\d+)\s*-\s*(\d+)$/);
    if (range) return [Number(range[1]), Number(range[2])];
    return /^\d+$/.test(part) ? [Number(part), Number(part)] : null;
  }).filter(Boolean);
  if (wanted.length) {
    order = order.filter((r) => {
      const m = panel.rows[r].match(UNIT);
      return m && wanted.some(([a, b]) => Number(m[1]) >= a && Number(m[1]) <= b);
    });
  }
  const unit = (r) => Number((panel.rows[r].match(UNIT) || [0, r])[1]);
  if (ui.sort === "variance") order.sort((a, b) => variance(panel.values[b]) - variance(panel.values[a]));
  else if (ui.sort === "column" && ui.column != null) {
    order.sort((a, b) => (panel.values[b][ui.column] ?? -Infinity) - (panel.values[a][ui.column] ?? -Infinity));
  } else if (ui.sort === "range" && ui.range) {
    const score = order.map((r) => firing(panel.values[r], ...ui.range) ?? -Infinity);
    const at = new Map(order.map((r, i) => [r, score[i]]));
    order.sort((a, b) => at.get(b) - at.get(a));
  } else order.sort((a, b) => unit(a) - unit(b));
  return order;
}

function largest(panel) {
  let best = null;
  panel.values.forEach((row, r) => row.forEach((v, c) => {
    if (v != null && (best === null || v > best.value)) best = { value: v, row: r, col: c };
  }));
  return best;
}

// the heat map of a panel's rows in `order`, its strip (if it has one) a band above the cells; `pick(column)` on a
// click (the keyboard's Enter), `pick(from, to)` on a drag over columns or a shift-click from `anchor` (the last
// clicked column; Shift+Enter from the keyboard); `range` [from, to] is outlined
function heatmap(panel, order, pick, anchor = null, range = null) {
  const scale = scaleOf(panel.values.flat(), panel.range);
  const strip = panel.strip ? { scale: scaleOf(panel.strip, null), height: 14, gap: 6 } : null;
  const rows = order.length, cols = panel.cols.length;
  const wrap = el("div", { class: "heat" });
  if (!rows || !cols) {
    wrap.append(el("p", { class: "muted" }, rows ? "(no columns)" : "no unit matches the search"));
    return wrap;
  }
  const font = "11px system-ui, sans-serif";
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = font;
  const width = (labels) => Math.min(140, Math.max(0, ...labels.map((l) => measure.measureText(shownToken(l)).width)));
  const left = Math.ceil(width([...order.map((r) => panel.rows[r]), ...(strip ? ["‖h‖"] : [])])) + 8;
  const labelled = Math.ceil(width(panel.cols)) + 8;                 // the column labels' height
  const top = labelled + (strip ? strip.height + strip.gap : 0);     // the cells' top
  const room = Math.max(300, (document.getElementById("explore-results").clientWidth || 900) - left - 24);
  const cw = Math.max(3, Math.min(28, Math.floor(room / cols)));
  const ch = rows <= 40 ? Math.min(Math.max(cw, 14), 24) : Math.max(3, Math.min(16, Math.floor(720 / rows)));
  const W = left + cols * cw + 4, H = top + rows * ch + 4;
  const best = largest(panel);
  const canvas = el("canvas", { class: "cells", role: "img", tabindex: "0", "data-rows": String(rows),
    "data-cols": String(cols), "data-order": JSON.stringify(order.map((r) => panel.rows[r])),
    "data-left": String(left), "data-top": String(top), "data-cw": String(cw), "data-ch": String(ch),
    ...(strip ? { "data-strip-top": String(labelled), "data-strip-height": String(strip.height) } : {}),
    ...(range ? { "data-range": JSON.stringify(range) } : {}),
    "aria-label": `${panel.title}: ${panel.rows.length} rows by ${cols} columns` + (best ? `; the largest value, ` +
      `${fixed(best.value)}, at ${panel.rows[best.row]} and ${panel.cols[best.col]}` : "") +
      (strip ? `; above them, ${panel.strip_label || "a value per column"}` : "") });
  const ratio = window.devicePixelRatio || 1;
  canvas.width = W * ratio;
  canvas.height = H * ratio;
  canvas.style.width = `${W}px`;
  canvas.style.height = `${H}px`;
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  ctx.font = font;
  ctx.fillStyle = "#1d2330";
  const every = (size) => Math.max(1, Math.ceil(10 / size));          // labels no closer than 10 px
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  order.forEach((r, y) => {
    if (y % every(ch) === 0) ctx.fillText(shownToken(panel.rows[r]), left - 4, top + y * ch + ch / 2, 140);
  });
  if (strip) ctx.fillText("‖h‖", left - 4, labelled + strip.height / 2, 140);
  ctx.textAlign = "left";
  for (let c = 0; c < cols; c += every(cw)) {
    ctx.save();
    ctx.translate(left + c * cw + cw / 2, labelled - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(shownToken(panel.cols[c]), 0, 0, 140);
    ctx.restore();
  }
  order.forEach((r, y) => panel.values[r].forEach((v, c) => {
    ctx.fillStyle = scale.colour(v);
    ctx.fillRect(left + c * cw, top + y * ch, cw, ch);
  }));
  if (strip) {                                                       // the strip: its own scale
    panel.strip.forEach((v, c) => {
      ctx.fillStyle = strip.scale.colour(v);
      ctx.fillRect(left + c * cw, labelled, cw, strip.height);
    });
  }
  if (range) {                                                       // the selected range outlined, strip to foot
    ctx.strokeStyle = "#e8590c";
    ctx.lineWidth = 2;
    ctx.setLineDash([4, 2]);
    ctx.strokeRect(left + range[0] * cw + 1, labelled + 1, (range[1] - range[0] + 1) * cw - 2, top - labelled +
      rows * ch - 2);
    ctx.setLineDash([]);
  }
  if (panel.path) {                                                  // the path's cells outlined (Viterbi)
    ctx.strokeStyle = "#e8590c";
    ctx.lineWidth = 2;
    order.forEach((r, y) => {
      const c = panel.path[r];
      if (c != null && c >= 0 && c < cols) ctx.strokeRect(left + c * cw + 1, top + y * ch + 1, cw - 2, ch - 2);
    });
  }
  const tip = el("div", { class: "tip", role: "status", hidden: "" });
  const cell = (event) => {
    const box = canvas.getBoundingClientRect();
    const x = event.clientX - box.left - left, y = event.clientY - box.top - top;
    const c = Math.floor(x / cw), row = Math.floor(y / ch);
    const onStrip = strip && y < -strip.gap && y >= -strip.gap - strip.height;
    return { c: c >= 0 && c < cols ? c : null, y: row >= 0 && row < rows && x >= 0 ? row : null, onStrip,
      clamped: Math.min(cols - 1, Math.max(0, c)) };
  };
  const showCell = (y, c, px, py) => {
    const r = order[y];
    tip.textContent = `${panel.rows[r]} · ${shownToken(panel.cols[c])}: ${fixed(panel.values[r][c], 4)}` +
      (panel.path && panel.path[r] === c ? " (on the path)" : "");
    tip.style.left = `${px + 14}px`;
    tip.style.top = `${py + 14}px`;
    tip.hidden = false;
  };
  const showStrip = (c, px, py) => {
    tip.textContent = `${panel.strip_label || "strip"} · ${shownToken(panel.cols[c])}: ${fixed(panel.strip[c], 4)}`;
    tip.style.left = `${px + 14}px`;
    tip.style.top = `${py + 14}px`;
    tip.hidden = false;
  };
  canvas.addEventListener("mousemove", (event) => {
    const { c, y, onStrip } = cell(event);
    if (c != null && onStrip) { showStrip(c, event.offsetX, event.offsetY); return; }
    if (c == null || y == null) { tip.hidden = true; return; }
    showCell(y, c, event.offsetX, event.offsetY);
  });
  // the keyboard's cursor: arrows move it cell by cell, Enter sorts the units by its column
  const cursor = { y: 0, c: 0 };
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  canvas.addEventListener("focus", () => showCell(cursor.y, cursor.c, left + cursor.c * cw, top + cursor.y * ch));
  canvas.addEventListener("blur", () => { tip.hidden = true; });
  canvas.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { pick(event.shiftKey && anchor != null ? anchor : cursor.c, cursor.c); return; }
    const move = moves[event.key];
    if (!move) return;
    event.preventDefault();
    cursor.y = Math.min(rows - 1, Math.max(0, cursor.y + move[0]));
    cursor.c = Math.min(cols - 1, Math.max(0, cursor.c + move[1]));
    showCell(cursor.y, cursor.c, left + cursor.c * cw, top + cursor.y * ch);
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  // press on a column and release on another: that range; a click: its column (with Shift: from `anchor` to it)
  canvas.addEventListener("mousedown", (event) => {
    const { c } = cell(event);
    if (c == null || event.button !== 0) return;
    event.preventDefault();                                          // no text selected while dragging
    window.addEventListener("mouseup", (up) => {
      const to = cell(up).clamped;
      if (to !== c) pick(c, to);
      else pick(up.shiftKey && anchor != null ? anchor : c, c);
    }, { once: true });
  });
  if (strip) wrap.append(legend(strip.scale, `‖h‖ strip: ${panel.strip_label || "a value per column"}`));
  wrap.append(legend(scale, panel.range ? "value (fixed scale)" : "value"),
    el("div", { class: "canvas-box" }, canvas, tip));
  return wrap;
}

// bertviz's line view: the rows' tokens (queries) on the left, the columns' (keys) on the right, a line between
// each pair whose opacity is its weight; hover or focus a token to see only its lines
function lines(panel) {
  const rowH = 20, left = 150, right = 450, width = 600;
  const height = Math.max(panel.rows.length, panel.cols.length) * rowH + 10;
  const high = finiteRange(panel.values.flat())[1] || 1;
  const drawing = svg("svg", { class: "lines", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${panel.title}: lines from each of ${panel.rows.length} rows to the ${panel.cols.length} columns` });
  const links = svg("g", { class: "links" });
  const pairs = [];
  panel.values.forEach((row, q) => row.forEach((w, k) => {
    if (w != null && w >= 0.01 * high) pairs.push([w, q, k]);                  // lines under 1% of the top: none
  }));
  pairs.sort((a, b) => b[0] - a[0]);
  for (const [w, q, k] of pairs.slice(0, 5000)) {
    links.append(svg("line", { x1: left, y1: q * rowH + 15, x2: right, y2: k * rowH + 15, "data-q": q, "data-k": k,
      "stroke-opacity": (w / high).toFixed(3) }));
  }
  drawing.append(links);
  const focus = (side, index) => {
    drawing.classList.add("focus");
    for (const line of links.children) line.classList.toggle("on", Number(line.dataset[side]) === index);
  };
  const blur = () => drawing.classList.remove("focus");
  const words = (labels, x, anchor, side) => labels.forEach((label, i) => {
    const word = svg("text", { x, y: i * rowH + 19, "text-anchor": anchor, class: `word ${side}`, tabindex: "0",
      "data-index": i }, shownToken(label));
    word.addEventListener("mouseenter", () => focus(side, i));
    word.addEventListener("focus", () => focus(side, i));
    word.addEventListener("mouseleave", blur);
    word.addEventListener("blur", blur);
    drawing.append(word);
  });
  words(panel.rows, left - 8, "end", "q");
  words(panel.cols, right + 8, "start", "k");
  const wrap = el("div", { class: "lines-box" }, drawing);
  if (pairs.length > 5000) wrap.append(el("p", { class: "muted" }, `the 5000 heaviest of ${pairs.length} lines`));
  return wrap;
}

// ---- tree: the search left to right by step, its finished hypotheses ranked; click one for its path ----

const STATUSES = ["kept", "ended", "dropped", "late"];

function drawTree(view, box) {
  const nodes = new Map(view.nodes.map((n) => [n.id, { ...n, children: [] }]));
  const roots = [];
  for (const node of nodes.values()) {
    const parent = node.parent == null ? null : nodes.get(node.parent);
    if (parent) parent.children.push(node);
    else roots.push(node);
  }
  const start = { id: "start", token: "start", score: null, step: -1, status: "start", children: roots };
  const steps = [...nodes.values()].map((n) => n.step);
  const first = steps.length ? Math.min(...steps) : 0;
  // leaves get a slot each, top to bottom (children by score, best first); a parent sits among its children
  let slot = 0;
  const place = (node, depth) => {
    node.depth = depth;
    node.children.sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity));
    if (!node.children.length) node.slot = slot++;
    else {
      for (const child of node.children) place(child, child.step - first + 1);
      node.slot = (node.children[0].slot + node.children[node.children.length - 1].slot) / 2;
    }
  };
  place(start, 0);
  const colW = 120, rowH = 24, nodeW = 104, nodeH = 18;
  const depth = Math.max(0, ...[...nodes.values()].map((n) => n.depth));
  const width = (depth + 1) * colW + 20, height = Math.max(1, slot) * rowH + 10;
  const x = (n) => 10 + n.depth * colW, y = (n) => 5 + n.slot * rowH;
  const drawing = svg("svg", { class: "tree", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${view.title}: ${nodes.size} candidates over ${depth} steps, ${view.finished.length} finished` });
  const edges = svg("g", { class: "edges" }), marks = svg("g", { class: "nodes" });
  const shapes = new Map();
  const drawNode = (node) => {
    const g = svg("g", { class: `node ${node.status}`, "data-id": String(node.id),
      transform: `translate(${x(node)},${y(node)})` },
    svg("title", {}, `${node.token} · ${view.label || "score"} ${fixed(node.score)} · step ${node.step} · ` +
      node.status),
    svg("rect", { width: nodeW, height: nodeH, rx: 4 }),
    svg("text", { x: 5, y: 13 }, `${shownToken(node.token).slice(0, 10)} ` +
      (node.score == null ? "" : fixed(node.score, 2))));
    marks.append(g);
    shapes.set(node.id, g);
    for (const child of node.children) {
      const x1 = x(node) + nodeW, y1 = y(node) + nodeH / 2, x2 = x(child), y2 = y(child) + nodeH / 2;
      const edge = svg("path", { class: `edge ${child.status}`, "data-child": String(child.id),
        d: `M${x1},${y1} C${(x1 + x2) / 2},${y1} ${(x1 + x2) / 2},${y2} ${x2},${y2}` });
      edges.append(edge);
      drawNode(child);
    }
  };
  drawNode(start);
  drawing.append(edges, marks);
  const key = el("ul", { class: "tree-key", "aria-label": "node styles" },
    ...STATUSES.map((s) => el("li", { class: s }, el("span", { class: "swatch" }), s)));
  const ranked = [...view.finished].sort((a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity) ||
    (b.normalized ?? -Infinity) - (a.normalized ?? -Infinity));
  const list = el("ol", { class: "finished", "aria-label": "finished hypotheses, best first" });
  for (const hypothesis of ranked) {
    const button = el("button", { type: "button", class: "hypothesis", "aria-pressed": "false",
      "data-node": String(hypothesis.node) },
    el("span", { class: "rank" }, `#${hypothesis.rank ?? list.children.length + 1}`),
    el("span", { class: "text" }, hypothesis.text ?? (hypothesis.tokens || []).join(" ")),
    hypothesis.text ?? (hypothesis.tokens || []).join(" ") ? "" :
      el("span", { class: "muted" }, "(nothing: it ended at once)"),
    el("span", { class: "score" }, `normalized ${fixed(hypothesis.normalized)} · score ${fixed(hypothesis.score)}`));
    button.addEventListener("click", () => {
      for (const b of list.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b === button));
      for (const on of drawing.querySelectorAll(".on-path")) on.classList.remove("on-path");
      let node = nodes.get(hypothesis.node);
      while (node) {
        shapes.get(node.id).classList.add("on-path");
        const edge = edges.querySelector(`[data-child="${node.id}"]`);
        if (edge) edge.classList.add("on-path");
        node = node.parent == null ? null : nodes.get(node.parent);
      }
      shapes.get("start").classList.add("on-path");
      const target = shapes.get(hypothesis.node);
      if (target && target.scrollIntoView) target.scrollIntoView({ block: "nearest", inline: "nearest" });
    });
    list.append(el("li", {}, button));
  }
  box.append(key, el("div", { class: "tree-box" }, drawing), el("h3", {}, "Finished, best first"));
  if (view.label) box.append(el("p", { class: "muted tree-label" }, view.label));
  box.append(list);
}

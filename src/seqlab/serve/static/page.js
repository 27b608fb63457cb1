// seqlab serve: the page at /. It asks this server's JSON API (/v1/...) and draws each task's answer:
// generated text as it streams, log-probabilities, tags and entity spans, class bars, and a translation's
// attention heat map. Plain JavaScript, no network beyond this server.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { models: {}, key: "" };

const PLACEHOLDERS = {
  generate: "ROMEO:",
  score: "To be, or not to be",
  tag: "Peter Blackburn visited New York .",
  classify: "a warm and funny film",
  translate: "der hund sieht .",
  summarize: "a long text to summarise",
};
const TEXT_LABELS = { generate: "Prompt", score: "Text to score", tag: "Sentence (tokens split at spaces)",
  classify: "Text", translate: "Source sentence", summarize: "Document" };
const ENTITY_HUES = { PER: 12, LOC: 140, ORG: 220, MISC: 285 };

function hue(type) {
  if (type in ENTITY_HUES) return ENTITY_HUES[type];
  let h = 0;
  for (const c of type) h = (h * 31 + c.charCodeAt(0)) % 360;
  return h;
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "style") for (const [name, value] of Object.entries(v)) node.style.setProperty(name, value);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  if (state.key) h.Authorization = `Bearer ${state.key}`;
  return h;
}

class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) message = body.error.message || body.error;      // OpenAI's shape on /v1/models
  } catch (_) { /* not JSON: keep the status line */ }
  return new ApiError(message, response.status);
}

async function post(path, body) {
  const response = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
  if (!response.ok) throw await failure(response);
  return response.json();
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

// ---- models ----

async function loadModels() {
  const response = await fetch("v1/models", { headers: headers() });
  if (response.status === 401) {
    $("key-form").hidden = false;
    throw await failure(response);
  }
  if (!response.ok) throw await failure(response);
  const { data } = await response.json();                          // OpenAI's list: {"object": "list", "data": [...]}
  const select = $("model");
  select.replaceChildren();
  state.models = {};
  for (const m of data) {
    state.models[m.id] = m;
    select.append(el("option", { value: m.id }, `${m.id} (${m.task})`));
  }
  selectModel();
}

function selectModel() {
  const model = state.models[$("model").value];
  if (!model) return;
  const action = $("action");
  action.replaceChildren();
  for (const endpoint of model.endpoints) {
    const name = endpoint.split("/").pop();
    if (name in TEXT_LABELS) action.append(el("option", { value: name }, name));  // the ones this page draws
  }
  const figures = Object.entries(model.metrics.test || model.metrics.valid || {})
    .filter(([, v]) => typeof v === "number" && !Number.isInteger(v)).slice(0, 3)     // figures, not counts
    .map(([k, v]) => `${k} ${v.toFixed(3)}`);
  $("model-info").textContent = `task ${model.task} · ${model.arch || "model"} · ` +
    `${model.parameters.toLocaleString("en")} parameters` + (figures.length ? ` · ${figures.join(", ")}` : "");
  $("model-info").title = model.summary || "";                    // the run in one sentence, on hover
  selectAction();
}

function selectAction() {
  const action = $("action").value;
  $("sampling").hidden = action !== "generate";
  $("decoding").hidden = !["translate", "summarize"].includes(action);
  $("text-label").textContent = TEXT_LABELS[action] || "Text";
  $("text").placeholder = PLACEHOLDERS[action] || "";
}

// ---- requests ----

function number(id) {
  const value = $(id).value.trim();
  return value === "" ? null : Number(value);
}

function showOnly(id) {
  for (const part of ["generate-output", "score-output", "tag-output", "classify-output", "decode-output"]) {
    $(part).hidden = part !== id;
  }
  $("output").hidden = false;
}

async function run(event) {
  event.preventDefault();
  showError("");
  const model = $("model").value;
  const action = $("action").value;
  const text = $("text").value;
  $("run").disabled = true;
  $("busy").textContent = "working…";
  try {
    if (action === "generate") await generate(model, text);
    else if (action === "score") drawScores((await post("v1/score", { model, text })).results[0]);
    else if (action === "tag") drawTags((await post("v1/tag", { model, text })).results[0]);
    else if (action === "classify") drawClasses((await post("v1/classify", { model, text })).results[0]);
    else {
      const beam = number("beam") ?? 1;
      const answer = await post(`v1/${action}`, { model, text, beam, attention: true });
      drawDecoded(answer.results[0], beam, action);
    }
  } catch (error) {
    showError(error.message);
  } finally {
    $("run").disabled = false;
    $("busy").textContent = "";
  }
}

// Generation streams as server-sent events over a POST, so it is read with fetch and a ReadableStream
// (EventSource only does GET): `data: {"text": ...}` events, the last with its "finish_reason", then `data: [DONE]`.
async function generate(model, prompt) {
  const body = { model, prompt, stream: true, max_tokens: number("max-tokens") ?? 60,
    temperature: number("temperature") ?? 1, top_k: number("top-k") ?? 0 };
  const seed = number("seed");
  if (seed !== null) body.seed = seed;
  const response = await fetch("v1/generate", { method: "POST", headers: headers(), body: JSON.stringify(body) });
  if (!response.ok) throw await failure(response);
  showOnly("generate-output");
  $("prompt-echo").textContent = prompt;
  const out = $("continuation");
  out.textContent = "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        out.textContent += JSON.parse(data).text;
      }
    }
  }
}

function drawScores(result) {
  showOnly("score-output");
  $("perplexity").textContent = result.perplexity.toFixed(2);
  $("bits").textContent = result.bits_per_char == null ? "" : `(${result.bits_per_char.toFixed(3)} bits per character)`;
  const body = $("scores").tBodies[0];
  body.replaceChildren();
  const worst = Math.max(1e-9, ...result.tokens.map((t) => -t.logprob));
  for (const { token, logprob } of result.tokens) {
    body.append(el("tr", { class: "token-score" },
      el("td", { class: "token-text" }, el("code", {}, JSON.stringify(token).slice(1, -1))),
      el("td", { class: "logprob" }, logprob.toFixed(3)),
      el("td", {}, el("span", { class: "spark", style: { width: `${(6 * -logprob) / worst}rem` } }))));
  }
}

function tokenNode(token, tag, probability) {
  return el("span", { class: "token", title: `${tag} (p = ${probability.toFixed(3)})` },
    el("span", { class: "word" }, token), el("span", { class: "tag" }, tag));
}

function drawTags(result) {
  showOnly("tag-output");
  const line = $("tags");
  line.replaceChildren();
  const entities = result.entities || [];
  const types = new Set();
  let i = 0;
  while (i < result.tokens.length) {
    const entity = entities.find((e) => e.start === i && e.end > i);
    if (entity) {
      types.add(entity.type);
      const mark = el("mark", { class: "entity", "data-type": entity.type, style: { "--hue": hue(entity.type) },
        title: `${entity.type}: ${entity.text}` });
      for (let j = entity.start; j < entity.end; j++) {
        mark.append(tokenNode(result.tokens[j], result.tags[j], result.probabilities[j]));
      }
      mark.append(el("span", { class: "type" }, entity.type));
      line.append(mark, " ");
      i = entity.end;
    } else {
      line.append(tokenNode(result.tokens[i], result.tags[i], result.probabilities[i]), " ");
      i += 1;
    }
  }
  $("legend").replaceChildren(...[...types].sort().map((t) => el("li", { style: { "--hue": hue(t) } }, t)));
}

function drawClasses(result) {
  showOnly("classify-output");
  // the predicted label first, then the others from the most to the least likely
  const rows = Object.entries(result.probabilities)
    .sort(([a, p], [b, q]) => (b === result.label) - (a === result.label) || q - p);
  $("bars").replaceChildren(...rows.map(([label, p]) => {
    const percent = `${(100 * p).toFixed(2)}%`;
    return el("li", { class: label === result.label ? "bar predicted" : "bar", "data-label": label },
      el("span", { class: "bar-label" }, label),
      el("span", { class: "bar-track", role: "img", "aria-label": `${label}: ${percent}` },
        el("span", { class: "bar-fill", style: { width: percent, display: "block" } })),
      el("span", { class: "bar-value" }, percent));
  }));
}

function drawDecoded(result, beam, action) {
  showOnly("decode-output");
  $("decode-title").textContent = action === "summarize" ? "Summary" : "Translation";
  $("decoded").textContent = result.text;
  $("beam-used").textContent = String(beam);
  $("decode-score").textContent = result.score.toFixed(3);
  const table = $("heatmap");
  table.replaceChildren();
  const source = result.source_tokens || [];
  table.append(el("thead", {}, el("tr", {}, el("th", {}, ""),
    ...source.map((t) => el("th", { scope: "col" }, t)))));
  const body = el("tbody");
  (result.attention || []).forEach((weights, row) => {
    const token = row < result.tokens.length ? result.tokens[row] : "</s>";
    body.append(el("tr", {}, el("th", { scope: "row" }, token), ...weights.map((w, col) =>
      el("td", { class: "cell", "data-weight": w.toFixed(4), title: `${token} → ${source[col]}: ${w.toFixed(3)}`,
        style: { background: `rgba(47, 95, 208, ${Math.min(1, Math.max(0, w)).toFixed(3)})` } }))));
  });
  table.append(body);
}

// ---- start ----

document.addEventListener("DOMContentLoaded", () => {
  $("model").addEventListener("change", selectModel);
  $("action").addEventListener("change", selectAction);
  $("request-form").addEventListener("submit", run);
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.key = $("api-key").value.trim();
    showError("");
    loadModels().then(() => { $("key-form").hidden = true; }).catch((error) => showError(error.message));
  });
  loadModels().catch((error) => showError(error.message));
});

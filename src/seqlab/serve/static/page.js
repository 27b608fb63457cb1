// seqlab serve: the page at /. It asks this server's JSON API (/v1/...) and draws each answer with the view its
// endpoint's form names: text as it streams, log-probabilities, tags and entity spans, class bars, an output and
// its attention heat map. The forms are the families' (GET /v1/ui, `seqlab.serve.ui`): this page names no
// endpoint. Plain JavaScript, no network beyond this server.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { models: {}, forms: {}, built: {}, key: "" };

function hue(type, hues = {}) {
  if (type in hues) return hues[type];
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
  const forms = await fetch("v1/ui", { headers: headers() });      // each endpoint's form, as its family declares it
  if (!forms.ok) throw await failure(forms);
  state.forms = (await forms.json()).forms;
  state.built = {};
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
    const name = endpoint.replace(/^\/v1\//, "");
    if (name in state.forms) action.append(el("option", { value: name }, name));  // the ones with a form
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
  const form = state.forms[$("action").value];
  if (!form) return;
  $("text-label").textContent = form.label || "Text";
  $("text").placeholder = form.placeholder || "";
  // each endpoint's fields built once, so that what was typed stays when another endpoint is shown and back
  state.built[form.endpoint] ??= form.groups.map(groupNode);
  $("fields").replaceChildren(...state.built[form.endpoint]);
}

// ---- forms ----

const fieldId = (name) => name.replaceAll("_", "-");

function groupNode(group) {
  return el("fieldset", { id: group.id }, el("legend", {}, group.legend),
    el("div", { class: "row wrap" }, ...group.fields.map(fieldNode)));
}

function fieldNode(field) {
  const id = fieldId(field.name);
  const props = { id, type: "number" };
  for (const bound of ["min", "max", "step", "value"]) if (field[bound] != null) props[bound] = field[bound];
  if (field.type === "number" && field.step == null) props.step = "any";
  if (field.placeholder) props.placeholder = field.placeholder;
  return el("div", { class: "field" }, el("label", { for: id }, field.label), el("input", props));
}

function number(id) {
  const value = $(id).value.trim();
  return value === "" ? null : Number(value);
}

// The request's JSON body: the model, the text under the form's key, what the form always sends, and each field's
// number (an empty field sends its `blank`, or nothing when that is null).
function requestBody(form, model, text) {
  const body = { model, [form.text]: text, ...form.body };
  for (const group of form.groups) {
    for (const field of group.fields) {
      const value = number(fieldId(field.name)) ?? field.blank;
      if (value != null) body[field.name] = value;
    }
  }
  return body;
}

// ---- requests ----

function showOnly(form) {
  for (const view of Object.keys(VIEWS)) $(`${view}-output`).hidden = view !== form.view;
  $(`${form.view}-output`).querySelector("h2").textContent = form.title;
  $("output").hidden = false;
}

async function run(event) {
  event.preventDefault();
  showError("");
  const form = state.forms[$("action").value];
  const body = requestBody(form, $("model").value, $("text").value);
  $("run").disabled = true;
  $("busy").textContent = "working…";
  try {
    await VIEWS[form.view](form, body);
  } catch (error) {
    showError(error.message);
  } finally {
    $("run").disabled = false;
    $("busy").textContent = "";
  }
}

// ---- views: each draws an answer (`seqlab.serve.ui.VIEWS` says what each reads) ----

const answer = async (form, body) => (await post(`v1/${form.endpoint}`, body)).results[0];

const VIEWS = {
  stream: streamText,
  "token-scores": async (form, body) => drawScores(form, await answer(form, body)),
  spans: async (form, body) => drawTags(form, await answer(form, body)),
  bars: async (form, body) => drawClasses(form, await answer(form, body)),
  decoded: async (form, body) => drawDecoded(form, await answer(form, body), body),
};

// Text streams as server-sent events over a POST, so it is read with fetch and a ReadableStream (EventSource only
// does GET): `data: {"text": ...}` events, the last with its "finish_reason", then `data: [DONE]`.
async function streamText(form, body) {
  const response = await fetch(`v1/${form.endpoint}`, { method: "POST", headers: headers(),
    body: JSON.stringify(body) });
  if (!response.ok) throw await failure(response);
  showOnly(form);
  $("prompt-echo").textContent = body[form.text];
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

function drawScores(form, result) {
  showOnly(form);
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

function drawTags(form, result) {
  showOnly(form);
  const hues = (form.style || {}).hues || {};
  const line = $("tags");
  line.replaceChildren();
  const entities = result.entities || [];
  const types = new Set();
  let i = 0;
  while (i < result.tokens.length) {
    const entity = entities.find((e) => e.start === i && e.end > i);
    if (entity) {
      types.add(entity.type);
      const mark = el("mark", { class: "entity", "data-type": entity.type, style: { "--hue": hue(entity.type, hues) },
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
  $("legend").replaceChildren(...[...types].sort().map((t) => el("li", { style: { "--hue": hue(t, hues) } }, t)));
}

function drawClasses(form, result) {
  showOnly(form);
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

function drawDecoded(form, result, sent) {
  showOnly(form);
  $("decoded").textContent = result.text;
  $("beam-used").textContent = String(sent.beam ?? 1);
  $("decode-score").textContent = result.score.toFixed(3);
  const table = $("heatmap");
  table.replaceChildren();
  const source = result.source_tokens || [];
  table.append(el("thead", {}, el("tr", {}, el("th", {}, ""),
    ...source.map((t) => el("th", { scope: "col" }, t)))));
  const rows = el("tbody");
  (result.attention || []).forEach((weights, row) => {
    const token = row < result.tokens.length ? result.tokens[row] : "</s>";
    rows.append(el("tr", {}, el("th", { scope: "row" }, token), ...weights.map((w, col) =>
      el("td", { class: "cell", "data-weight": w.toFixed(4), title: `${token} → ${source[col]}: ${w.toFixed(3)}`,
        style: { background: `rgba(47, 95, 208, ${Math.min(1, Math.max(0, w)).toFixed(3)})` } }))));
  });
  table.append(rows);
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
    refreshModels().then((loaded) => { if (loaded) $("key-form").hidden = true; });
  });
  refreshModels();
});

// The models (re)loaded, then "seqlab:models" told to the Explore tab (static/explore.js), with the error if any.
async function refreshModels() {
  let error = null;
  try {
    await loadModels();
  } catch (problem) {
    error = problem;
    showError(problem.message);
  }
  document.dispatchEvent(new CustomEvent("seqlab:models", { detail: { error } }));
  return error === null;
}

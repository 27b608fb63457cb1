// seqlab serve: the page's Explore tab (/#explore). It asks GET /v1/explain/{model} what a model can show (its
// views, the options and their bounds, texts of its dev set to try) and POST /v1/explain for an explanation, and
// draws each view by its kind (`seqlab.contract.views`: tokens, matrix, bars, tree; static/explore-kinds.js's
// KINDS). It names no family and no view: what a model shows is its family's declaration. Plain JavaScript, no
// network beyond this server; it borrows page.js's helpers ($, el, post, failure, headers, state: the API key).
"use strict";

const explore = { info: {}, ready: false, loading: null, optionsBuilt: false, shown: null };

function exploreError(message) {
  $("explore-error").textContent = message;
  $("explore-error").hidden = !message;
}

// ---- the tab ----

function showTab() {
  const on = location.hash === "#explore";
  $("ask-tab").hidden = on;
  $("explore-tab").hidden = !on;
  for (const [id, current] of [["tab-ask", !on], ["tab-explore", on]]) {
    if (current) $(id).setAttribute("aria-current", "page");
    else $(id).removeAttribute("aria-current");
  }
  if (on && explore.ready) exploreModels().catch((error) => exploreError(error.message));
}

// page.js (re)loaded the models (GET /v1/models; with the key, if any): which of them explain is asked again
function modelsLoaded(event) {
  explore.info = {};
  explore.loading = null;
  explore.ready = !event.detail.error;
  if (event.detail.error) exploreError(event.detail.error.message);
  else if (!$("explore-tab").hidden) exploreModels().catch((error) => exploreError(error.message));
}

// The models whose family explains: GET /v1/explain/{model} of each; one that answers 400 has no views.
function exploreModels() {
  explore.loading ??= (async () => {
    const ids = Object.keys(state.models);
    const answers = await Promise.all(ids.map(async (id) => {
      const response = await fetch(`v1/explain/${encodeURIComponent(id)}`, { headers: headers() });
      if (response.status === 400) return null;
      if (!response.ok) throw await failure(response);
      return response.json();
    }));
    const select = $("explore-model");
    const before = select.value;
    select.replaceChildren();
    ids.forEach((id, i) => {
      if (!answers[i]) return;
      explore.info[id] = answers[i];
      select.append(el("option", { value: id }, `${id} (${state.models[id].task})`));
    });
    if (before in explore.info) select.value = before;
    exploreError(select.options.length ? "" : "none of the models served here has views to explore");
    selectExploreModel();
  })().catch((error) => { explore.loading = null; throw error; });
  return explore.loading;
}

function selectExploreModel() {
  const info = explore.info[$("explore-model").value];
  if (!info || info === explore.shown) return;                   // the same model again: the form as it was
  explore.shown = info;
  $("explore-info").textContent = `${info.family} · ${info.arch} · ${info.runtime}` +
    ` · at most ${info.limits.max_chars} characters, ${info.limits.max_tokens} tokens read`;
  $("explore-text").maxLength = info.limits.max_chars;
  const examples = $("explore-example");
  examples.replaceChildren(el("option", { value: "" }, info.examples.length ? "choose a text of the dev set…"
    : "(no dev set at hand)"));
  info.examples.forEach((text, i) => examples.append(el("option", { value: String(i) },
    text.length > 90 ? `${text.slice(0, 89)}…` : text)));
  examples.disabled = !info.examples.length;
  $("explore-text").placeholder = info.examples[0] || "";
  const list = $("explore-view-list");
  list.replaceChildren(...info.views.map((spec) => {
    const id = `explore-view-${spec.name}`;
    return el("label", { class: "check", for: id, title: spec.about },
      el("input", { type: "checkbox", id, value: spec.name, checked: "" }), ` ${spec.title}`);
  }), ...info.not_on_export.map((spec) => {
    const id = `explore-view-${spec.name}`;
    return el("label", { class: "check off", for: id, title: spec.why },
      el("input", { type: "checkbox", id, value: spec.name, disabled: "" }), ` ${spec.title} `,
      el("span", { class: "why" }, `(${spec.why})`));
  }));
  if (!explore.optionsBuilt) buildOptions(info.options);
}

const optionId = (name) => `explore-${name.replaceAll("_", "-")}`;
const optionLabel = (name) => name.charAt(0).toUpperCase() + name.slice(1).replaceAll("_", " ");

// the options' inputs, once (every model takes the same options): bounds and defaults as the server gives them
function buildOptions(options) {
  $("explore-option-list").replaceChildren(...Object.entries(options).map(([name, option]) => {
    const id = optionId(name);
    let input;
    if (option.choices) {
      input = el("select", { id, "data-option": name },
        ...option.choices.map((choice) => el("option", { value: choice }, choice)));
      input.value = option.default;
    } else {
      input = el("input", { id, type: "number", "data-option": name, min: option.min, max: option.max,
        step: option.integer ? 1 : "any", value: option.default });
    }
    return el("div", { class: "field small" }, el("label", { for: id }, optionLabel(name)), input);
  }));
  explore.optionsBuilt = true;
}

function exploreBody() {
  const options = {};
  for (const input of $("explore-option-list").querySelectorAll("[data-option]")) {
    if (input.validity.badInput) throw new Error(`${optionLabel(input.dataset.option)} is not a number`);
    const value = input.value.trim();
    if (value === "") continue;
    options[input.dataset.option] = input.tagName === "SELECT" ? value : Number(value);
  }
  const views = [...$("explore-view-list").querySelectorAll("input:checked:not(:disabled)")].map((i) => i.value);
  return { model: $("explore-model").value, text: $("explore-text").value, views, options };
}

async function runExplore(event) {
  event.preventDefault();
  exploreError("");
  let body;
  try {
    body = exploreBody();
  } catch (error) {
    return exploreError(error.message);
  }
  if (!body.model) return exploreError("no model to explore");
  if (!body.views.length) return exploreError("choose at least one view");
  $("explore-run").disabled = true;
  $("explore-busy").textContent = "working…";
  try {
    drawExplanation(await post("v1/explain", body));
  } catch (error) {
    exploreError(error.message);
  } finally {
    $("explore-run").disabled = false;
    $("explore-busy").textContent = "";
  }
}

// ---- an explanation: each view by its kind ----

function drawExplanation(found) {
  const cut = found.truncated ? ` (the text was cut: its first ${found.tokens.length} were read)` : "";
  $("explore-meta").textContent = `${found.model} · ${found.arch} · ${found.tokens.length} tokens read${cut} · ` +
    `computed in ${found.seconds.toFixed(3)} s by the server`;
  $("explore-output").hidden = false;                              // shown first: the heat maps fit its width
  $("explore-results").replaceChildren(...found.views.map((view) => {
    const box = el("article", { class: `view kind-${view.kind}`, id: `view-${view.name}`, "data-view": view.name,
      "data-kind": view.kind });
    box.append(el("h2", {}, view.title));
    if (view.about) box.append(el("p", { class: "about muted" }, view.about));
    if (view.note) box.append(el("p", { class: "note" }, view.note));
    const draw = KINDS[view.kind];
    const started = performance.now();
    if (draw) draw(view, box);
    else box.append(el("p", { class: "muted" }, `(this page does not draw views of kind ${view.kind})`));
    box.dataset.drawMs = (performance.now() - started).toFixed(1);     // read by benchmarks/explore_speed.py
    return box;
  }));
}

// ---- start ----

document.addEventListener("seqlab:models", modelsLoaded);
document.addEventListener("DOMContentLoaded", () => {
  $("explore-model").addEventListener("change", selectExploreModel);
  $("explore-example").addEventListener("change", () => {
    const info = explore.info[$("explore-model").value];
    const chosen = $("explore-example").value;
    if (info && chosen !== "") $("explore-text").value = info.examples[Number(chosen)];
  });
  $("explore-form").addEventListener("submit", runExplore);
  window.addEventListener("hashchange", showTab);
  showTab();
});

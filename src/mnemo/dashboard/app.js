// The mnemo dashboard: a page over the REST API (/api/v1), signed in with an API key.
// Every value from the store is put in the page as text (textContent), never as HTML.
"use strict";

const API = "/api/v1";
const view = document.getElementById("view");
const status = document.getElementById("status");

function key() { return sessionStorage.getItem("mnemo-key"); }

async function api(method, path, body, withKey = key()) {
  const headers = { "X-API-Key": withKey };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = await response.json().catch(() => ({}));
  if (response.status === 401) { signOut("That key was not accepted."); throw new Error("unauthorized"); }
  if (!response.ok) throw new Error((answer.error && answer.error.message) || `HTTP ${response.status}`);
  return answer;
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function say(text, isError = false) { status.textContent = text; status.className = isError ? "error" : ""; }

// A stored time in the reader's locale and time zone; the exact ISO 8601 time is its tooltip.
function when(iso) {
  if (!iso) return "never";
  return el("time", { datetime: iso, title: iso }, new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }));
}

function signOut(message) {
  sessionStorage.removeItem("mnemo-key");
  location.hash = "#/signin";
  if (message) say(message, true);
}

// -- views -----------------------------------------------------------------------------------
function signIn() {
  const input = el("input", { id: "key", type: "password", autocomplete: "off", size: "60" });
  const form = el("form", { id: "signin-form", class: "inline", onsubmit: async (event) => {
    event.preventDefault();
    const candidate = input.value.trim();
    try {
      await api("GET", "/memories?limit=1", undefined, candidate);
      sessionStorage.setItem("mnemo-key", candidate);  // kept only once the server accepted it
      say("Signed in.");
      if (location.hash === "#/memories") await route(); else location.hash = "#/memories";
    } catch (error) { if (error.message !== "unauthorized") say(error.message, true); }
  } }, el("label", {}, "API key", input), el("button", { type: "submit", id: "signin" }, "Sign in"));
  view.replaceChildren(el("h2", {}, "Sign in"), form);
}

function memoryRows(memories, withScore) {
  const head = el("tr", {}, ...(withScore ? ["score"] : []).concat(["content", "category", "tags", "importance", "status", "updated"]).map((t) => el("th", {}, t)));
  const rows = memories.map((m) => el("tr", { class: "memory", "data-id": m.memory_id },
    ...(withScore ? [el("td", { class: "score" }, m.scores.combined.toFixed(3))] : []),
    el("td", {}, el("a", { href: `#/memory/${encodeURIComponent(m.memory_id)}` }, m.content || "(no content)")),
    el("td", {}, m.category), el("td", {}, (m.tags || []).join(", ")), el("td", {}, m.importance.toFixed(2)),
    el("td", {}, m.status || "active"), el("td", {}, when(m.updated_at || m.created_at))));
  return el("table", { id: "memories" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

async function memories(params) {
  const query = new URLSearchParams({ limit: "50", ...params });
  const category = el("select", { id: "filter-category" }, el("option", { value: "" }, "any category"),
    ...["fact", "preference", "instruction", "event", "relationship", "skill", "goal", "custom"].map((c) => el("option", { value: c }, c)));
  const status_ = el("select", { id: "filter-status" }, ...["active", "archived", "deleted"].map((s) => el("option", { value: s }, s)));
  const tag = el("input", { id: "filter-tag", placeholder: "tag" });
  category.value = params.category || ""; status_.value = params.status || "active"; tag.value = params.tag || "";
  const form = el("form", { class: "inline", onsubmit: (event) => {
    event.preventDefault();
    const chosen = { status: status_.value };
    if (category.value) chosen.category = category.value;
    if (tag.value.trim()) chosen.tag = tag.value.trim();
    location.hash = "#/memories?" + new URLSearchParams(chosen);
  } }, el("label", {}, "Category", category), el("label", {}, "Status", status_), el("label", {}, "Tag", tag),
    el("button", { type: "submit", id: "apply-filters" }, "Filter"));
  const answer = await api("GET", "/memories?" + query);
  view.replaceChildren(el("h2", {}, `Memories (${answer.total_count})`), form, memoryRows(answer.memories, false));
}

async function search(params) {
  const input = el("input", { id: "query", size: "50", placeholder: "what do you want to find?" });
  input.value = params.q || "";
  const form = el("form", { class: "inline", onsubmit: (event) => {
    event.preventDefault();
    location.hash = "#/search?" + new URLSearchParams({ q: input.value });
  } }, el("label", {}, "Search by meaning", input), el("button", { type: "submit", id: "run-search" }, "Search"));
  const parts = [el("h2", {}, "Search"), form];
  if (params.q) {
    const answer = await api("POST", "/memories/recall", { query: params.q, limit: 20 });
    parts.push(el("p", { id: "found" }, `${answer.total_results} found; scores are the combined relevance (0-1).`), memoryRows(answer.memories, true));
  }
  view.replaceChildren(...parts);
}

async function memory(id) {
  const answer = await api("GET", `/memories/${encodeURIComponent(id)}`);
  const m = answer.memory;
  const content = el("textarea", { id: "content" });
  content.value = m.content || "";
  const act = (label, idName, run) => el("button", { type: "button", id: idName, onclick: async () => {
    try { await run(); say(`${label}: done.`); await memory(id); } catch (error) { say(error.message, true); }
  } }, label);
  const buttons = [act("Save", "save", () => api("PATCH", `/memories/${encodeURIComponent(id)}`, { updates: { content: content.value }, reason: "edited in the dashboard" }))];
  if (m.status === "active") buttons.push(act("Archive", "archive", () => api("POST", `/memories/${encodeURIComponent(id)}/archive`, {})),
    act("Forget", "forget", () => api("DELETE", `/memories/${encodeURIComponent(id)}?reason=user_request`)));
  if (m.status === "archived") buttons.push(act("Restore", "restore", () => api("POST", `/memories/${encodeURIComponent(id)}/restore`, {})));
  const facts = el("dl", { id: "facts" }, ...[["id", m.memory_id], ["status", m.status], ["category", m.category], ["tags", (m.tags || []).join(", ")],
    ["importance", m.importance], ["access level", m.access_level], ["created", when(m.created_at)], ["updated", when(m.updated_at)],
    ["accessed", el("span", {}, `${m.access_count} times, last `, when(m.last_accessed))], ["version", m.version]].flatMap(([t, d]) => [el("dt", {}, t), el("dd", {}, d)]));
  const versions = el("table", { id: "versions" }, el("thead", {}, el("tr", {}, ...["version", "action", "by", "at", "reason"].map((t) => el("th", {}, t)))),
    el("tbody", {}, ...answer.versions.map((v) => el("tr", {}, el("td", {}, v.version), el("td", {}, v.action), el("td", {}, v.actor), el("td", {}, when(v.at)), el("td", {}, v.reason || "")))));
  view.replaceChildren(el("h2", {}, "Memory"), facts, el("label", {}, "Content", content), el("div", { class: "actions" }, ...buttons),
    el("h3", {}, "Versions"), versions);
}

function barChart(title, idName, pairs) {
  const width = 320, row = 22, height = Math.max(1, pairs.length) * row;
  const top = Math.max(1, ...pairs.map(([, v]) => v));
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`); svg.setAttribute("width", width); svg.setAttribute("height", height);
  pairs.forEach(([label, value], i) => {
    const bar = document.createElementNS(svg.namespaceURI, "rect");
    bar.setAttribute("class", "bar"); bar.setAttribute("x", 110); bar.setAttribute("y", i * row + 3);
    bar.setAttribute("width", Math.max(1, (value / top) * (width - 160))); bar.setAttribute("height", row - 6);
    const name = document.createElementNS(svg.namespaceURI, "text");
    name.setAttribute("x", 0); name.setAttribute("y", i * row + 15); name.textContent = label;
    const count = document.createElementNS(svg.namespaceURI, "text");
    count.setAttribute("x", 115 + (value / top) * (width - 160)); count.setAttribute("y", i * row + 15); count.textContent = value;
    svg.append(bar, name, count);
  });
  return el("div", { class: "chart", id: idName }, el("h3", {}, title), svg);
}

async function stats() {
  const answer = await api("GET", "/stats?scope=user&include_trends=true&granularity=day");
  const s = answer.statistics;
  const trend = (answer.trends && answer.trends.memory_count || []).slice(-14).map((p) => [p.date.slice(5), p.value]);
  view.replaceChildren(el("h2", {}, "Statistics"),
    el("dl", { id: "totals" }, ...[["memories", s.count.total], ["active", s.count.active], ["archived", s.count.archived],
      ["deleted", s.count.deleted], ["health", s.health_score.overall]].flatMap(([t, d]) => [el("dt", {}, t), el("dd", {}, d)])),
    el("div", { class: "charts" },
      barChart("By category", "chart-categories", Object.entries(s.category_distribution)),
      barChart("By importance", "chart-importance", Object.entries(s.importance_distribution)),
      barChart("Stored per day (last 14 days)", "chart-trend", trend)));
}

// -- routing ---------------------------------------------------------------------------------
async function route() {
  const [path, query] = (location.hash.slice(1) || "/memories").split("?");
  const params = Object.fromEntries(new URLSearchParams(query || ""));
  document.getElementById("nav").hidden = !key();
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("current", path.startsWith(link.getAttribute("href").slice(1)));
  if (!key() || path === "/signin") return signIn();
  try {
    if (path.startsWith("/memory/")) await memory(decodeURIComponent(path.slice("/memory/".length)));
    else if (path === "/search") await search(params);
    else if (path === "/stats") await stats();
    else await memories(params);
  } catch (error) { if (error.message !== "unauthorized") say(error.message, true); }
}

document.getElementById("sign-out").addEventListener("click", () => signOut("Signed out."));
window.addEventListener("hashchange", route);
route();

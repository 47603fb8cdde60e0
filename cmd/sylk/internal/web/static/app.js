// Sylk's web view: state from the query API, kept current by the stream's
// server-sent events. Each event that changes what the page shows makes it
// read that state again, asking for at least that event's sequence (min_seq);
// nothing is polled.
"use strict";

const $ = (sel, el = document) => el.querySelector(sel);
const h = (tag, attrs = {}, ...kids) => {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const k of kids) el.append(k);
  return el;
};
const SVG = "http://www.w3.org/2000/svg";
const s = (tag, attrs = {}, ...kids) => {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const k of kids) el.append(k);
  return el;
};

async function call(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Sylk-Request": "1" },
    body: JSON.stringify(body || {}),
  });
  if (!r.ok) throw new Error((await r.text()).trim());
  return r.json();
}
// q asks the query API, seeing at least what the page has seen.
const q = (endpoint, req = {}) => call("/api/q/" + endpoint, { min_seq: seen, ...req });

let seen = 0; // the last stream sequence the live stream brought
let session = ""; // the session shown

// --- tabs
for (const b of document.querySelectorAll("nav button")) {
  b.addEventListener("click", () => {
    for (const o of document.querySelectorAll("nav button")) o.classList.toggle("on", o === b);
    for (const t of document.querySelectorAll(".tab")) t.classList.toggle("on", t.id === "tab-" + b.dataset.tab);
  });
}

// --- sessions
async function loadSessions() {
  const list = await q("session.list");
  const body = $("#sessions tbody");
  body.replaceChildren(...list.map((x) => h("tr", {
    class: "pick" + (x.id === session ? " sel" : ""), "data-session": x.id,
    onclick: () => { session = x.id; loadSessions(); loadSession(); followTimeline(); },
  }, h("td", {}, x.id), h("td", {}, x.name || ""), h("td", { class: "state" }, x.state + (x.paused ? " (paused)" : "")))));
}

async function loadSession() {
  if (!session) return;
  $("#session-title").textContent = "Session " + session;
  const [dags, pending] = await Promise.all([q("dag.list", { session }), q("pending.list", { session })]);
  $("#session-waiting").replaceChildren(...pending.map(planBox));
  const boxes = [];
  for (const d of dags) boxes.push(dagBox(await q("dag.get", { id: d.id, session })));
  $("#dags").replaceChildren(...boxes);
}

// dagBox draws a DAG: its layers left to right, a node's colour its state.
function dagBox(d) {
  const W = 150, H = 40, GX = 50, GY = 18;
  const pos = {};
  const layers = d.layers && d.layers.length ? d.layers : [d.nodes.map((n) => n.id)];
  layers.forEach((layer, i) => layer.forEach((id, j) => { pos[id] = { x: 10 + i * (W + GX), y: 10 + j * (H + GY) }; }));
  const width = 20 + layers.length * (W + GX), height = 20 + Math.max(...layers.map((l) => l.length)) * (H + GY);
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "data-dag": d.id },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" },
      s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#889" }))));
  for (const n of d.nodes) {
    for (const dep of n.depends_on || []) {
      const a = pos[dep], b = pos[n.id];
      if (!a || !b) continue;
      svg.append(s("path", { class: "edge", d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}` }));
    }
  }
  for (const n of d.nodes) {
    const p = pos[n.id];
    if (!p) continue;
    const title = s("title", {}, `${n.id}: ${n.state}${n.last_error ? " — " + n.last_error : ""}`);
    svg.append(s("g", { class: "node st-" + n.state, "data-node": n.id, "data-state": n.state, transform: `translate(${p.x},${p.y})`, onclick: () => showNode(d, n) },
      title, s("rect", { width: W, height: H }),
      s("text", { x: 8, y: 16 }, n.id.length > 20 ? n.id.slice(0, 19) + "…" : n.id),
      s("text", { x: 8, y: 32, "font-size": 11 }, `${n.agent || ""} ${n.tool || "prompt"} · ${n.state}`)));
  }
  const outcome = d.outcome ? ` — ${d.outcome.outcome}` : "";
  return h("div", { class: "dag" }, h("h3", {}, `${d.name || d.id} (${d.state}${outcome})`), svg);
}

// showNode shows a node's record: its state and result (with its
// evidence), each tool call's recorded result, its test results and, for a
// prompt node, its LLM exchanges (each request with its recorded response).
async function showNode(d, n) {
  const box = $("#node-detail");
  const at = session;
  box.replaceChildren(h("h3", {}, `Node ${n.id} of ${d.name || d.id}`), h("pre", { class: "node-json" }, JSON.stringify(n, null, 2)));
  if (n.result && n.result.evidence) box.append(h("h4", {}, "evidence"), h("pre", { class: "evidence" }, n.result.evidence));
  for (const c of n.calls || []) {
    try {
      const r = await q("call.tool", { id: c.id });
      box.append(h("h4", {}, `tool call ${c.id} (${c.tool || ""}, seq ${r.seq})`), h("pre", { class: "call" }, JSON.stringify(r.tool_result, null, 2)));
    } catch (e) {
      box.append(h("p", { class: "error" }, `${c.id}: ${e.message}`));
    }
  }
  let rec;
  try {
    rec = await call("/api/node", { session: at, dag: d.id, node: n.id });
  } catch (e) {
    box.append(h("p", { class: "error" }, e.message));
    return;
  }
  for (const t of rec.tests) {
    const counts = `${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`;
    box.append(h("div", { class: "tests", "data-seq": t.seq },
      h("h4", {}, `test results (seq ${t.seq}): ${counts}`),
      ...((t.failed_tests || []).length ? [h("p", {}, "failing: " + t.failed_tests.join(", "))] : []),
      h("pre", { class: "evidence" }, t.evidence || "")));
  }
  for (const x of rec.exchanges) {
    const req = x.request, resp = x.response;
    const msgs = (req.messages || []).map((m) => `[${m.role}] ${m.content || ""}`).join("\n\n");
    box.append(h("div", { class: "exchange", "data-call": req.call_id },
      h("h4", {}, `LLM call ${req.call_id} (${req.agent}, ${req.model}, seq ${x.seq})`),
      h("pre", { class: "llm-request" }, msgs),
      resp
        ? h("pre", { class: "llm-response" }, (resp.error ? "error: " + resp.error + "\n" : "") + (resp.content || "") +
          ((resp.tool_calls || []).length ? "\n" + JSON.stringify(resp.tool_calls, null, 2) : "") +
          `\n— ${resp.usage.total_tokens} tokens, ${resp.latency_ms} ms`)
        : h("p", { class: "none" }, "no response recorded yet")));
  }
}

// --- what waits on the user
const drafts = {}; // answers being typed, by textarea id
function planBox(p) {
  const ref = p.plan_id || p.request_id;
  const box = h("div", { class: "plan", "data-plan": ref, "data-state": p.state },
    h("p", {}, h("b", {}, `${p.kind} from ${p.asker}`), ` in session ${p.session}: `, p.question || ""));
  if (p.kind === "plan") {
    const act = (action) => async () => {
      try {
        const r = await call(`/api/plan/${action}`, { session: p.session, plan: ref });
        seen = Math.max(seen, r.seq);
        box.dataset.state = action === "approve" ? "approved" : "rejected";
        refresh();
      } catch (e) { box.append(h("p", { class: "error" }, e.message)); }
    };
    box.append(h("button", { class: "approve", onclick: act("approve") }, "Approve"), h("button", { class: "reject", onclick: act("reject") }, "Reject"));
  } else if (p.kind === "clarification") {
    // Answered as `sylk plan answer` does: the answer goes to the Architect.
    const id = "answer-" + p.session + "-" + ref;
    // The list is redrawn as events come: what is typed is kept across.
    const text = h("textarea", { id, rows: 2, name: "answer", oninput: () => { drafts[id] = text.value; } });
    text.value = drafts[id] || "";
    for (const o of p.options || []) text.placeholder = (text.placeholder ? text.placeholder + " / " : "") + o;
    const form = h("form", { class: "answer", onsubmit: async (e) => {
      e.preventDefault();
      try {
        const r = await call("/api/question/answer", { session: p.session, question: ref, answer: text.value });
        seen = Math.max(seen, r.seq);
        box.dataset.state = "answered";
        delete drafts[id];
        refresh();
      } catch (err) { box.append(h("p", { class: "error" }, err.message)); }
    } }, h("label", { for: id }, "Your answer"), text, h("button", { class: "answer" }, "Answer"));
    box.append(form);
  }
  return box;
}

async function loadWaiting() {
  const pending = await q("pending.list");
  $("#waiting-count").textContent = pending.length ? `(${pending.length})` : "";
  $("#waiting").replaceChildren(...(pending.length ? pending.map(planBox) : [h("p", { class: "none" }, "Nothing waits on you.")]));
}

// --- dead letters: listed as `sylk dlq ls` does; Resend does what `sylk dlq
// resend` does. The list is read again when a dead_letter event comes.
const resent = {}; // dead letter id → the sequence it was resent as, this page
async function loadDLQ() {
  const rows = await call("/api/dlq");
  $("#dlq-count").textContent = rows.length ? `(${rows.length})` : "";
  $("#dlq-none").hidden = rows.length > 0;
  $("#dlq tbody").replaceChildren(...rows.map((r) => {
    const status = h("span", { class: "resent" });
    const show = (seq) => { status.textContent = `resent as seq ${seq}`; status.dataset.seq = seq; };
    if (resent[r.id]) show(resent[r.id]);
    const resend = async () => {
      try {
        const x = await call("/api/dlq/resend", { id: r.id });
        seen = Math.max(seen, x.seq);
        resent[r.id] = x.seq;
        show(x.seq);
      } catch (e) { status.textContent = e.message; status.className = "error"; }
    };
    return h("tr", { "data-dlq": r.id, "data-consumer": r.consumer, "data-stream-seq": r.stream_seq },
      h("td", {}, r.id), h("td", {}, new Date(r.time).toLocaleString()), h("td", {}, r.consumer), h("td", {}, r.session || ""),
      h("td", {}, r.type || ""), h("td", { class: "num" }, r.deliveries), h("td", { class: "reason" }, r.reason),
      h("td", {}, h("button", { class: "resend", onclick: resend }, "Resend"), " ", status));
  }));
}

// --- usage and cost, as `sylk usage` shows them; read again when an
// llm_usage event comes.
function totalsText(t) {
  return `${t.calls} calls, ${t.total_tokens} tokens (${t.prompt_tokens} prompt, ${t.completion_tokens} completion)` + (t.cost_usd ? `, $${t.cost_usd.toFixed(4)}` : "");
}
function totalsTable(what, m) {
  const keys = Object.keys(m || {}).sort();
  if (!keys.length) return [];
  return [h("table", { "data-by": what.toLowerCase() },
    h("thead", {}, h("tr", {}, ...[what, "calls", "prompt", "completion", "total", "cost"].map((c) => h("th", {}, c)))),
    h("tbody", {}, ...keys.map((k) => {
      const t = m[k];
      return h("tr", { "data-key": k }, h("td", {}, k || "-"), h("td", { class: "num" }, t.calls), h("td", { class: "num" }, t.prompt_tokens),
        h("td", { class: "num" }, t.completion_tokens), h("td", { class: "num total" }, t.total_tokens),
        h("td", { class: "num cost" }, t.cost_usd ? "$" + t.cost_usd.toFixed(4) : "-"));
    })))];
}
async function loadUsage() {
  const u = await call("/api/usage");
  $("#usage-total").textContent = u.total.calls ? "All sessions: " + totalsText(u.total) : "No LLM calls recorded.";
  const tasks = (u.by_task || []).map((t) => [`${t.session} ${t.dag}/${t.node}`, t]);
  $("#usage").replaceChildren(...totalsTable("Session", u.by_session), ...totalsTable("Model", u.by_model),
    ...totalsTable("Agent", u.by_agent), ...totalsTable("Task", Object.fromEntries(tasks)));
}

// --- live: one stream for the state shown and the event log
let pending = null;
// stale says which views the events since the last refresh changed; each is
// read again, once per burst, only when one did.
const stale = { sessions: true, session: true, waiting: true, dlq: true, usage: true };
const loaders = { sessions: () => loadSessions(), session: () => loadSession(), waiting: () => loadWaiting(), dlq: () => loadDLQ(), usage: () => loadUsage() };
// The events the projections fold into the sessions list (apply_sessions.go)
// and into what waits on the user (applyPending).
const SESSION_TYPES = new Set(["session_create", "session_fork", "session_switch", "session_suspend", "session_resume", "session_complete",
  "session_fail", "session_context_set", "dag_execute", "dag_rejected", "workflow_complete", "signal"]);
const WAITING_TYPES = new Set(["session_fork", "clarification_request", "plan_response", "clarification_response", "user_response",
  "plan_approved", "plan_modified"]);
// changed names the views an event changes: the session shown by any event
// of it; all of them for an event that is no envelope.
function changed(e) {
  if (!e) return Object.keys(stale);
  const views = [];
  if (SESSION_TYPES.has(e.type)) views.push("sessions");
  if (WAITING_TYPES.has(e.type)) views.push("waiting");
  if (e.session_id === session) views.push("session");
  if (e.type === "dead_letter") views.push("dlq");
  if (e.type === "llm_usage") views.push("usage");
  return views;
}
// refresh reads the views named (all of them by default) again.
function refresh(...views) {
  for (const v of views.length ? views : Object.keys(stale)) stale[v] = true;
  // Events come in bursts: read the state once per burst.
  if (pending) return;
  pending = setTimeout(async () => {
    pending = null;
    const due = Object.keys(stale).filter((v) => stale[v]);
    for (const v of due) stale[v] = false;
    try {
      await Promise.all(due.map((v) => loaders[v]()));
    } catch (e) { console.error(e); }
  }, 50);
}

// The page's one stream of every event: it keeps the state shown current
// and, while the event log has no filter, fills the log too (a filtered log
// has a stream of its own, filtered by the server). Opened with the log's
// since, so its past fills the log; an EventSource that reconnects resumes
// after the last event it got (Last-Event-ID), none twice.
let stream = null;
function follow(since) {
  if (stream) stream.close();
  stream = new EventSource("/api/events?" + new URLSearchParams({ since }));
  stream.onopen = () => { $("#live").className = "up"; $("#live").textContent = "live"; refresh(); };
  stream.onerror = () => { $("#live").className = "down"; $("#live").textContent = "reconnecting"; };
  stream.onmessage = (m) => {
    seen = Math.max(seen, Number(m.lastEventId));
    const ev = JSON.parse(m.data);
    const views = changed(ev.envelope);
    if (views.length) refresh(...views);
    if (!logStream) logRow(ev);
  };
}

// --- a session's replay timeline: its events, live; one clicked shows the
// session as it stood after that event (replay.state).
let timelineStream = null;
function followTimeline() {
  if (timelineStream) timelineStream.close();
  const list = $("#timeline");
  list.replaceChildren();
  $("#as-of").replaceChildren();
  const at = session;
  timelineStream = new EventSource("/api/events?" + new URLSearchParams({ session: at, since: "all" }));
  timelineStream.onmessage = (m) => {
    const ev = JSON.parse(m.data), e = ev.envelope;
    const type = e ? e.type : "INVALID";
    list.append(h("li", { class: "pick", "data-seq": ev.seq, "data-type": type, onclick: () => showAsOf(at, ev.seq) }, `${ev.seq} ${type}`));
  };
}

async function showAsOf(at, seq) {
  const box = $("#as-of");
  try {
    const v = await q("replay.state", { session: at, as_of: { seq } });
    box.replaceChildren(h("h3", { "data-as-of": seq }, `Session ${at} as of event ${seq}: ${v.session ? v.session.state : "not yet created"}`),
      ...(v.dags || []).map(dagBox),
      ...((v.pending || []).length ? [h("p", {}, `${v.pending.length} waiting on the user`)] : []));
  } catch (e) {
    box.replaceChildren(h("p", { class: "error" }, e.message));
  }
}

// The event log: the page's stream while its filter is empty, read again
// from its since; a stream of its own, filtered by the server, otherwise
// (logStream), so a filtered log gets only the events it shows.
let logStream = null;
function followLog(form) {
  if (logStream) logStream.close();
  logStream = null;
  const params = new URLSearchParams();
  for (const [k, v] of new FormData(form)) if (v) params.set(k, v);
  $("#events tbody").replaceChildren();
  if ([...params.keys()].every((k) => k === "since")) {
    follow(params.get("since") || "new");
    return;
  }
  logStream = new EventSource("/api/events?" + params);
  logStream.onmessage = (m) => logRow(JSON.parse(m.data));
}

// logRow puts an event at the top of the log, which keeps the last 500.
function logRow(ev) {
  const body = $("#events tbody"), e = ev.envelope;
  const row = e
    ? h("tr", { "data-seq": ev.seq, "data-type": e.type, "data-session": e.session_id || "_" }, h("td", {}, ev.seq), h("td", {}, new Date(e.timestamp).toLocaleTimeString()), h("td", {}, e.session_id || "_"),
      h("td", {}, `${e.source}→${e.target || "guide"}`), h("td", {}, e.type), h("td", { class: "payload" }, JSON.stringify(e.payload).slice(0, 300)))
    : h("tr", { "data-seq": ev.seq }, h("td", {}, ev.seq), h("td", {}, ""), h("td", {}, ""), h("td", {}, ev.subject), h("td", {}, "INVALID"), h("td", { class: "payload" }, ev.invalid));
  body.prepend(row);
  while (body.children.length > 500) body.lastChild.remove();
}
$("#event-filter").addEventListener("submit", (e) => { e.preventDefault(); followLog(e.target); });

followLog($("#event-filter")); // opens the page's stream

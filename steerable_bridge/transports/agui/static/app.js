// The chat page: one thread at a time, opened from the server's snapshot of it
// (GET /agent/threads/{id}), then following a run still going through
// GET /agent/threads/{id}/events after the snapshot's last id, so a reload, a thread switch
// or a dropped connection shows the same thread and a running answer goes on. Runs are
// POSTed as resumable AG-UI RunAgentInputs; Stop asks the server to stop the turn; a message
// sent while a turn runs steers it.

import { ServerError, call, setToken, stream, token } from "./api.js";
import { applyPatch } from "./patch.js";
import { renderMarkdown } from "./markdown.js";
import { onTimeline, resetTimeline, track } from "./timeline.js";
import { approvalBox, endArgs, questionBox, markAnswered, setStatus as setToolStatus, setToolName, showResult, toolCard } from "./cards.js";
import { loadThreads, markCurrent, onDeleted } from "./threads.js";

const $ = (id) => document.getElementById(id);
const newId = (p) => p + "-" + (crypto.randomUUID ? crypto.randomUUID() : Math.random().toString(36).slice(2));
const THREAD_KEY = "steerable.thread";
const RECONNECTS = 5;         // tries to resume a dropped stream, RETRY_MS apart, doubling
const RETRY_MS = 500;

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); reject(new DOMException("aborted", "AbortError")); }, { once: true });
  });
}

let threadId = localStorage.getItem(THREAD_KEY) || newId("thread");
let messages = [];           // the thread as the server last sent it (MESSAGES_SNAPSHOT)
let state = {};              // shared state
let lastEventId = null;      // the SSE id of the last event shown
let streaming = null;        // AbortController of the stream being read
let view = 0;                // bumped on every thread switch: stale streams stop drawing
const nodes = new Map();     // message / tool call id -> DOM node
const options = new Map();   // tool call id -> the permission options the server offered
const waiting = new Map();   // interrupt id -> its approval box, while unanswered
let models = { list: [], default: null };

// ---- drawing ----------------------------------------------------------------------------
let batch = null;            // the fragment a snapshot is drawn into: attached once, one reflow
function add(node) {
  if (batch) return batch.appendChild(node);
  const log = $("log");
  const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.appendChild(node);
  if (stick) log.scrollTop = log.scrollHeight;
  return node;
}
function el(cls, text, tag = "div") {
  const node = document.createElement(tag);
  node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}
function note(text) { return add(el("note", text)); }
function showError(err) {
  const message = err instanceof ServerError ? err.message : "the page failed: " + (err && err.message || err) + " — reload it";
  const box = add(el("error", message));
  if (err instanceof ServerError && err.code) box.dataset.code = err.code;
}
onTimeline((box) => add(box));

let streamLabel = "running…";  // what the stream being read is
function status() {
  let text = "idle";
  if (streaming) text = streamLabel;
  else if (waiting.size) text = [...waiting.keys()].some((id) => !isQuestion(id)) ? "waiting for your approval" : "waiting for your answer";
  $("status").textContent = text;
  $("status").dataset.state = streaming ? "running" : waiting.size ? "waiting" : "idle";
  $("stop").disabled = !streaming;
}

let pending = new Set();
function drawSoon(node) {  // markdown re-rendered at most once a frame while text streams
  if (pending.has(node)) return;
  pending.add(node);
  requestAnimationFrame(() => {
    pending.delete(node);
    const log = $("log");
    const stick = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    renderMarkdown(node, node.dataset.source);
    if (stick) log.scrollTop = log.scrollHeight;
  });
}

function assistant(id) {
  let node = nodes.get(id);
  if (!node) { node = add(el("msg assistant md")); node.dataset.source = ""; nodes.set(id, node); }
  return node;
}
function tool(id, name) {
  let node = nodes.get(id);
  if (!node) { node = add(toolCard(name || "")); nodes.set(id, node); }
  else setToolName(node, name);
  return node;
}
function userBubble(id, text) {
  if (id && nodes.has(id)) return;
  const node = add(el("msg user", text));
  if (id) nodes.set(id, node);
}

function renderPlan(entries) {
  const plan = $("plan");
  if (!entries.length) { plan.replaceChildren(el("empty", "no plan yet", "li")); return; }
  plan.replaceChildren(...entries.map((e) => el(e.status, e.content + (e.status === "in_progress" ? " (in progress)" : ""), "li")));
}
function renderState() { $("state").textContent = JSON.stringify(state, null, 2); }

// The run ended: no card may still say "running…".
function settleCards(event) {
  const outcome = event.outcome || {};
  const interrupts = outcome.interrupts || [];
  const asked = new Set(interrupts.filter((i) => !isQuestion(i.id)).map((i) => i.toolCallId));
  const questioned = new Set(interrupts.filter((i) => isQuestion(i.id)).map((i) => i.toolCallId));
  const frontend = new Set(outcome.pendingToolCallIds || []);
  for (const node of document.querySelectorAll(".tool-call")) {
    if (node.querySelector(".result").hidden === false) continue;
    const id = [...nodes].find(([, n]) => n === node)?.[0];
    if (asked.has(id)) setToolStatus(node, "waiting for approval");
    else if (questioned.has(id)) setToolStatus(node, "waiting for your answer");
    else if (frontend.has(id)) setToolStatus(node, "waiting for the page");
    else if (node.dataset.status === "running…" || !node.dataset.status)
      setToolStatus(node, event.type === "RUN_ERROR" ? "failed: the run ended with an error" : "stopped");
  }
}

const isQuestion = (interruptId) => interruptId.startsWith("question-");  // an ask_user form

function askApproval(interrupt) {
  if (waiting.has(interrupt.id) || document.querySelector(`.approval[data-interrupt="${CSS.escape(interrupt.id)}"]`)) return;
  const answered = (payload, label) => {
    markAnswered(box, "answered: " + label);
    waiting.delete(interrupt.id);
    run([], [{ interruptId: interrupt.id, status: "resolved", payload }]);
  };
  const box = isQuestion(interrupt.id)
    ? questionBox(interrupt, answered)
    : approvalBox(interrupt, options.get(interrupt.toolCallId), answered);
  waiting.set(interrupt.id, box);
  add(box);
}

const OUTCOMES = { allow_once: "allowed once", allow_always: "always allowed", reject_once: "rejected",
                   reject_always: "always rejected", cancelled: "withdrawn" };

function handle(event, id) {
  if (id) lastEventId = id;
  switch (event.type) {
    case "TEXT_MESSAGE_START": assistant(event.messageId); break;
    case "TEXT_MESSAGE_CONTENT": { const n = assistant(event.messageId); n.dataset.source += event.delta; drawSoon(n); break; }
    case "TEXT_MESSAGE_END": { const n = nodes.get(event.messageId); if (n) renderMarkdown(n, n.dataset.source); break; }
    case "REASONING_MESSAGE_START": {
      const d = add(el("reasoning", undefined, "details"));
      d.append(el("", "Thinking…", "summary"), el("", "", "div"));
      nodes.set("r:" + event.messageId, d);
      break;
    }
    case "REASONING_MESSAGE_CONTENT": { const d = nodes.get("r:" + event.messageId); if (d) d.querySelector("div").textContent += event.delta; break; }
    case "REASONING_MESSAGE_END": { const d = nodes.get("r:" + event.messageId); if (d) d.querySelector("summary").textContent = "Reasoning"; break; }
    case "TOOL_CALL_START": tool(event.toolCallId, event.toolCallName); break;
    case "TOOL_CALL_ARGS": tool(event.toolCallId).querySelector(".args").textContent += event.delta; break;
    case "TOOL_CALL_END": endArgs(tool(event.toolCallId), event.metadata?.steerable?.title); break;
    case "TOOL_CALL_RESULT": showResult(tool(event.toolCallId), event.metadata?.steerable?.status || "completed", event.content); break;
    case "STATE_SNAPSHOT": state = event.snapshot; renderState(); break;
    case "STATE_DELTA": state = applyPatch(state, event.delta); renderState(); break;
    case "ACTIVITY_SNAPSHOT": if (event.activityType === "plan") renderPlan(event.content.entries || []); break;
    case "MESSAGES_SNAPSHOT": messages = event.messages; break;
    case "CUSTOM": custom(event.name, event.value || {}); break;
    case "RUN_ERROR":
      add(el("error", "The run failed" + (event.code ? " [" + event.code + "]" : "") + ": " + event.message));
      settleCards(event);
      break;
    case "RUN_FINISHED": {
      const outcome = event.outcome || { type: "success" };
      settleCards(event);
      if (outcome.type === "cancelled") note("stopped");
      if (outcome.type === "interrupt") for (const it of outcome.interrupts) askApproval(it);
      if (outcome.type === "success" && outcome.pendingToolCallIds && outcome.pendingToolCallIds.length)
        note("waiting for frontend tools: " + outcome.pendingToolCallIds.join(", "));
      break;
    }
  }
  track(event);
}

function custom(name, value) {
  switch (name) {
    case "steerable.user_message":
      userBubble(value.message_id, (value.content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n"));
      break;
    case "steerable.permission_requested": options.set(value.call_id, value.options || []); break;
    case "steerable.permission_resolved": {
      const box = document.querySelector(`.approval[data-interrupt="${CSS.escape("approval-" + value.call_id)}"]`);
      if (box) { waiting.delete(box.dataset.interrupt); markAnswered(box, OUTCOMES[value.outcome] || value.outcome); }
      const card = nodes.get(value.call_id);
      if (card && /^allow/.test(value.outcome)) setToolStatus(card, "running…");
      break;
    }
    case "steerable.steer_absorbed": note("your message joined the running turn"); break;
    case "steerable.follow_up_queued": note("your message comes when this turn ends"); break;
    case "steerable.compaction_started": summaries.set(value.compaction_id, note("compacting: ")); break;
    case "steerable.compaction_summary_delta": {
      const box = summaries.get(value.compaction_id);
      if (box) box.textContent += value.delta;  // the summary as the model writes it
      break;
    }
    case "steerable.compaction_dropped": {
      const box = summaries.get(value.compaction_id);
      summaries.delete(value.compaction_id);
      const text = "not compacted" + (value.detail ? ": " + value.detail : "");
      if (box) box.textContent = text; else note(text);
      break;
    }
    case "steerable.compaction": {
      const box = summaries.get(value.compaction_id);
      summaries.delete(value.compaction_id);
      if (box) box.textContent = compactionNote(value); else note(compactionNote(value));
      break;
    }
  }
}

const summaries = new Map();  // compaction id → the note its streaming summary is shown in

function compactionNote(c) {
  const tokens = (c.pre_tokens || 0).toLocaleString("en") + " → " + (c.post_tokens || 0).toLocaleString("en") + " tokens";
  if (c.scope === "tool_results") return "folded old tool results: " + tokens;
  const turns = c.turns ? c.turns + (c.turns === 1 ? " turn" : " turns") : "the conversation so far";
  return "compacted " + turns + ": " + tokens + (c.notice ? " — " + c.notice : "");
}

// ---- streams ------------------------------------------------------------------------------
// Read one stream into the view; a dropped connection resumes after the last id shown.
async function follow(open, label = "running…") {
  const mine = view;
  const controller = new AbortController();
  streaming = controller;
  streamLabel = label;
  status();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await open(controller.signal, (event, id) => { if (mine === view) handle(event, id); });
        break;
      } catch (err) {
        if (err.name === "AbortError" || mine !== view) return;
        // a stream that dropped (or could not reopen) resumes after the last event shown;
        // a request the server never answered is not retried (it may not have started)
        const lost = err instanceof ServerError && (err.code === "disconnected" || (attempt > 0 && err.code === "unreachable"));
        if (!lost || attempt >= RECONNECTS) throw err;
        if (attempt === 0) note("connection lost — reconnecting…");
        $("status").textContent = "reconnecting…";
        await sleep(RETRY_MS * 2 ** attempt, controller.signal);
        const after = lastEventId ?? "-1";
        open = (signal, onEvent) => stream(events(), { signal, lastEventId: after }, onEvent);
      }
    }
  } catch (err) {
    if (mine === view) showError(err);
  } finally {
    if (streaming === controller) streaming = null;
    if (mine === view) { status(); refreshThreads(); }
  }
}

function events() { return "agent/threads/" + encodeURIComponent(threadId) + "/events"; }

function runInput(newMessages, extra) {
  const own = { resumable: true, ...extra };
  const picked = $("model").value;
  if (picked && models.list.length > 1) own.model = picked;  // the thread keeps what was picked
  // protocolVersion "1.0": this page reads the 1.0 outcomes (cancelled, pendingToolCallIds).
  return { threadId, runId: newId("run"), protocolVersion: "1.0", messages: [...messages, ...newMessages],
           state, tools: [], context: [], forwardedProps: { steerable: own } };
}

function run(newMessages, resume) {
  const body = runInput(newMessages);
  if (resume) body.resume = resume;
  messages = body.messages;
  localStorage.setItem(THREAD_KEY, threadId);
  return follow((signal, onEvent) => stream("agent", { method: "POST", body, signal }, onEvent));
}

// A message while a turn runs joins it (steer); the short answer stream is read on the side.
async function steer(text) {
  const body = runInput([{ id: newId("user"), role: "user", content: text }], { steer: true });
  delete body.forwardedProps.steerable.resumable;
  try { await stream("agent", { method: "POST", body }, (event) => { if (event.type === "CUSTOM") custom(event.name, event.value || {}); }); }
  catch (err) { showError(err); }
}

async function stopRun() {
  $("stop").disabled = true;
  $("status").textContent = "stopping…";
  const body = runInput([], { stop: true });
  delete body.forwardedProps.steerable.resumable;
  body.messages = [];
  try { await stream("agent", { method: "POST", body }, () => {}); }
  catch (err) { if (err.code !== "thread_idle") { showError(err); if (streaming) streaming.abort(); } }
}

// ---- threads ------------------------------------------------------------------------------
function clearView() {
  view++;
  if (streaming) streaming.abort();
  streaming = null;
  messages = []; state = {}; lastEventId = null;
  nodes.clear(); options.clear(); waiting.clear(); pending = new Set(); resetTimeline();
  $("log").replaceChildren();
  renderState(); renderPlan([]);
  $("thread").textContent = threadId;
  markCurrent(threadId);
  closeMenu();
}

// Opening a thread draws its snapshot (GET /agent/threads/{id}: the messages, state and what
// waits for an answer, one request however long the thread), then follows a run still going
// from the snapshot's last event id. Timelines, notes and answered approvals of runs before
// the page opened are not redrawn: the messages, tool results and plan are.
async function openThread(id) {
  threadId = id;
  localStorage.setItem(THREAD_KEY, id);
  clearView();
  const mine = view;
  $("status").textContent = "loading…";
  let snap;
  try { snap = await call("agent/threads/" + encodeURIComponent(id)); }
  catch (err) {
    if (mine !== view) return;
    if (err.code === "thread_not_found") localStorage.removeItem(THREAD_KEY);  // never run, deleted, or another user's
    else showError(err);
    status();
    hint();
    return;
  }
  if (mine !== view) return;
  drawSnapshot(snap);
  lastEventId = snap.lastEventId;
  status();
  if (snap.running) await follow((signal, onEvent) => stream(events(), { signal, lastEventId: snap.lastEventId }, onEvent));
  else refreshThreads();
  if (!$("log").children.length) hint();
}

function drawSnapshot(snap) {
  messages = snap.messages || [];
  state = snap.state || {};
  renderState();
  batch = document.createDocumentFragment();
  try { for (const m of messages) drawMessage(m); } finally {
    const log = $("log");
    log.appendChild(batch);
    batch = null;
    log.scrollTop = log.scrollHeight;
  }
  const interrupts = snap.interrupts || [];
  for (const it of interrupts) {
    const offered = it.metadata && it.metadata.steerable && it.metadata.steerable.options;
    if (it.toolCallId && offered) options.set(it.toolCallId, offered);
  }
  if (!snap.running) settleCards({ type: "RUN_FINISHED", outcome: { interrupts, pendingToolCallIds: snap.pendingToolCallIds || [] } });
  for (const it of interrupts) askApproval(it);
  if ((snap.pendingToolCallIds || []).length) note("waiting for frontend tools: " + snap.pendingToolCallIds.join(", "));
}

function drawMessage(m) {
  if (m.role === "user") userBubble(m.id, typeof m.content === "string" ? m.content
    : (m.content || []).filter((p) => p.type === "text").map((p) => p.text).join("\n"));
  else if (m.role === "reasoning") {
    const d = add(el("reasoning", undefined, "details"));
    d.append(el("", "Reasoning", "summary"), el("", m.content || "", "div"));
    nodes.set("r:" + m.id, d);
  } else if (m.role === "assistant") {
    if (m.content) { const n = assistant(m.id); n.dataset.source = m.content; renderMarkdown(n, m.content); }
    for (const call of m.toolCalls || []) {
      const card = tool(call.id, call.function.name);
      card.querySelector(".args").textContent = call.function.arguments;
      endArgs(card);
    }
  } else if (m.role === "tool") {
    showResult(tool(m.toolCallId), m.error ? "failed: " + m.error : "completed", m.content);
  } else if (m.role === "activity" && m.activityType === "plan") renderPlan((m.content || {}).entries || []);
}

function newThread() {
  threadId = newId("thread");
  localStorage.removeItem(THREAD_KEY);
  clearView();
  hint();
  $("input").focus();
}

function refreshThreads(more = false) { return loadThreads(threadId, openThread, showError, more); }

// Suggest only what this server can do: each needs a tool /health says the agent offers.
const SUGGESTIONS = [["think", null], ["use a tool", "calculate"], ["make a plan", "update_plan"],
                     ["change the state", "update_state"], ["write a file", "write_file"]];
let health = null;
async function checkHealth() {
  try { health = await call("health"); } catch (e) { health = null; }  // errors show on use
  // a plain "ok" (not JSON) means the server wants a token before it says more
  $("token").hidden = !!health && health.auth === false && !token();
  return health;
}

async function hint() {
  const box = add(el("note", "Ask anything."));
  box.id = "try";
  try {
    if (!health) await checkHealth();
    const tools = new Set((health && health.tools) || []);
    const offered = SUGGESTIONS.filter(([, t]) => t === null || tools.has(t));
    box.textContent = "Try: " + offered.map(([say]) => `"${say}"`).join(", ") + ".";
  } catch (e) { /* the hint is optional; errors show on use */ }
}

async function loadModels() {
  try {
    const caps = await call("agent/capabilities");
    const own = (caps.custom && caps.custom.steerable) || {};
    models = { list: own.models || [], default: own.defaultModel || null };
  } catch (err) { return; }
  const select = $("model");
  select.replaceChildren(...models.list.map((m) => { const o = el("", m, "option"); o.value = m; return o; }));
  if (models.default) select.value = models.default;
  $("model-box").hidden = models.list.length < 2;
}

// ---- wiring -------------------------------------------------------------------------------
function closeMenu() { document.body.classList.remove("menu-open"); }

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text) return;
  $("input").value = "";
  $("try")?.remove();
  const id = newId("user");
  userBubble(id, text);
  if (streaming) { steer(text); return; }
  for (const box of waiting.values()) markAnswered(box, "not answered (a new message was sent)");
  waiting.clear();
  run([{ id, role: "user", content: text }]);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
});
$("stop").addEventListener("click", stopRun);
onDeleted((id) => { if (id === threadId) newThread(); });
$("new-thread").addEventListener("click", newThread);
$("more-threads").addEventListener("click", () => refreshThreads(true));
$("menu").addEventListener("click", () => document.body.classList.toggle("menu-open"));
$("log").addEventListener("click", closeMenu);
$("token").value = token();
$("token").addEventListener("change", () => { setToken($("token").value); checkHealth(); refreshThreads(); loadModels(); });

$("thread").textContent = threadId;
status();
checkHealth();
refreshThreads();
loadModels();
if (localStorage.getItem(THREAD_KEY)) openThread(threadId); else hint();

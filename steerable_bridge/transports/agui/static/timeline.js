// A run's timeline, gathered from the events' timestamps (ms) and drawn when the run ends:
// steps, model calls, permission waits and tool runs as bars on the run's time axis.

let timeline = null;
let drawInto = null;

export function onTimeline(draw) { drawInto = draw; }
export function resetTimeline() { timeline = null; }

function tlOpen(key, label, depth, ts) {
  const row = { label, depth, start: ts, end: null, note: "" };
  timeline.rows.push(row);
  timeline.open[key] = row;
}
function tlClose(key, ts, note) {
  const row = timeline.open[key];
  if (!row) return;
  row.end = ts;
  if (note) row.note = note;
  delete timeline.open[key];
}
function duration(ms) { return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(2) + " s"; }
function timelineSummary(t, total) {
  const n = t.rows.length;  // the run's own row is a span too: the count matches the rows shown
  return "Timeline · " + duration(total) + " · " + n + (n === 1 ? " span" : " spans") +
    (t.traceId ? " · trace " + t.traceId : "");
}

export function track(event) {
  const meta = (event.metadata && event.metadata.steerable) || {};
  const value = event.type === "CUSTOM" ? event.value || {} : {};
  const ts = event.timestamp != null ? event.timestamp : value.ts;
  if (event.type === "RUN_STARTED") {
    timeline = { rows: [], open: {}, names: {}, traceId: meta.trace_id };
    tlOpen("run", "run", 0, ts);
    return;
  }
  if (!timeline || ts == null) return;
  const inner = timeline.open.step ? 2 : 1;
  switch (event.type) {
    case "STEP_STARTED": tlOpen("step", "step " + (meta.step ?? ""), 1, ts); break;
    case "STEP_FINISHED": tlClose("step", ts, meta.finish_reason); break;
    case "TOOL_CALL_START": timeline.names[event.toolCallId] = event.toolCallName; break;
    case "TOOL_CALL_RESULT": tlClose("tool:" + event.toolCallId, ts, meta.status || "completed"); break;
    case "CUSTOM":
      if (event.name === "steerable.model_request") tlOpen("model", "model " + value.request.model, inner, ts);
      if (event.name === "steerable.model_response") tlClose("model", ts, value.finish_reason);
      if (event.name === "steerable.permission_requested")
        tlOpen("perm:" + value.call_id, "permission " + value.tool_name, inner, ts);
      if (event.name === "steerable.permission_resolved") tlClose("perm:" + value.call_id, ts, value.outcome);
      if (event.name === "steerable.tool_started")
        tlOpen("tool:" + value.call_id, "tool " + (timeline.names[value.call_id] || value.call_id), inner, ts);
      break;
    case "RUN_FINISHED": case "RUN_ERROR": {
      const note = event.type === "RUN_ERROR" ? "failed " + (event.code || "") : (meta.stop_reason || "");
      for (const key of Object.keys(timeline.open)) tlClose(key, ts, key === "run" ? note : "did not finish");
      if (drawInto) drawInto(drawTimeline(timeline));
      timeline = null;
      break;
    }
  }
}

function drawTimeline(t) {
  const start = t.rows[0].start;
  const total = Math.max(Math.max(...t.rows.map((r) => r.end ?? r.start)) - start, 1);
  const box = document.createElement("details");
  box.className = "timeline";
  const summary = document.createElement("summary");
  summary.textContent = timelineSummary(t, total);
  box.appendChild(summary);
  for (const row of t.rows) {
    const line = document.createElement("div");
    line.className = "tl-row";
    line.innerHTML = '<span class="tl-label"></span><span class="tl-dur"></span>' +
      '<div class="tl-track"><div class="tl-bar"></div></div>';
    const label = line.querySelector(".tl-label");
    label.textContent = row.label + (row.note ? " · " + row.note : "");
    label.style.paddingLeft = row.depth * 12 + "px";
    label.title = label.textContent;
    const end = row.end ?? row.start;
    line.querySelector(".tl-dur").textContent = duration(end - row.start);
    const bar = line.querySelector(".tl-bar");
    bar.classList.add("d" + row.depth);
    if (/failed|did not finish|reject/.test(row.note)) bar.classList.add("failed");
    bar.style.left = ((row.start - start) / total) * 100 + "%";
    bar.style.width = ((end - row.start) / total) * 100 + "%";
    box.appendChild(line);
  }
  return box;
}

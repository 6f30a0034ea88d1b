// The thread sidebar: the caller's threads from GET /agent/threads (newest first, "Load
// more" for the next page), the open one marked, a running one tagged, each deletable
// (DELETE /agent/threads/{id}, after a second click).

import { call } from "./api.js";

const $ = (id) => document.getElementById(id);
let cursor = null;

function when(ms) {
  const d = new Date(ms);
  return d.toDateString() === new Date().toDateString()
    ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : d.toLocaleDateString();
}

function item(thread, current, open) {
  const li = document.createElement("li");
  li.dataset.thread = thread.threadId;
  if (thread.threadId === current) li.className = "current";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "thread";
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = thread.title || "Untitled thread";
  const meta = document.createElement("span");
  meta.className = "meta";
  meta.textContent = (thread.running ? "running · " : "") + when(thread.updatedAt);
  button.append(title, meta);
  button.addEventListener("click", () => open(thread.threadId));
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "delete";
  remove.textContent = "×";
  remove.title = "Delete this thread";
  remove.setAttribute("aria-label", "Delete thread " + (thread.title || thread.threadId));
  // two clicks: the first asks, the second (within 4 s) deletes
  remove.addEventListener("click", async () => {
    if (!remove.classList.contains("armed")) {
      remove.classList.add("armed");
      remove.textContent = "Delete?";
      setTimeout(() => { remove.classList.remove("armed"); remove.textContent = "×"; }, 4000);
      return;
    }
    remove.disabled = true;
    try {
      await call("agent/threads/" + encodeURIComponent(thread.threadId), { method: "DELETE" });
      li.remove();
      $("no-threads").hidden = $("threads").children.length > 0;
      if (handlers.deleted) handlers.deleted(thread.threadId);
    } catch (err) {
      remove.disabled = false;
      if (handlers.fail) handlers.fail(err);
    }
  });
  li.append(button, remove);
  return li;
}

const handlers = { deleted: null, fail: null };
/** Called with a thread's id once it is deleted (the page leaves it if it is open). */
export function onDeleted(callback) { handlers.deleted = callback; }

/** Fill the list (from the first page, or append the next); errors go to `fail`. */
export async function loadThreads(current, open, fail, more = false) {
  handlers.fail = fail;
  try {
    const page = await call("agent/threads?limit=50" + (more && cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
    cursor = page.nextCursor;
    const items = page.threads.map((t) => item(t, current, open));
    if (more) $("threads").append(...items); else $("threads").replaceChildren(...items);
    $("more-threads").hidden = !cursor;
    $("no-threads").hidden = $("threads").children.length > 0;
  } catch (err) {
    fail(err);
  }
}

export function markCurrent(threadId) {
  for (const li of $("threads").children) li.classList.toggle("current", li.dataset.thread === threadId);
}

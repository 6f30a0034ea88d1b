// Tool call cards (arguments, a diff preview for file writes and edits, the result, a status
// that ends when the run does) and approval prompts with the options the server offered.

const FILE_TOOLS = new Set(["write_file", "edit_file"]);

function lines(text) { return text === "" ? [] : text.replace(/\n$/, "").split("\n"); }

/** The change a file tool's arguments make, as diff lines ({sign, text}); null if none. */
export function diffOf(name, args) {
  if (!FILE_TOOLS.has(name) || !args || typeof args.path !== "string") return null;
  if (name === "write_file" && typeof args.content === "string")
    return lines(args.content).map((text) => ({ sign: "+", text }));
  if (typeof args.old_text === "string" && typeof args.new_text === "string")
    return [...lines(args.old_text).map((text) => ({ sign: "-", text })),
            ...lines(args.new_text).map((text) => ({ sign: "+", text }))];
  return null;
}

export function toolCard(name) {
  const node = document.createElement("div");
  node.className = "tool-call";
  node.innerHTML = '<div class="head"><span class="name"></span> <span class="status">running…</span></div>' +
    '<div class="diff" hidden><div class="diff-path"></div><pre></pre></div>' +
    '<details class="args-box"><summary>arguments</summary><pre class="args"></pre></details>' +
    '<pre class="result" hidden></pre>';
  node.dataset.tool = name;
  node.querySelector(".name").textContent = "Tool: " + name;
  return node;
}

export function setToolName(node, name) {
  if (name) node.dataset.tool = name;
}

export function endArgs(node, title) {
  const args = node.querySelector(".args");
  let parsed = null;
  try { parsed = JSON.parse(args.textContent || "{}"); args.textContent = JSON.stringify(parsed, null, 2); } catch (e) {}
  if (title) node.querySelector(".name").textContent = "Tool: " + title;
  const diff = diffOf(node.dataset.tool, parsed);
  if (diff) {
    const box = node.querySelector(".diff");
    box.hidden = false;
    box.querySelector(".diff-path").textContent = parsed.path;
    box.querySelector("pre").replaceChildren(...diff.map(({ sign, text }) => {
      const line = document.createElement("span");
      line.className = sign === "+" ? "add" : "del";
      line.textContent = sign + " " + text + "\n";
      return line;
    }));
  }
}

export function setStatus(node, status) {
  node.querySelector(".status").textContent = status;
  node.dataset.status = status;
}

export function showResult(node, status, content) {
  node.classList.toggle("failed", status !== "completed");
  setStatus(node, status);
  const result = node.querySelector(".result");
  result.hidden = false;
  result.textContent = typeof content === "string" ? content : JSON.stringify(content);
}

// What each option kind answers (`resume[].payload`).
const ANSWERS = {
  allow_once: { approved: true },
  allow_always: { approved: true, always: true },
  reject_once: { approved: false },
  reject_always: { approved: false, always: true },
  reject_with_stop: { approved: false, stop: true },
};
const FALLBACK = [
  { option_id: "allow_once", name: "Allow once", kind: "allow_once" },
  { option_id: "reject_once", name: "Reject", kind: "reject_once" },
];

function answerOf(option) {
  if (option.option_id === "reject_stop") return ANSWERS.reject_with_stop;
  return ANSWERS[option.kind] || ANSWERS[option.option_id] || null;
}

/** An approval prompt; `answer(payload, label)` is called with the chosen option. */
export function approvalBox(interrupt, options, answer) {
  const box = document.createElement("div");
  box.className = "approval";
  box.dataset.interrupt = interrupt.id;
  box.innerHTML = '<div class="reason"></div><div class="options"></div><div class="answered"></div>';
  box.querySelector(".reason").textContent = interrupt.reason;
  const row = box.querySelector(".options");
  for (const option of (options && options.length ? options : FALLBACK)) {
    const payload = answerOf(option);
    if (!payload) continue;
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = option.name;
    button.dataset.option = option.option_id;
    if (option.kind === "allow_once") button.className = "primary";
    if (option.kind && option.kind.startsWith("reject")) button.classList.add("reject");
    button.addEventListener("click", () => {
      for (const b of row.querySelectorAll("button")) b.disabled = true;
      answer(payload, option.name);
    });
    row.appendChild(button);
  }
  return box;
}

export function markAnswered(box, label) {
  for (const b of box.querySelectorAll("button")) b.disabled = true;
  box.classList.add("done");
  box.querySelector(".answered").textContent = label;
}

function field(name, spec) {
  const label = document.createElement("label");
  label.textContent = (spec.title || name) + " ";
  let input;
  if (Array.isArray(spec.enum)) {
    input = document.createElement("select");
    for (const choice of spec.enum) input.append(new Option(String(choice), String(choice)));
  } else {
    input = document.createElement("input");
    input.type = spec.type === "boolean" ? "checkbox" : spec.type === "string" ? "text" : "number";
  }
  if (spec.default !== undefined) input[spec.type === "boolean" ? "checked" : "value"] = spec.default;
  input.name = name;
  label.append(input);
  return [label, input];
}

function valueOf(input, type) {
  if (type === "boolean") return input.checked;
  if (input.value === "") return undefined;
  return type === "number" || type === "integer" ? Number(input.value) : input.value;
}

/** A question the model asked (`ask_user`): a form from the interrupt's responseSchema
 * (`content` is the requested form), or for a url question (`metadata: {mode: "url", url}`)
 * a link to the page and "Done" once the person is back; `answer(payload, label)` gets
 * {action: accept|decline|cancel, content?}. */
export function questionBox(interrupt, answer) {
  const box = document.createElement("div");
  box.className = "approval question";
  box.dataset.interrupt = interrupt.id;
  box.innerHTML = '<div class="reason"></div><div class="fields"></div><div class="options"></div><div class="answered"></div>';
  box.querySelector(".reason").textContent = interrupt.reason || "The agent asks:";
  const page = (interrupt.metadata || {}).mode === "url" ? String(interrupt.metadata.url || "") : null;
  if (page !== null && /^https?:\/\//i.test(page)) {
    const link = document.createElement("a");
    link.href = page;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    link.textContent = page;
    box.querySelector(".fields").append(link);
  }
  const form = ((interrupt.responseSchema || {}).properties || {}).content || {};
  const inputs = [];
  for (const [name, spec] of Object.entries(form.properties || {})) {
    const [label, input] = field(name, spec);
    box.querySelector(".fields").append(label);
    inputs.push([name, input, spec.type]);
  }
  const row = box.querySelector(".options");
  for (const [action, text] of [["accept", page === null ? "Submit" : "Done"], ["decline", "Decline"], ["cancel", "Cancel"]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = text;
    button.dataset.action = action;
    if (action === "accept") button.className = "primary";
    button.addEventListener("click", () => {
      for (const b of row.querySelectorAll("button")) b.disabled = true;
      const payload = { action };
      if (action === "accept" && page === null) {
        payload.content = {};
        for (const [name, input, type] of inputs) {
          const value = valueOf(input, type);
          if (value !== undefined) payload.content[name] = value;
        }
      }
      answer(payload, { accept: "sent", decline: "declined", cancel: "cancelled" }[action]);
    });
    row.appendChild(button);
  }
  return box;
}

// Assistant text as markdown: parsed by the vendored `marked`, sanitised by the vendored
// DOMPurify (both loaded as classic scripts before the modules), and every code block given
// a Copy button. Re-rendered as text streams in; plain text when either library is missing.

const { marked, DOMPurify } = window;
if (marked) marked.setOptions({ gfm: true, breaks: true });

export function renderMarkdown(el, text) {
  el.dataset.source = text;
  if (!marked || !DOMPurify) { el.textContent = text; return; }
  el.innerHTML = DOMPurify.sanitize(marked.parse(text));
  for (const link of el.querySelectorAll("a[href]")) { link.target = "_blank"; link.rel = "noopener noreferrer"; }
  for (const pre of el.querySelectorAll("pre")) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.textContent = "Copy";
    button.addEventListener("click", () => copy(button, pre.querySelector("code")?.textContent ?? pre.textContent));
    pre.prepend(button);
  }
}

async function copy(button, text) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch (e) {
    button.textContent = "Copy failed (select the text instead)";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}

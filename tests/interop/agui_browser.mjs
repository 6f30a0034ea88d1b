// Drives the built-in chat page in headless Chromium (Debian's /usr/bin/chromium) with
// playwright-core, one browser for every scenario. Usage:
//   node agui_browser.mjs FAST_URL SLOW_URL CUT_URL ARTIFACT_DIR ASK_URL
// FAST_URL serves the demo model at instant pace, SLOW_URL at a pace that takes seconds.
// On FAST_URL: a reply with reasoning and a tool call, an approval answered "Always allow"
// and a second write that is not asked about, a markdown reply with a code block, the first
// run's timeline, screenshots at desktop and phone width with the layout measured, a second
// thread, switching back to the first from the sidebar and a reload that keeps it, the model
// picker, and the words shown when the server cannot be reached.
// On SLOW_URL: a reload while the answer streams (it goes on), then Stop on a new thread.
// On CUT_URL (SLOW_URL behind a proxy that cuts the first run's stream): the page resumes.
// On ASK_URL (a scripted model that calls `ask_user` with a form, then answers): the form,
// kept by a reload, filled in and submitted; after another reload nothing waits.
// Prints one JSON report on stdout.
import { chromium } from "playwright-core";

const [fast, slow, cut, artifacts, ask] = process.argv.slice(2);
const WAIT = { timeout: 15000 };
const consoleMessages = [];
let expected = null;  // the network failure a scenario causes on purpose is not an error

const texts = (page, selector) =>
  page.evaluate((sel) => [...document.querySelectorAll(sel)].map((n) => n.textContent), selector);
const statusOf = (page) => page.evaluate(() => document.querySelector("#status").textContent);
const idle = (page) =>
  page.waitForFunction(() => document.querySelector("#status").textContent === "idle", null, WAIT);
const hasText = (page, selector, text) =>
  page.waitForFunction(
    ([sel, t]) => [...document.querySelectorAll(sel)].some((n) => n.textContent.includes(t)), [selector, text], WAIT);

async function send(page, text) {
  await page.fill("#input", text);
  await page.click("#send");
}

// Nothing wider than the window: the page never scrolls sideways, nor does the conversation.
const layout = (page) => page.evaluate(() => {
  const log = document.querySelector("#log");
  const wide = [...document.querySelectorAll("body *")]
    .filter((n) => n.getClientRects().length && !n.closest("pre, details.timeline:not([open])"))
    .filter((n) => n.getBoundingClientRect().right > window.innerWidth + 1)
    .map((n) => n.tagName.toLowerCase() + (n.id ? "#" + n.id : "") + (n.className ? "." + n.className : ""));
  return {
    innerWidth: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    bodyScrollWidth: document.body.scrollWidth,
    logOverflow: log.scrollWidth - log.clientWidth,
    wide: wide.slice(0, 10),
    sidebarVisible: getComputedStyle(document.querySelector("#sidebar")).display !== "none",
    menuVisible: getComputedStyle(document.querySelector("#menu")).display !== "none",
  };
});

async function newPage(browser, viewport) {
  const context = await browser.newContext({ viewport, permissions: ["clipboard-read", "clipboard-write"] });
  const page = await context.newPage();
  page.on("console", (msg) => {
    if (!(expected && msg.text().includes(expected))) consoleMessages.push(`${msg.type()}: ${msg.text()}`);
  });
  page.on("pageerror", (err) => consoleMessages.push(`pageerror: ${err.message}`));
  return page;
}

async function onFast(browser) {
  const page = await newPage(browser, { width: 1280, height: 800 });
  await page.goto(fast, WAIT);
  await send(page, "think, then use a tool");
  await page.waitForSelector(".tool-call .result:not([hidden])", WAIT);
  await hasText(page, ".msg.assistant", "That is how a tool call looks.");
  await idle(page);
  // The first run's timeline (drawn live; a reload draws the runs after it): collapsed until
  // clicked, then one row per bracket.
  const first = page.locator("details.timeline").first();
  const timelineOpen = await first.evaluate((n) => n.open);
  await first.locator("summary").click();
  const timelineRows = await first.evaluate((n) =>
    [...n.querySelectorAll(".tl-row")].map((r) => ({
      label: r.querySelector(".tl-label").textContent,
      duration: r.querySelector(".tl-dur").textContent,
      width: r.querySelector(".tl-bar").style.width,
    })));
  // An approval: the run ends with an interrupt, the page offers the server's options.
  await send(page, "write a note");
  await page.waitForSelector(".approval button", WAIT);
  const waitingStatus = await statusOf(page);
  const options = await texts(page, ".approval button");
  const cardWhileAsked = await page.evaluate(() =>
    [...document.querySelectorAll(".tool-call")].at(-1).querySelector(".status").textContent);
  const diff = await texts(page, ".tool-call .diff:not([hidden])");
  // A reload while the approval waits: the question is still there, with every option.
  await page.reload(WAIT);
  await page.waitForSelector(".approval button[data-option=allow_always]", WAIT);
  await page.waitForFunction(() => document.querySelector("#status").textContent !== "running…", null, WAIT);
  const afterReload = { status: await statusOf(page), options: await texts(page, ".approval button"),
                        diff: await texts(page, ".tool-call .diff:not([hidden])") };
  await page.click(".approval button[data-option=allow_always]");
  await hasText(page, ".tool-call .result", "wrote");
  await idle(page);
  // Always allowed: the next write runs without asking.
  await send(page, "write another note");
  await page.waitForFunction(
    () => [...document.querySelectorAll(".tool-call .result")].filter((n) => n.textContent.includes("wrote")).length === 2,
    null, WAIT);
  await idle(page);
  const approvals = await texts(page, ".approval");
  // The model picker (the server offers two routes): the next run uses the one picked.
  const pickerVisible = await page.isVisible("#model");
  const models = await texts(page, "#model option");
  await page.selectOption("#model", "test:other");
  // Markdown: a fenced code block with a Copy button, bold text.
  await send(page, "markdown:\n```\nprint(42)\n```\n\nand **bold** please");
  await page.waitForSelector(".msg.assistant pre code", WAIT);
  await idle(page);
  const markdown = await page.evaluate(() => {
    const msg = [...document.querySelectorAll(".msg.assistant")].at(-1);
    return { code: msg.querySelector("pre code")?.textContent, copy: !!msg.querySelector("pre button.copy"),
             bold: msg.querySelector("strong")?.textContent ?? null, raw: msg.textContent.includes("```") };
  });
  await page.click(".msg.assistant pre button.copy");
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  const pickedModel = await page.locator("details.timeline").last().evaluate((n) =>
    [...n.querySelectorAll(".tl-label")].map((l) => l.textContent).filter((t) => t.startsWith("model ")));
  const chat = {
    pickerVisible, models, pickedModel, waitingStatus, afterReload, options, cardWhileAsked, diff, approvals, markdown, copied, timelineOpen, timelineRows,
    timelines: await texts(page, "details.timeline summary"),
    reply: await texts(page, ".msg.assistant"),
    tool: await texts(page, ".tool-call"),
    reasoning: await page.evaluate(() =>
      [...document.querySelectorAll("details.reasoning")].map((n) => ({ open: n.open, text: n.textContent }))),
    errors: await texts(page, ".error"),
    runningCards: await page.evaluate(() =>
      [...document.querySelectorAll(".tool-call .status")].filter((n) => n.textContent === "running…").length),
  };
  const firstThread = await page.evaluate(() => localStorage.getItem("steerable.thread"));
  await page.evaluate(() => { const log = document.querySelector("#log"); log.scrollTop = log.scrollHeight; });
  await page.screenshot({ path: `${artifacts}/agui-chat-desktop.png` });
  const desktop = await layout(page);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: `${artifacts}/agui-chat-phone.png` });
  const phone = await layout(page);
  await page.click("#menu");
  const phoneMenu = await layout(page);
  await page.click("#new-thread");
  const phoneAfterPick = await layout(page);
  await page.setViewportSize({ width: 1280, height: 800 });
  // A second thread, then back to the first from the sidebar, then a reload.
  await send(page, "hello");
  await hasText(page, ".msg.assistant", "demo model");
  await idle(page);
  const secondThread = await page.evaluate(() => localStorage.getItem("steerable.thread"));
  await page.waitForSelector(`#threads li[data-thread="${secondThread}"]`, WAIT);
  const sidebar = await texts(page, "#threads li .title");
  await page.click(`#threads li[data-thread="${firstThread}"] button`);
  await hasText(page, ".tool-call .result", "wrote");
  await idle(page);
  const switched = {
    thread: await page.evaluate(() => document.querySelector("#thread").textContent),
    users: await texts(page, ".msg.user"), tools: await texts(page, ".tool-call .result"),
    approvals: await texts(page, ".approval"),
  };
  await page.reload(WAIT);
  await hasText(page, ".tool-call .result", "wrote");
  await idle(page);
  const reloaded = {
    thread: await page.evaluate(() => document.querySelector("#thread").textContent),
    users: await texts(page, ".msg.user"), threads: await texts(page, "#threads li .title"),
    code: await texts(page, ".msg.assistant pre code"), status: await statusOf(page),
  };
  // Delete the second thread (two clicks): gone from the sidebar, and from the server.
  const remove = page.locator(`#threads li[data-thread="${secondThread}"] button.delete`);
  await remove.click();
  const armed = await remove.textContent();
  await remove.click();
  await page.waitForSelector(`#threads li[data-thread="${secondThread}"]`, { state: "detached", ...WAIT });
  await page.reload(WAIT);
  await page.waitForSelector(`#threads li[data-thread="${firstThread}"]`, WAIT);
  await idle(page);
  const deleted = { armed, threads: await texts(page, "#threads li .title"), thread: await page.evaluate(() => document.querySelector("#thread").textContent) };
  // The server gone: a sentence saying what to do, and a status that is not stuck.
  expected = "ERR_CONNECTION_REFUSED";
  await page.route("**/agent", (route) => route.abort("connectionrefused"));
  await send(page, "are you there?");
  await page.waitForSelector(".error", WAIT);
  await idle(page);
  const unreachable = await texts(page, ".error");
  expected = null;
  await page.context().close();
  return { chat, unreachable, deleted, desktop, phone, phoneMenu, phoneAfterPick, firstThread, secondThread, sidebar, switched, reloaded };
}

async function onSlow(browser) {
  const page = await newPage(browser, { width: 1280, height: 800 });
  await page.goto(slow, WAIT);
  const source = () => page.evaluate(() => document.querySelector(".msg.assistant")?.dataset.source ?? "");
  await send(page, "hello");
  await page.waitForFunction(() => (document.querySelector(".msg.assistant")?.dataset.source ?? "").length > 20, null, WAIT);
  const before = await source();
  await page.reload(WAIT);
  await page.waitForSelector(".msg.assistant", WAIT);
  const afterReload = { status: await statusOf(page), text: await source() };
  await idle(page);
  const reload = { before, afterReload, after: await source(), users: await texts(page, ".msg.user"),
                   assistants: await texts(page, ".msg.assistant") };
  // The connection drops while the answer streams (CUT_URL is a proxy that cuts the first
  // POST /agent stream partway): the page resumes it after the last id shown, once.
  const cutPage = await newPage(browser, { width: 1280, height: 800 });
  expected = "ERR_INCOMPLETE_CHUNKED_ENCODING";
  await cutPage.goto(cut, WAIT);
  await send(cutPage, "hello");
  await hasText(cutPage, ".note", "connection lost");
  await idle(cutPage);
  const dropped = {
    text: await cutPage.evaluate(() => document.querySelector(".msg.assistant")?.dataset.source ?? ""),
    notes: await texts(cutPage, ".note"), errors: await texts(cutPage, ".error"),
    assistants: await texts(cutPage, ".msg.assistant"),
  };
  await cutPage.context().close();
  expected = null;
  // Stop, on a new thread.
  await page.click("#new-thread");
  await send(page, "hello");
  await page.waitForFunction(() => (document.querySelector(".msg.assistant")?.dataset.source ?? "").length > 0, null, WAIT);
  await page.click("#stop");
  await idle(page);
  const stop = { reply: await texts(page, ".msg.assistant"), notes: await texts(page, ".note"),
                 thread: await page.evaluate(() => document.querySelector("#thread").textContent) };
  await page.context().close();
  return { reload, dropped, stop };
}

async function onAsk(browser) {
  const page = await newPage(browser, { width: 1280, height: 800 });
  await page.goto(ask, WAIT);
  await send(page, "make me a poster");
  await page.waitForSelector(".question button[data-action=accept]", WAIT);
  await page.waitForFunction(() => document.querySelector("#status").textContent !== "running…", null, WAIT);
  const form = () => page.evaluate(() => {
    const box = document.querySelector(".question");
    return {
      reason: box.querySelector(".reason").textContent,
      fields: [...box.querySelectorAll(".fields label")].map((l) => ({
        label: l.firstChild.textContent.trim(), tag: l.querySelector("input, select").tagName.toLowerCase(),
        type: l.querySelector("input")?.type ?? null,
        choices: [...l.querySelectorAll("option")].map((o) => o.value),
      })),
      buttons: [...box.querySelectorAll(".options button")].map((b) => b.textContent),
    };
  });
  const asked = { ...(await form()), status: await statusOf(page),
                  card: await page.evaluate(() => document.querySelector(".tool-call .status")?.textContent ?? null) };
  // A reload while the question waits: the same form comes back.
  await page.reload(WAIT);
  await page.waitForSelector(".question button[data-action=accept]:not([disabled])", WAIT);
  await page.waitForFunction(() => document.querySelector("#status").textContent !== "loading…", null, WAIT);
  const afterReload = { ...(await form()), status: await statusOf(page) };
  await page.fill(".question input[name=title]", "Launch party");
  await page.selectOption(".question select[name=size]", "large");
  await page.fill(".question input[name=copies]", "3");
  await page.check(".question input[name=rush]");
  await page.click(".question button[data-action=accept]");
  await hasText(page, ".msg.assistant", "Printing");
  await idle(page);
  const answered = {
    box: await texts(page, ".question .answered"),
    disabled: await page.evaluate(() => [...document.querySelectorAll(".question button")].every((b) => b.disabled)),
    result: await texts(page, ".tool-call .result"),
    card: await page.evaluate(() => document.querySelector(".tool-call .status")?.textContent ?? null),
    reply: await texts(page, ".msg.assistant"),
  };
  // Reopened later, no form waits: the thread is idle.
  await page.reload(WAIT);
  await hasText(page, ".msg.assistant", "Printing");
  await idle(page);
  const reopened = {
    status: await statusOf(page), box: await texts(page, ".question .answered"),
    enabled: await page.evaluate(() => [...document.querySelectorAll(".question button")].filter((b) => !b.disabled).length),
  };
  await page.context().close();
  return { asked, afterReload, answered, reopened };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const fastReport = await onFast(browser);
  const slowReport = await onSlow(browser);
  const question = await onAsk(browser);
  process.stdout.write(JSON.stringify({ ...fastReport, ...slowReport, question, console: consoleMessages }) + "\n");
} finally {
  await browser.close();
}

// The page's one way to reach the server: `call` for JSON routes and `stream` for SSE, both
// with the bearer token when one is entered, and every failure turned into a sentence the
// user can act on (`ServerError`), never "TypeError: Failed to fetch".

const TOKEN_KEY = "steerable.token";

export class ServerError extends Error {
  constructor(message, code, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function headers(extra) {
  const h = { ...extra };
  if (token()) h.Authorization = "Bearer " + token();
  return h;
}

async function refusal(response) {
  let code = "http_" + response.status;
  let message = response.statusText || "the server refused the request";
  try {
    const body = await response.json();
    if (body && body.error) { code = body.error.code || code; message = body.error.message || message; }
  } catch (e) { /* not JSON: keep the status line */ }
  if (response.status === 401)
    message = "the server wants a bearer token: enter the --token `steerable-bridge serve` was started with (" + message + ")";
  return new ServerError(message, code, response.status);
}

async function send(path, init) {
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ServerError("server unreachable — is `steerable-bridge serve` running? Start it, then retry.", "unreachable", 0);
  }
  if (!response.ok) throw await refusal(response);
  return response;
}

/** A JSON route: the parsed body (null for 204). */
export async function call(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const response = await send(path, init);
  return response.status === 204 ? null : response.json();
}

/** An SSE route: calls onEvent(event, id) for every frame until the stream ends. */
export async function stream(path, { method = "GET", body, signal, lastEventId } = {}, onEvent) {
  const extra = { Accept: "text/event-stream" };
  if (body) extra["Content-Type"] = "application/json";
  if (lastEventId != null) extra["Last-Event-ID"] = lastEventId;
  const init = { method, signal, headers: headers(extra) };
  if (body) init.body = JSON.stringify(body);
  const response = await send(path, init);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let id = null;
        const data = [];
        for (const line of frame.split("\n")) {
          if (line.startsWith("id:")) id = line.slice(3).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        }
        if (data.length) onEvent(JSON.parse(data.join("\n")), id);
      }
    }
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ServerError("the connection to the server dropped — is `steerable-bridge serve` still running? Reload to reconnect.", "disconnected", 0);
  }
}

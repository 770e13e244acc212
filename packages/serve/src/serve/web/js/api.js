// Calls to this server's API from the pages: each carries the API key the user typed, kept in
// sessionStorage so it lives as long as the browser tab and is never written to disk by the page.

const KEY_ITEM = "serve.apiKey";

/** The error the server answered, with its own message (OpenAI's {"error": {"message"}} shape). */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_ITEM);
}

export function storeKey(key) {
  if (key) sessionStorage.setItem(KEY_ITEM, key);
  else sessionStorage.removeItem(KEY_ITEM);
}

function headersWithKey(headers) {
  const key = storedKey();
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}

/** The message of an error response: the server's own words when it sent them. */
export async function errorOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && body.error && body.error.message) return new ApiError(response.status, body.error.message);
  } catch {
    // not JSON: the text itself is the best message there is
  }
  return new ApiError(response.status, text || `${response.status} ${response.statusText}`);
}

// The page's way to ask for a key when the server answers 401; set by the page that owns the dialog.
let askForKey = async () => false;

export function onKeyNeeded(ask) {
  askForKey = ask;
}

/**
 * fetch() of this server with the key; on a 401 asks for a key (once per call) and tries again.
 * Answers the Response when it is ok, throws ApiError with the server's message otherwise.
 */
export async function call(path, { method = "GET", body, signal, headers = {} } = {}) {
  const init = { method, signal, headers: { ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  for (let attempt = 0; ; attempt++) {
    const response = await fetch(path, { ...init, headers: headersWithKey(init.headers) });
    if (response.ok) return response;
    const error = await errorOf(response);
    if (response.status === 401 && attempt === 0 && (await askForKey(error.message))) continue;
    throw error;
  }
}

export async function callJson(path, options) {
  return (await call(path, options)).json();
}

// What a page remembers in this browser. localStorage belongs to one origin, so what is kept
// here is kept per gateway. Storage may be disabled: then it lasts as long as the page.

const memory = new Map();

export function load(key) {
  try {
    return localStorage.getItem(key);
  } catch (e) {
    return memory.has(key) ? memory.get(key) : null;
  }
}

/** Keep `value` under `key`; `null` forgets it. */
export function store(key, value) {
  try {
    if (value === null) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
  } catch (e) {
    if (value === null) memory.delete(key);
    else memory.set(key, value);
  }
}

export function loadJSON(key, fallback) {
  const raw = load(key);
  if (raw === null) return fallback;
  try {
    return JSON.parse(raw);
  } catch (e) {
    return fallback;
  }
}

export function storeJSON(key, value) {
  store(key, value === null ? null : JSON.stringify(value));
}

/** The `?token=` of the page's address, taken out of the address bar and history. */
export function takeTokenFromUrl(params) {
  const token = params.get("token");
  if (!token) return null;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  return token;
}

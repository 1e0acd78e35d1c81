// The API, called from the console's own origin (kubectl proxy or
// kube-apiserver) as the user: no credentials of the console's own.

// base is what precedes /apis/ in the console's URL (kubectl proxy's
// --api-prefix), and namespace the console's namespace.
export function where(pathname) {
  const m = pathname.match(/^(.*)\/apis\/console\.backstop\.io\/v1\/namespaces\/([^/]+)\/consoles\//);
  return m ? { base: m[1], namespace: decodeURIComponent(m[2]) } : { base: '', namespace: 'default' };
}

// A write carries a JSON content type and a header of the console's own:
// a request no page of another site can send without a CORS preflight,
// which neither kubectl proxy nor the server grants.
const writeHeaders = { 'Content-Type': 'application/json', 'X-Backstop-Console': '1' };

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function check(resp) {
  if (resp.ok) return resp;
  let message = `${resp.status} ${resp.statusText}`;
  try {
    const s = await resp.json();
    if (s.message) message = s.message;
  } catch (_) { /* not a Status */ }
  throw new APIError(resp.status, message);
}

export async function get(url, signal) {
  return (await check(await fetch(url, { headers: { Accept: 'application/json' }, signal }))).json();
}

export async function getText(url, signal) {
  return (await check(await fetch(url, { headers: { Accept: '*/*' }, signal }))).text();
}

export async function post(url, body) {
  return (await check(await fetch(url, { method: 'POST', headers: writeHeaders, body: JSON.stringify(body ?? {}) }))).json();
}

// patch merges body into the object at url (a JSON merge patch).
export async function patch(url, body) {
  return (await check(await fetch(url, {
    method: 'PATCH',
    headers: { ...writeHeaders, 'Content-Type': 'application/merge-patch+json' },
    body: JSON.stringify(body),
  }))).json();
}

// watchList lists url's collection, then watches it from the list's
// resourceVersion, calling onChange with the whole collection (a Map by
// name) after the list and after every event. A watch the server ends
// (its timeout) is started again from the last resourceVersion seen
// (events and bookmarks carry it); one whose version expired (410) lists
// again. Items are keyed by name, or by keyOf (a list of several
// namespaces). It returns a function that stops it.
export function watchList(url, onChange, onError, keyOf = (o) => o.metadata.name) {
  const ctl = new AbortController();
  const items = new Map();
  const sep = url.includes('?') ? '&' : '?';
  (async () => {
    let rv = null; // null: list first
    while (!ctl.signal.aborted) {
      try {
        if (rv === null) {
          const list = await get(url, ctl.signal);
          items.clear();
          for (const o of list.items ?? []) items.set(keyOf(o), o);
          onChange(new Map(items));
          onError(null);
          rv = list.metadata.resourceVersion;
        }
        rv = await follow(`${url}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(rv)}`, items, onChange, ctl.signal, rv, keyOf);
      } catch (e) {
        if (ctl.signal.aborted) return;
        onError(e);
        // A request the server refuses, or a resource it does not serve,
        // is not sent again.
        if ([401, 403, 404].includes(e.status)) return;
        rv = null;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  })();
  return () => ctl.abort();
}

// follow applies a watch's events to items until the server ends it; it
// returns the last resourceVersion seen, or null when the watch expired
// (list again).
async function follow(url, items, onChange, signal, rv, keyOf) {
  const resp = await check(await fetch(url, { headers: { Accept: 'application/json' }, signal }));
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return rv;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      const ev = JSON.parse(line);
      if (ev.type === 'ERROR') return null; // expired (410): list again
      rv = ev.object?.metadata?.resourceVersion ?? rv;
      switch (ev.type) {
        case 'ADDED':
        case 'MODIFIED':
          items.set(keyOf(ev.object), ev.object);
          break;
        case 'DELETED':
          items.delete(keyOf(ev.object));
          break;
        default:
          continue; // BOOKMARK: its resourceVersion only
      }
      onChange(new Map(items));
    }
  }
}

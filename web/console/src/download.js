// Files of a backup read through a DownloadRequest: the request created
// as the user, its signed link awaited (a watch), then read through the
// request's content subresource on the console's own origin (the link
// itself may name the server's address, which the browser does not reach
// through kubectl proxy).
import { post, watchList } from './api.js';
import { base, velero, can, canRead } from './context.js';

// processed waits for the download request name to be processed.
function processed(name) {
  return new Promise((resolve, reject) => {
    const url = `${velero.url('downloadrequests')}?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`;
    const timer = setTimeout(() => { stop(); reject(new Error('the download request was not processed within a minute')); }, 60e3);
    const stop = watchList(url, (items) => {
      const dr = items.get(name);
      if (dr?.status?.phase === 'Processed') {
        clearTimeout(timer);
        stop();
        resolve(dr);
      }
    }, (e) => {
      if (e) {
        clearTimeout(timer);
        stop();
        reject(e);
      }
    });
  });
}

// contentURL is the same-origin form of a download link.
export function contentURL(link, request) {
  const u = new URL(link);
  const at = u.pathname.indexOf('/apis/velero.io/v1/namespaces/');
  if (at >= 0) return `${base}${u.pathname.slice(at)}${u.search}`;
  // A direct link: /backstop/download/<ns>/<location>/<kind>/<name>.
  const [location, kind, name] = u.pathname.split('/').slice(-3).map(decodeURIComponent);
  const q = new URLSearchParams(u.search);
  q.set('location', location);
  q.set('kind', kind);
  q.set('name', name);
  return `${velero.url('downloadrequests')}/${encodeURIComponent(request)}/content?${q}`;
}

// downloadJSON reads a backup's gzip-compressed JSON file of kind.
export async function downloadJSON(backup, kind) {
  const dr = await post(velero.url('downloadrequests'), {
    apiVersion: 'velero.io/v1', kind: 'DownloadRequest',
    metadata: { generateName: `${backup}-console-` },
    spec: { target: { kind, name: backup } },
  });
  const done = await processed(dr.metadata.name);
  const resp = await fetch(contentURL(done.status.downloadURL, dr.metadata.name));
  if (resp.status === 404) return null;
  if (!resp.ok) throw new Error(`${resp.status} ${await resp.text()}`);
  return new Response(resp.body.pipeThrough(new DecompressionStream('gzip'))).json();
}

// mayDownload reports whether the user may read a backup's files so:
// create download requests, watch them, and read their content.
export function mayDownload() {
  return can('create', 'velero.io', 'downloadrequests') && canRead('velero.io', 'downloadrequests') &&
    can('get', 'velero.io', 'downloadrequests/content');
}

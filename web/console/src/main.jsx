// Backstop's web console: a single-page app over the API, as its user.
import { render } from 'preact';
import { signal, useSignal, useComputed } from '@preact/signals';
import { useEffect, useLayoutEffect, useRef } from 'preact/hooks';
import { where, watchList, post } from './api.js';
import { rulesFor, may } from './rights.js';

const { base, namespace } = where(location.pathname);
const nsPath = (group, version) => `${base}/apis/${group}/${version}/namespaces/${encodeURIComponent(namespace)}`;

const rules = signal(null); // null until read
const rulesError = signal(null);

const terminal = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation']);

function time(t) {
  return t ? new Date(t).toLocaleString() : '';
}

// The kinds of backups a namespace shows: Velero's (the admin's namespace)
// and the tenants' NonAdminBackups, each read through the same columns.
const kinds = [
  {
    id: 'backups',
    title: 'Backups',
    group: 'velero.io',
    url: () => `${nsPath('velero.io', 'v1')}/backups`,
    resource: 'backups',
    cancel: 'backups/cancel',
    phase: (o) => o.status?.phase || 'New',
    status: (o) => o.status ?? {},
    queue: (o) => o.status?.queuePosition,
    location: (o) => o.spec?.storageLocation,
    cancelled: (o) => o.spec?.cancel,
  },
  {
    id: 'nonadminbackups',
    title: 'Backups of this namespace (NonAdminBackups)',
    group: 'oadp.openshift.io',
    url: () => `${nsPath('oadp.openshift.io', 'v1alpha1')}/nonadminbackups`,
    resource: 'nonadminbackups',
    cancel: 'nonadminbackups/cancel',
    phase: (o) => o.status?.veleroBackup?.status?.phase || o.status?.phase || 'New',
    status: (o) => o.status?.veleroBackup?.status ?? {},
    queue: (o) => o.status?.queueInfo?.estimatedQueuePosition,
    location: (o) => o.spec?.backupSpec?.storageLocation,
    // A NonAdminBackup's cancel marks its Velero backup.
    cancelled: (o) => o.status?.veleroBackup?.spec?.cancel || !o.status?.veleroBackup,
  },
];

function Progress({ name, s }) {
  const p = s.progress;
  if (!p || !p.totalItems) return null;
  const label = `${p.itemsBackedUp ?? 0} of ${p.totalItems} items`;
  return <progress max={p.totalItems} value={p.itemsBackedUp ?? 0} aria-label={`Progress of ${name}: ${label}`} title={label} />;
}

function Row({ kind, o, index, canCancel, onCancel }) {
  const s = kind.status(o);
  const phase = kind.phase(o);
  const name = o.metadata.name;
  return (
    <tr data-backup={name} aria-rowindex={index}>
      <th scope="row">{name}</th>
      <td class={`phase phase-${phase}`} data-phase={phase}>{phase}{s.failureReason ? <span class="reason">: {s.failureReason}</span> : null}</td>
      <td><Progress name={name} s={s} /></td>
      <td class="num">{kind.queue(o) || ''}</td>
      <td class="num">{s.progress?.itemsBackedUp ?? ''}</td>
      <td class="num">{s.warnings || ''}</td>
      <td class="num">{s.errors || ''}</td>
      <td>{time(s.startTimestamp)}</td>
      <td>{time(s.completionTimestamp)}</td>
      <td>{kind.location(o) ?? ''}</td>
      <td>{time(s.expiration)}</td>
      <td>{!canCancel || terminal.has(phase) || kind.cancelled(o) ? null :
        <button type="button" onClick={() => onCancel(name)} aria-label={`Cancel backup ${name}`}>Cancel</button>}</td>
    </tr>
  );
}

// Rows are drawn as the page scrolls to them: a namespace of 10,000
// backups opens as fast as one of ten. Every row is rowHeight pixels
// high (app.css); the rows above and below the window are spacers.
const rowHeight = 33;
const overscan = 30;

// The window's scroll position and height, updated once per frame.
const viewport = signal({ top: window.scrollY, height: window.innerHeight });
let framePending = false;
function onViewport() {
  if (framePending) return;
  framePending = true;
  requestAnimationFrame(() => {
    framePending = false;
    viewport.value = { top: window.scrollY, height: window.innerHeight };
  });
}
window.addEventListener('scroll', onViewport, { passive: true });
window.addEventListener('resize', onViewport, { passive: true });

function BackupList({ kind, canCancel }) {
  const items = useSignal(new Map());
  const listError = useSignal(null);
  const actionError = useSignal(null);
  const bodyTop = useSignal(0); // the table body's top, in the page
  const body = useRef(null);
  const rows = useComputed(() =>
    [...items.value.values()].sort((a, b) =>
      (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '') || a.metadata.name.localeCompare(b.metadata.name)));
  const listed = useSignal(false);
  useEffect(() => watchList(kind.url(), (m) => { items.value = m; listed.value = true; }, (e) => { listError.value = e; }), []);
  // The first list painted, for the browser tests' timing: a mark after
  // the frame that shows it.
  useEffect(() => {
    if (listed.value) requestAnimationFrame(() => setTimeout(() => performance.mark(`console:${kind.id}:listed`, { detail: items.value.size })));
  }, [listed.value]);
  useLayoutEffect(() => {
    if (body.current) bodyTop.value = body.current.getBoundingClientRect().top + window.scrollY;
  });
  const first = useComputed(() => Math.max(0, Math.floor((viewport.value.top - bodyTop.value) / rowHeight) - overscan));
  const count = rows.value.length;
  const last = Math.min(count, first.value + Math.ceil(viewport.value.height / rowHeight) + 2 * overscan);
  const cancel = async (name) => {
    actionError.value = null;
    try {
      await post(`${kind.url()}/${encodeURIComponent(name)}/cancel`, {});
    } catch (e) {
      actionError.value = `Cancelling ${name}: ${e.message}`;
    }
  };
  const titleID = `${kind.id}-title`;
  return (
    <section aria-labelledby={titleID} data-kind={kind.id}>
      <h2 id={titleID}>{kind.title} <span class="count" data-count={count}>{count}</span></h2>
      {listError.value ? <p role="alert" class="error">These could not be read: {listError.value.message}</p> : null}
      {actionError.value ? <p role="alert" class="error">{actionError.value}</p> : null}
      <table aria-rowcount={count + 1}>
        <thead>
          <tr aria-rowindex={1}>
            <th scope="col">Name</th><th scope="col">Phase</th><th scope="col">Progress</th><th scope="col">Queue</th>
            <th scope="col">Items</th><th scope="col">Warnings</th><th scope="col">Errors</th><th scope="col">Started</th>
            <th scope="col">Ended</th><th scope="col">Location</th><th scope="col">Expires</th><th scope="col"><span class="sr-only">Actions</span></th>
          </tr>
        </thead>
        <tbody ref={body}>
          {first.value > 0 ? <tr class="spacer" aria-hidden="true" style={{ height: `${first.value * rowHeight}px` }} /> : null}
          {rows.value.slice(first.value, last).map((o, i) => <Row key={o.metadata.name} index={first.value + i + 2} kind={kind} o={o} canCancel={canCancel} onCancel={cancel} />)}
          {last < count ? <tr class="spacer" aria-hidden="true" style={{ height: `${(count - last) * rowHeight}px` }} /> : null}
        </tbody>
      </table>
    </section>
  );
}

function Main() {
  useEffect(() => {
    rulesFor(base, namespace).then((r) => { rules.value = r; }, (e) => { rulesError.value = e; });
  }, []);
  if (rulesError.value) return <p role="alert" class="error">Your rights in {namespace} could not be read: {rulesError.value.message}</p>;
  if (!rules.value) return <p>Reading your rights…</p>;
  const shown = kinds.filter((k) => may(rules.value, 'list', k.group, k.resource) && may(rules.value, 'watch', k.group, k.resource));
  if (!shown.length) return <p>You may not read backups in {namespace}.</p>;
  return shown.map((k) => <BackupList key={k.id} kind={k} canCancel={may(rules.value, 'create', k.group, k.cancel)} />);
}

function App() {
  return (
    <>
      <header>
        <h1>Backstop</h1>
        <p>Namespace <strong>{namespace}</strong></p>
      </header>
      <main>
        <Main />
      </main>
    </>
  );
}

const root = document.getElementById('app');
root.textContent = ''; // the page's "Loading" line
render(<App />, root);

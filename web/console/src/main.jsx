// Backstop's web console: a single-page app over the API, as its user.
import { render } from 'preact';
import { signal, computed } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { where, watchList, post } from './api.js';

const { base, namespace } = where(location.pathname);
const backupsURL = `${base}/apis/velero.io/v1/namespaces/${encodeURIComponent(namespace)}/backups`;

const backups = signal(new Map());
const listError = signal(null);
const actionError = signal(null);

const rows = computed(() =>
  [...backups.value.values()].sort((a, b) =>
    (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '') || a.metadata.name.localeCompare(b.metadata.name)));

const terminal = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation']);

function time(t) {
  return t ? new Date(t).toLocaleString() : '';
}

function Progress({ b }) {
  const p = b.status?.progress;
  if (!p || !p.totalItems) return null;
  const label = `${p.itemsBackedUp ?? 0} of ${p.totalItems} items`;
  return <progress max={p.totalItems} value={p.itemsBackedUp ?? 0} aria-label={`Progress of ${b.metadata.name}: ${label}`} title={label} />;
}

async function cancel(name) {
  actionError.value = null;
  try {
    await post(`${backupsURL}/${encodeURIComponent(name)}/cancel`, {});
  } catch (e) {
    actionError.value = `Cancelling ${name}: ${e.message}`;
  }
}

function BackupRow({ b }) {
  const s = b.status ?? {};
  const phase = s.phase || 'New';
  return (
    <tr data-backup={b.metadata.name}>
      <th scope="row">{b.metadata.name}</th>
      <td class={`phase phase-${phase}`} data-phase={phase}>{phase}{s.failureReason ? <span class="reason">: {s.failureReason}</span> : null}</td>
      <td><Progress b={b} /></td>
      <td class="num">{s.queuePosition || ''}</td>
      <td class="num">{s.progress?.itemsBackedUp ?? ''}</td>
      <td class="num">{s.warnings || ''}</td>
      <td class="num">{s.errors || ''}</td>
      <td>{time(s.startTimestamp)}</td>
      <td>{time(s.completionTimestamp)}</td>
      <td>{b.spec?.storageLocation ?? ''}</td>
      <td>{time(s.expiration)}</td>
      <td>{terminal.has(phase) || b.spec?.cancel ? null :
        <button type="button" onClick={() => cancel(b.metadata.name)} aria-label={`Cancel backup ${b.metadata.name}`}>Cancel</button>}</td>
    </tr>
  );
}

function Backups() {
  useEffect(() => watchList(backupsURL, (m) => { backups.value = m; }, (e) => { listError.value = e; }), []);
  return (
    <section aria-labelledby="backups-title">
      <h2 id="backups-title">Backups <span class="count">{rows.value.length}</span></h2>
      {listError.value ? <p role="alert" class="error">Backups could not be read: {listError.value.message}</p> : null}
      {actionError.value ? <p role="alert" class="error">{actionError.value}</p> : null}
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th><th scope="col">Phase</th><th scope="col">Progress</th><th scope="col">Queue</th>
            <th scope="col">Items</th><th scope="col">Warnings</th><th scope="col">Errors</th><th scope="col">Started</th>
            <th scope="col">Ended</th><th scope="col">Location</th><th scope="col">Expires</th><th scope="col"><span class="sr-only">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          {rows.value.map((b) => <BackupRow key={b.metadata.name} b={b} />)}
        </tbody>
      </table>
    </section>
  );
}

function App() {
  return (
    <>
      <header>
        <h1>Backstop</h1>
        <p>Namespace <strong>{namespace}</strong></p>
      </header>
      <main>
        <Backups />
      </main>
    </>
  );
}

const root = document.getElementById('app');
root.textContent = ''; // the page's "Loading" line
render(<App />, root);

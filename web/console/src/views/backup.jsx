// A backup's page: what it holds and how it went, its restores, and its
// log, live while it runs.
import { useSignal, useComputed } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { useCollection, newestFirst, byNamespace } from '../collection.js';
import { get } from '../api.js';
import { mayDownload } from '../download.js';
import { useOne, Details, Invalid, useDownloaded } from '../page.jsx';
import { Log, logURL } from '../log.jsx';
import { base, namespace, nsPath, can, canRead } from '../context.js';
import { href } from '../route.js';
import { time, shortTime, bytes, terminal, waiting } from '../format.jsx';
import { backupKinds, Phase, Progress, sizeOf } from './backups.jsx';
import { restoreKinds } from './restores.jsx';
import { state as vmState } from './vmbackups.jsx';

export function list(v) {
  return v?.length ? v.join(', ') : '';
}

// Resources shows the resource list a backup stored (a DownloadRequest
// for BackupResourceList), read when asked.
function Resources({ name }) {
  const { data, note, reading, load } = useDownloaded(name, 'BackupResourceList', () => false, {});
  const kinds = data ? Object.keys(data).sort() : [];
  const total = kinds.reduce((n, k) => n + (data[k]?.length ?? 0), 0);
  return (
    <section aria-labelledby="resources-title">
      <h3 id="resources-title">Resources</h3>
      {data === null ? <p><button type="button" onClick={load} disabled={reading}>Show the resource list</button></p> : null}
      {note ? <p class="muted" role="status">{note}</p> : null}
      {kinds.length ? (
        <div class="resources" data-resource-count={total}>
          <p>{total} items of {kinds.length} kinds.</p>
          {kinds.map((k) => (
            <details key={k}>
              <summary>{k} <span class="count">{data[k].length}</span></summary>
              <ul>{data[k].slice(0, 500).map((item) => <li key={item}>{item}</li>)}</ul>
              {data[k].length > 500 ? <p class="muted">and {data[k].length - 500} more</p> : null}
            </details>
          ))}
        </div>
      ) : null}
    </section>
  );
}

// Operations shows the backup's async operations (a DownloadRequest for
// BackupItemOperations), read when asked.
function Operations({ name }) {
  const { data: ops, note, reading, load } = useDownloaded(name, 'BackupItemOperations', (got) => !got.length, []);
  return (
    <section aria-labelledby="operations-title">
      <h3 id="operations-title">Async operations</h3>
      {ops === null ? <p><button type="button" onClick={load} disabled={reading}>Show the operations</button></p> : null}
      {note ? <p class="muted" role="status">{note}</p> : null}
      {ops?.length ? (
        <table class="small" data-operations={ops.length}>
          <thead><tr><th scope="col">Item</th><th scope="col">Action</th><th scope="col">Phase</th><th scope="col">Done</th><th scope="col">Updated</th></tr></thead>
          <tbody>
            {ops.map((op) => {
              const id = op.spec?.resourceIdentifier ?? {};
              const item = `${id.Resource ?? ''}${id.Group ? `.${id.Group}` : ''} ${id.Namespace ? `${id.Namespace}/` : ''}${id.Name ?? ''}`;
              return (
                <tr key={op.spec?.operationID} data-operation={op.spec?.operationID}>
                  <th scope="row">{item}</th>
                  <td>{op.spec?.backupItemAction}</td>
                  <td><Phase phase={op.status?.phase || 'New'} reason={op.status?.error} /></td>
                  <td>{op.status?.nTotal ? `${op.status.nCompleted ?? 0} of ${op.status.nTotal} ${op.status.operationUnits ?? ''}` : ''}</td>
                  <td>{shortTime(op.status?.updated)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

// madeBy selects the objects a backup made: by its UID (a label every one
// carries; a name over 63 characters is not a label value as it is).
const madeBy = (uid) => `labelSelector=${encodeURIComponent(`velero.io/backup-uid=${uid}`)}`;

// VolumesOf shows, live, what the backup copied beside its items: its
// DataUploads (volumes moved to the location) and the VM disk backups it
// ran, in every namespace (read only once a first list shows the user may
// list them there).
function VolumesOf({ uid }) {
  const uploads = canRead('velero.io', 'datauploads') ? `${nsPath('velero.io', 'v2alpha1')}/datauploads?${madeBy(uid)}` : '';
  const disks = `${base}/apis/backup.kubevirt.io/v1alpha1/virtualmachinebackups?${madeBy(uid)}`;
  const disksReadable = useSignal(false);
  useEffect(() => {
    if (!canRead('backup.kubevirt.io', 'virtualmachinebackups')) return undefined;
    const ctl = new AbortController();
    get(disks, ctl.signal).then(() => { disksReadable.value = true; }, () => {});
    return () => ctl.abort();
  }, [disks]);
  return (
    <section aria-labelledby="volumes-title">
      <h3 id="volumes-title">Volumes and VM disks</h3>
      {uploads ? <Live url={uploads} what="volume" /> : null}
      {disksReadable.value ? <Live url={disks} what="vm-disk" keyOf={byNamespace} /> : null}
    </section>
  );
}

// Live lists, live, the DataUploads or VM disk backups at url.
function Live({ url, what, keyOf }) {
  const c = useCollection(url, keyOf);
  const items = [...c.items.value.values()].sort(newestFirst);
  if (!c.listed.value) return null;
  if (!items.length) return <p class="muted" data-none={what}>No {what === 'volume' ? 'volumes moved' : 'VM disks backed up'}.</p>;
  return (
    <ul data-count={items.length}>
      {items.map((o) => (what === 'volume' ? (
        <li key={`${o.metadata.name}`} data-volume={o.metadata.name}>Volume {o.spec?.sourceNamespace}/{o.spec?.sourcePVC}: <Phase phase={o.status?.phase || 'New'} reason={o.status?.message} />
          {o.status?.progress?.totalBytes ? ` ${bytes(o.status.progress.bytesDone ?? 0)} of ${bytes(o.status.progress.totalBytes)}` : ''}</li>
      ) : (
        <li key={byNamespace(o)} data-vm-disk={o.metadata.name}>
          VM {o.metadata.namespace}/{o.spec?.source?.name} ({o.metadata.name}): <Phase phase={vmState(o)} /> {o.status?.type ?? ''}
          {o.status?.progress?.totalBytes ? `, ${bytes(o.status.progress.totalBytes)}` : ''}</li>
      )))}
    </ul>
  );
}

// EventsOf shows the Events of the backup where the server's cluster
// keeps them (aggregated mode; a standalone server serves no core API).
export function EventsOf({ kind = 'Backup', name }) {
  const kept = useSignal(null);
  const url = `${base}/api/v1/namespaces/${encodeURIComponent(namespace)}/events?fieldSelector=${encodeURIComponent(`involvedObject.kind=${kind},involvedObject.name=${name}`)}`;
  useEffect(() => {
    const ctl = new AbortController();
    get(url, ctl.signal).then(() => { kept.value = true; }, () => { if (!ctl.signal.aborted) kept.value = false; });
    return () => ctl.abort();
  }, [url]);
  return (
    <section aria-labelledby="events-title">
      <h3 id="events-title">Events</h3>
      {kept.value === null ? <p class="muted">Reading…</p> : null}
      {kept.value === false ? <p class="muted">This server keeps no Events (a standalone server has no cluster to keep them).</p> : null}
      {kept.value ? <EventList url={url} /> : null}
    </section>
  );
}

function EventList({ url }) {
  const events = useCollection(url);
  const list = [...events.items.value.values()].sort((a, b) =>
    (a.lastTimestamp ?? a.eventTime ?? '').localeCompare(b.lastTimestamp ?? b.eventTime ?? ''));
  if (!list.length) return <p class="muted">None.</p>;
  return (
    <ul class="events" data-events={list.length}>
      {list.map((e) => (
        <li key={e.metadata.name} class={e.type === 'Warning' ? 'error' : undefined}>
          {shortTime(e.lastTimestamp ?? e.eventTime)} <strong>{e.reason}</strong>: {e.message}{e.count > 1 ? ` (${e.count} times)` : ''}
        </li>
      ))}
    </ul>
  );
}

// RestoresOf shows the restores of the kind restoreKindID made from the
// backup name.
function RestoresOf({ name, restoreKindID }) {
  const kind = restoreKinds.find((k) => k.id === restoreKindID);
  const collection = useCollection(kind.api.url(kind.resource));
  const mine = useComputed(() => [...collection.items.value.values()].filter((o) => kind.backup(o) === name).sort(newestFirst));
  return (
    <section aria-labelledby="restores-of-title">
      <h3 id="restores-of-title">Restores of this backup</h3>
      {mine.value.length ? (
        <ul>{mine.value.map((o) => <li key={o.metadata.name}>{o.metadata.name}: <Phase phase={kind.phase(o)} /> {time(kind.status(o).completionTimestamp)}</li>)}</ul>
      ) : <p class="muted">None.</p>}
    </section>
  );
}

export function BackupPage({ kindID, name }) {
  const kind = backupKinds.find((k) => k.id === kindID);
  if (!kind || !canRead(kind.api.group, kind.resource)) return <p>You may not read these backups.</p>;
  const { object: o, error, listed } = useOne(kind.api.url(kind.resource), name);
  if (error) return <p role="alert" class="error">The backup could not be read: {error.message}</p>;
  if (!o) return <p>{listed ? `There is no backup ${name}.` : 'Reading…'}</p>;
  const s = kind.status(o);
  const spec = kind.id === 'backups' ? o.spec ?? {} : o.spec?.backupSpec ?? {};
  const phase = kind.phase(o);
  const log = logURL(kind.api, kind.resource, name);
  const rows = [
    ['Phase', <Phase phase={phase} reason={s.failureReason} />],
    ['Progress', s.progress?.totalItems ? <><Progress name={name} what="backup" done={s.progress.itemsBackedUp} total={s.progress.totalItems} /> {s.progress.itemsBackedUp ?? 0} of {s.progress.totalItems} items</> : ''],
    ['Queue position', kind.queue(o) || ''],
    ['Started', time(s.startTimestamp)],
    ['Ended', time(s.completionTimestamp)],
    ['Expires', time(s.expiration)],
    ['Storage location', kind.location(o) ?? ''],
    ['Size in the location', sizeOf(s) && <span title="The resources, the log and the records as written; volume data is counted below">{sizeOf(s)}</span>],
    ['Namespaces', list(spec.includedNamespaces) || 'every namespace'],
    ['Namespaces left out', list(spec.excludedNamespaces)],
    ['Resources', list(spec.includedResources) || 'every resource'],
    ['Resources left out', list(spec.excludedResources)],
    ['Label selector', spec.labelSelector ? JSON.stringify(spec.labelSelector.matchLabels ?? spec.labelSelector) : ''],
    ['Warnings', s.warnings || 0],
    ['Errors', s.errors || 0],
    ['Volume snapshots', s.volumeSnapshotsAttempted ? `${s.volumeSnapshotsCompleted ?? 0} of ${s.volumeSnapshotsAttempted}` : ''],
    ['CSI snapshots', s.csiVolumeSnapshotsAttempted ? `${s.csiVolumeSnapshotsCompleted ?? 0} of ${s.csiVolumeSnapshotsAttempted}` : ''],
    ['Async operations', s.backupItemOperationsAttempted ?
      `${s.backupItemOperationsCompleted ?? 0} of ${s.backupItemOperationsAttempted} done, ${s.backupItemOperationsFailed ?? 0} failed` : ''],
    ['Hooks', s.hookStatus ? `${s.hookStatus.hooksAttempted ?? 0} run, ${s.hookStatus.hooksFailed ?? 0} failed` : ''],
    ['Format', s.formatVersion ?? ''],
  ];
  return (
    <article aria-labelledby="backup-title" data-backup-page={name}>
      <p><a href={href('backups')}>All backups</a></p>
      <h2 id="backup-title">Backup {name}</h2>
      <Details rows={rows} />
      <Invalid errors={s.validationErrors} />
      {kind.id === 'backups' && terminal.has(phase) && mayDownload() ? <Resources name={name} /> : null}
      {kind.id === 'backups' ? <VolumesOf uid={o.metadata.uid} /> : null}
      {kind.id === 'backups' && s.backupItemOperationsAttempted && mayDownload() ? <Operations name={name} /> : null}
      {kind.id === 'backups' && can('list', '', 'events') && can('watch', '', 'events') ? <EventsOf name={name} /> : null}
      {canRead(kind.restoreWith.api.group, kind.restoreWith.resource) ? <RestoresOf name={name} restoreKindID={kind.restoreWith.resource} /> : null}
      {log ?
        <Log url={log} name={name} what="backup"
          active={!waiting.has(phase) && !terminal.has(phase)} done={terminal.has(phase)} /> : null}
    </article>
  );
}

// A backup's page: what it holds and how it went, its restores, and its
// log once stored.
import { useSignal, useComputed } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { useCollection, newestFirst } from '../collection.js';
import { getText } from '../api.js';
import { downloadJSON } from '../download.js';
import { can, canRead } from '../context.js';
import { href } from '../route.js';
import { time, shortTime, terminal } from '../format.jsx';
import { backupKinds, Phase, Progress } from './backups.jsx';
import { restoreKinds } from './restores.jsx';

function list(v) {
  return v?.length ? v.join(', ') : '';
}

function Log({ kind, name, phase }) {
  const text = useSignal(null);
  const problem = useSignal(null);
  const url = `${kind.api.url(kind.resource)}/${encodeURIComponent(name)}/logs`;
  const done = terminal.has(phase);
  useEffect(() => {
    if (!done) return undefined;
    const ctl = new AbortController();
    getText(url, ctl.signal).then((t) => { text.value = t; problem.value = null; }, (e) => {
      if (!ctl.signal.aborted) problem.value = e.status === 404 ? 'No log is stored for this backup.' : `The log could not be read: ${e.message}`;
    });
    return () => ctl.abort();
  }, [done, url]);
  return (
    <section aria-labelledby="log-title">
      <h3 id="log-title">Log</h3>
      {!done ? <p class="muted">The log is stored when the backup ends.</p> : null}
      {problem.value ? <p class="muted">{problem.value}</p> : null}
      {text.value !== null ? (
        <>
          <p><a class="button" href={url} download={`${name}-logs.txt`}>Download the log</a></p>
          <pre class="log" tabindex="0" aria-label={`Log of backup ${name}`} data-log-lines={text.value.split('\n').filter(Boolean).length}>{text.value}</pre>
        </>
      ) : null}
    </section>
  );
}

// Resources shows the resource list a backup stored (a DownloadRequest
// for BackupResourceList), read when asked.
function Resources({ name }) {
  const list = useSignal(null);
  const state = useSignal('');
  const load = async () => {
    state.value = 'Reading…';
    try {
      const got = await downloadJSON(name, 'BackupResourceList');
      list.value = got ?? {};
      state.value = got ? '' : 'This backup stored no resource list.';
    } catch (e) {
      state.value = `The resource list could not be read: ${e.message}`;
    }
  };
  const kinds = list.value ? Object.keys(list.value).sort() : [];
  const total = kinds.reduce((n, k) => n + (list.value[k]?.length ?? 0), 0);
  return (
    <section aria-labelledby="resources-title">
      <h3 id="resources-title">Resources</h3>
      {list.value === null ? <p><button type="button" onClick={load} disabled={state.value === 'Reading…'}>Show the resource list</button></p> : null}
      {state.value ? <p class="muted" role="status">{state.value}</p> : null}
      {kinds.length ? (
        <div class="resources" data-resource-count={total}>
          <p>{total} items of {kinds.length} kinds.</p>
          {kinds.map((k) => (
            <details key={k}>
              <summary>{k} <span class="count">{list.value[k].length}</span></summary>
              <ul>{list.value[k].slice(0, 500).map((item) => <li key={item}>{item}</li>)}</ul>
              {list.value[k].length > 500 ? <p class="muted">and {list.value[k].length - 500} more</p> : null}
            </details>
          ))}
        </div>
      ) : null}
    </section>
  );
}

function RestoresOf({ name }) {
  const kind = restoreKinds.find((k) => canRead(k.api.group, k.resource));
  if (!kind) return null;
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
  const collection = useCollection(`${kind.api.url(kind.resource)}?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`);
  const o = collection.items.value.get(name);
  if (collection.error.value) return <p role="alert" class="error">The backup could not be read: {collection.error.value.message}</p>;
  if (!o) return <p>{collection.listed.value ? `There is no backup ${name}.` : 'Reading…'}</p>;
  const s = kind.status(o);
  const spec = kind.id === 'backups' ? o.spec ?? {} : o.spec?.backupSpec ?? {};
  const phase = kind.phase(o);
  const rows = [
    ['Phase', <Phase phase={phase} reason={s.failureReason} />],
    ['Progress', s.progress?.totalItems ? <><Progress name={name} what="backup" done={s.progress.itemsBackedUp} total={s.progress.totalItems} /> {s.progress.itemsBackedUp ?? 0} of {s.progress.totalItems} items</> : ''],
    ['Queue position', kind.queue(o) || ''],
    ['Started', time(s.startTimestamp)],
    ['Ended', time(s.completionTimestamp)],
    ['Expires', time(s.expiration)],
    ['Storage location', kind.location(o) ?? ''],
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
  ].filter(([, v]) => v !== '' && v !== undefined);
  return (
    <article aria-labelledby="backup-title" data-backup-page={name}>
      <p><a href={href('backups')}>All backups</a></p>
      <h2 id="backup-title">Backup {name}</h2>
      <dl class="details">
        {rows.map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{v}</dd></div>)}
      </dl>
      {s.validationErrors?.length ? (
        <section aria-labelledby="invalid-title">
          <h3 id="invalid-title">Why it is invalid</h3>
          <ul>{s.validationErrors.map((e) => <li key={e}>{e}</li>)}</ul>
        </section>
      ) : null}
      {kind.id === 'backups' && terminal.has(phase) && can('create', 'velero.io', 'downloadrequests') &&
        can('get', 'velero.io', 'downloadrequests/content') ? <Resources name={name} /> : null}
      <RestoresOf name={name} />
      {can('get', kind.api.group, `${kind.resource}/logs`) ? <Log kind={kind} name={name} phase={phase} /> : null}
    </article>
  );
}

// A restore's page: how it went, its warnings and errors (its results,
// read when asked), its log once stored, and its Events.
import { mayDownload } from '../download.js';
import { useOne, Details, Invalid, useDownloaded } from '../page.jsx';
import { can, canRead } from '../context.js';
import { href } from '../route.js';
import { time, terminal, waiting } from '../format.jsx';
import { Phase, Progress } from './backups.jsx';
import { restoreKinds } from './restores.jsx';
import { EventsOf, list } from './backup.jsx';
import { Log, logURL } from '../log.jsx';

// messages flattens a Velero restore result ({velero, cluster,
// namespaces: {ns: [...]}}) into [where, message] pairs.
function messages(result) {
  const out = [];
  for (const m of result?.velero ?? []) out.push(['Velero', m]);
  for (const m of result?.cluster ?? []) out.push(['cluster', m]);
  for (const [ns, ms] of Object.entries(result?.namespaces ?? {})) for (const m of ms ?? []) out.push([ns, m]);
  return out;
}

function Results({ name }) {
  const { data: results, note, reading, load } = useDownloaded(name, 'RestoreResults', () => false, {});
  const warnings = messages(results?.warnings);
  const errors = messages(results?.errors);
  return (
    <section aria-labelledby="results-title">
      <h3 id="results-title">Warnings and errors</h3>
      {results === null ? <p><button type="button" onClick={load} disabled={reading}>Show the warnings and errors</button></p> : null}
      {note ? <p class="muted" role="status">{note}</p> : null}
      {results !== null && !note ? (
        <div class="results" data-warnings={warnings.length} data-errors={errors.length}>
          {errors.length ? <ul>{errors.map(([where, m], i) => <li key={`e${i}`} class="error">Error ({where}): {m}</li>)}</ul> : <p>No errors.</p>}
          {warnings.length ? <ul>{warnings.map(([where, m], i) => <li key={`w${i}`}>Warning ({where}): {m}</li>)}</ul> : <p>No warnings.</p>}
        </div>
      ) : null}
    </section>
  );
}

export function RestorePage({ kindID, name }) {
  const kind = restoreKinds.find((k) => k.id === kindID);
  if (!kind || !canRead(kind.api.group, kind.resource)) return <p>You may not read these restores.</p>;
  const { object: o, error, listed } = useOne(kind.api.url(kind.resource), name);
  if (error) return <p role="alert" class="error">The restore could not be read: {error.message}</p>;
  if (!o) return <p>{listed ? `There is no restore ${name}.` : 'Reading…'}</p>;
  const s = kind.status(o);
  const spec = kind.id === 'restores' ? o.spec ?? {} : o.spec?.restoreSpec ?? {};
  const phase = kind.phase(o);
  const log = logURL(kind.api, kind.resource, name);
  const done = terminal.has(phase);
  const rows = [
    ['Phase', <Phase phase={phase} reason={s.failureReason} />],
    ['Backup', kind.backup(o) ?? ''],
    ['Progress', s.progress?.totalItems ? <><Progress name={name} what="restore" done={s.progress.itemsRestored} total={s.progress.totalItems} /> {s.progress.itemsRestored ?? 0} of {s.progress.totalItems} items</> : ''],
    ['Queue position', s.queuePosition || ''],
    ['Started', time(s.startTimestamp)],
    ['Ended', time(s.completionTimestamp)],
    ['Namespaces', list(spec.includedNamespaces) || 'every namespace of the backup'],
    ['Namespaces left out', list(spec.excludedNamespaces)],
    ['Namespaces mapped', spec.namespaceMapping ? Object.entries(spec.namespaceMapping).map(([a, b]) => `${a} → ${b}`).join(', ') : ''],
    ['Objects that exist', spec.existingResourcePolicy === 'update' ? 'updated from the backup' : 'kept as they are'],
    ['Warnings', s.warnings || 0],
    ['Errors', s.errors || 0],
    ['Async operations', s.restoreItemOperationsAttempted ?
      `${s.restoreItemOperationsCompleted ?? 0} of ${s.restoreItemOperationsAttempted} done, ${s.restoreItemOperationsFailed ?? 0} failed` : ''],
  ];
  return (
    <article aria-labelledby="restore-title" data-restore-page={name}>
      <p><a href={href('restores')}>All restores</a></p>
      <h2 id="restore-title">Restore {name}</h2>
      <Details rows={rows} />
      <Invalid errors={s.validationErrors} />
      {kind.id === 'restores' && done && (s.warnings || s.errors) && mayDownload() ? <Results name={name} /> : null}
      {log ?
        <Log url={log} name={name} what="restore"
          active={!waiting.has(phase) && !terminal.has(phase)} done={done} /> : null}
      {kind.id === 'restores' && can('list', '', 'events') && can('watch', '', 'events') ? <EventsOf kind="Restore" name={name} /> : null}
    </article>
  );
}

// A restore's page: how it went, its warnings and errors (its results,
// read when asked), its log once stored, and its Events.
import { useSignal } from '@preact/signals';
import { useCollection } from '../collection.js';
import { downloadJSON, mayDownload } from '../download.js';
import { can, canRead } from '../context.js';
import { href } from '../route.js';
import { time, terminal } from '../format.jsx';
import { Phase, Progress } from './backups.jsx';
import { restoreKinds } from './restores.jsx';
import { Log, EventsOf, list } from './backup.jsx';

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
  const results = useSignal(null);
  const note = useSignal('');
  const load = async () => {
    note.value = 'Reading…';
    try {
      const got = await downloadJSON(name, 'RestoreResults');
      results.value = got ?? {};
      note.value = got ? '' : 'This restore stored no results.';
    } catch (e) {
      note.value = `The results could not be read: ${e.message}`;
    }
  };
  const warnings = messages(results.value?.warnings);
  const errors = messages(results.value?.errors);
  return (
    <section aria-labelledby="results-title">
      <h3 id="results-title">Warnings and errors</h3>
      {results.value === null ? <p><button type="button" onClick={load} disabled={note.value === 'Reading…'}>Show the warnings and errors</button></p> : null}
      {note.value ? <p class="muted" role="status">{note.value}</p> : null}
      {results.value !== null && !note.value ? (
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
  const collection = useCollection(`${kind.api.url(kind.resource)}?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`);
  const o = collection.items.value.get(name);
  if (collection.error.value) return <p role="alert" class="error">The restore could not be read: {collection.error.value.message}</p>;
  if (!o) return <p>{collection.listed.value ? `There is no restore ${name}.` : 'Reading…'}</p>;
  const s = kind.status(o);
  const spec = kind.id === 'restores' ? o.spec ?? {} : o.spec?.restoreSpec ?? {};
  const phase = kind.phase(o);
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
  ].filter(([, v]) => v !== '' && v !== undefined);
  return (
    <article aria-labelledby="restore-title" data-restore-page={name}>
      <p><a href={href('restores')}>All restores</a></p>
      <h2 id="restore-title">Restore {name}</h2>
      <dl class="details">
        {rows.map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{v}</dd></div>)}
      </dl>
      {s.validationErrors?.length ? (
        <section aria-labelledby="invalid-title">
          <h3 id="invalid-title">Why it is invalid</h3>
          <ul>{s.validationErrors.map((e) => <li key={e}>{e}</li>)}</ul>
        </section>
      ) : null}
      {kind.id === 'restores' && done && (s.warnings || s.errors) && mayDownload() ? <Results name={name} /> : null}
      {can('get', kind.api.group, `${kind.resource}/logs`) ?
        <Log url={`${kind.api.url(kind.resource)}/${encodeURIComponent(name)}/logs`} name={name} what="restore" done={done} /> : null}
      {kind.id === 'restores' && can('list', '', 'events') && can('watch', '', 'events') ? <EventsOf kind="Restore" name={name} /> : null}
    </article>
  );
}

// The restores view: Velero's Restores and the tenants' NonAdminRestores,
// and the form that creates one from a backup.
import { useSignal } from '@preact/signals';
import { useCollection, newestFirst } from '../collection.js';
import { Section } from '../table.jsx';
import { post } from '../api.js';
import { velero, oadp, namespace, can, canRead } from '../context.js';
import { go, href } from '../route.js';
import { shortTime, terminal, stamp } from '../format.jsx';
import { Phase, Progress } from './backups.jsx';

export const restoreKinds = [
  {
    id: 'restores',
    title: 'Restores',
    api: velero,
    resource: 'restores',
    backup: (o) => o.spec?.backupName,
    phase: (o) => o.status?.phase || 'New',
    status: (o) => o.status ?? {},
    // The restore of a backup as this kind writes it.
    create: (backup, name, form) => ({
      apiVersion: 'velero.io/v1', kind: 'Restore', metadata: { name },
      spec: {
        backupName: backup,
        ...(form.namespaces.length ? { includedNamespaces: form.namespaces } : {}),
        ...(form.existing ? { existingResourcePolicy: form.existing } : {}),
      },
    }),
  },
  {
    id: 'nonadminrestores',
    title: 'Restores of this namespace (NonAdminRestores)',
    api: oadp,
    resource: 'nonadminrestores',
    backup: (o) => o.spec?.restoreSpec?.backupName,
    phase: (o) => o.status?.veleroRestore?.status?.phase || o.status?.phase || 'New',
    status: (o) => o.status?.veleroRestore?.status ?? {},
    create: (backup, name, form) => ({
      apiVersion: 'oadp.openshift.io/v1alpha1', kind: 'NonAdminRestore', metadata: { name },
      spec: { restoreSpec: { backupName: backup, ...(form.existing ? { existingResourcePolicy: form.existing } : {}) } },
    }),
  },
];

function restoreColumns(kind) {
  return [
    { title: 'Name', cell: (o) => <a href={href(kind.id, o.metadata.name)}>{o.metadata.name}</a> },
    { title: 'Backup', cell: (o) => kind.backup(o) ?? '' },
    { title: 'Phase', cell: (o) => <Phase phase={kind.phase(o)} reason={kind.status(o).failureReason} /> },
    { title: 'Progress', cell: (o) => <Progress name={o.metadata.name} what="restore" done={kind.status(o).progress?.itemsRestored} total={kind.status(o).progress?.totalItems} /> },
    { title: 'Items', num: true, cell: (o) => kind.status(o).progress?.itemsRestored ?? '' },
    { title: 'Warnings', num: true, cell: (o) => kind.status(o).warnings || '' },
    { title: 'Errors', num: true, cell: (o) => kind.status(o).errors || '' },
    { title: 'Started', cell: (o) => shortTime(kind.status(o).startTimestamp) },
    { title: 'Ended', cell: (o) => shortTime(kind.status(o).completionTimestamp) },
    {
      title: 'Actions', hidden: true,
      cell: (o) => (terminal.has(kind.phase(o)) && can('get', kind.api.group, `${kind.resource}/logs`) ?
        <a class="button" href={`${kind.api.url(kind.resource)}/${encodeURIComponent(o.metadata.name)}/logs`} download={`${o.metadata.name}-logs.txt`}
          aria-label={`Download the log of restore ${o.metadata.name}`}>Log</a> : null),
    },
  ];
}

function RestoreSection({ kind }) {
  const collection = useCollection(kind.api.url(kind.resource));
  return <Section id={kind.id} title={kind.title} collection={collection} columns={restoreColumns(kind)} order={newestFirst} mark={`console:${kind.id}:listed`} />;
}

export function RestoresView() {
  const shown = restoreKinds.filter((k) => canRead(k.api.group, k.resource));
  if (!shown.length) return <p>You may not read restores here.</p>;
  return shown.map((k) => <RestoreSection key={k.id} kind={k} />);
}

// RestoreForm creates a restore of backup, of the kind kindID names: a
// Velero Restore of a Backup, a NonAdminRestore of a NonAdminBackup.
export function RestoreForm({ kindID, backup }) {
  const kind = restoreKinds.find((k) => k.id === kindID && can('create', k.api.group, k.resource));
  const name = useSignal(`${backup}-${stamp(new Date())}`);
  const namespaces = useSignal('');
  const existing = useSignal('');
  const error = useSignal(null);
  const busy = useSignal(false);
  if (!kind) return <p>You may not create restores here.</p>;
  const submit = async (e) => {
    e.preventDefault();
    busy.value = true;
    error.value = null;
    try {
      const form = { namespaces: namespaces.value.split(/[\s,]+/).filter(Boolean), existing: existing.value };
      await post(kind.api.url(kind.resource), kind.create(backup, name.value.trim(), form));
      go('restores');
    } catch (err) {
      error.value = `Creating the restore: ${err.message}`;
    } finally {
      busy.value = false;
    }
  };
  return (
    <section aria-labelledby="restore-form-title">
      <h2 id="restore-form-title">Restore backup {backup}</h2>
      <form class="form" onSubmit={submit}>
        {error.value ? <p role="alert" class="error">{error.value}</p> : null}
        <label for="restore-name">Name of the restore</label>
        <input id="restore-name" name="name" required value={name.value} onInput={(e) => { name.value = e.currentTarget.value; }} />
        {kind.id === 'restores' ? (
          <>
            <label for="restore-namespaces">Namespaces to restore (blank: every namespace of the backup)</label>
            <input id="restore-namespaces" name="namespaces" value={namespaces.value} placeholder="app, web"
              onInput={(e) => { namespaces.value = e.currentTarget.value; }} />
          </>
        ) : <p class="muted">Restored into {namespace}.</p>}
        <label for="restore-existing">Objects that already exist</label>
        <select id="restore-existing" name="existing" value={existing.value} onChange={(e) => { existing.value = e.currentTarget.value; }}>
          <option value="">Keep them as they are</option>
          <option value="update">Update them from the backup</option>
        </select>
        <div class="buttons">
          <button type="submit" disabled={busy.value}>Restore</button>
          <a class="button" href="#/backups">Back</a>
        </div>
      </form>
    </section>
  );
}

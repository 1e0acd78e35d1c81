// The backups view: Velero's Backups and the tenants' NonAdminBackups,
// live, with their actions as the user's rights allow.
import { useCollection, newestFirst } from '../collection.js';
import { Section, useAction, Confirm } from '../table.jsx';
import { post, patch } from '../api.js';
import { velero, oadp, can, canRead } from '../context.js';
import { href } from '../route.js';
import { time, shortTime, bytes, terminal } from '../format.jsx';

// The kinds of backups, each read through the same columns.
export const backupKinds = [
  {
    id: 'backups',
    title: 'Backups',
    api: velero,
    resource: 'backups',
    phase: (o) => o.status?.phase || 'New',
    status: (o) => o.status ?? {},
    queue: (o) => o.status?.queuePosition,
    location: (o) => o.spec?.storageLocation,
    cancelled: (o) => o.spec?.cancel,
    restoreWith: { api: velero, resource: 'restores' },
    remove: (name) => post(velero.url('deletebackuprequests'), {
      apiVersion: 'velero.io/v1', kind: 'DeleteBackupRequest', metadata: { generateName: `${name}-` }, spec: { backupName: name },
    }),
    mayRemove: () => can('create', 'velero.io', 'deletebackuprequests'),
  },
  {
    id: 'nonadminbackups',
    title: 'Backups of this namespace (NonAdminBackups)',
    api: oadp,
    resource: 'nonadminbackups',
    phase: (o) => o.status?.veleroBackup?.status?.phase || o.status?.phase || 'New',
    status: (o) => o.status?.veleroBackup?.status ?? {},
    queue: (o) => o.status?.queueInfo?.estimatedQueuePosition,
    location: (o) => o.spec?.backupSpec?.storageLocation,
    // A NonAdminBackup's cancel marks its Velero backup.
    cancelled: (o) => o.status?.veleroBackup?.spec?.cancel || !o.status?.veleroBackup,
    restoreWith: { api: oadp, resource: 'nonadminrestores' },
    remove: (name) => patch(`${oadp.url('nonadminbackups')}/${encodeURIComponent(name)}`, { spec: { deleteBackup: true } }),
    mayRemove: () => can('patch', 'oadp.openshift.io', 'nonadminbackups'),
  },
];

export function Progress({ name, done, total, what }) {
  if (!total) return null;
  const label = `${done ?? 0} of ${total} items`;
  return <progress max={total} value={done ?? 0} aria-label={`Progress of ${what} ${name}: ${label}`} title={label} />;
}

export function Phase({ phase, reason }) {
  return (
    <span class={`phase phase-${phase}`} data-phase={phase}>
      {phase}{reason ? <span class="reason">: {reason}</span> : null}
    </span>
  );
}

function BackupActions({ kind, o, run }) {
  const name = o.metadata.name;
  const phase = kind.phase(o);
  const done = terminal.has(phase);
  const out = [];
  if (!done && !kind.cancelled(o) && can('create', kind.api.group, `${kind.resource}/cancel`)) {
    out.push(<button type="button" onClick={() => run(`Cancelling ${name}`, () => post(`${kind.api.url(kind.resource)}/${encodeURIComponent(name)}/cancel`, {}))}
      aria-label={`Cancel backup ${name}`}>Cancel</button>);
  }
  if ((phase === 'Completed' || phase === 'PartiallyFailed') && can('create', kind.restoreWith.api.group, kind.restoreWith.resource)) {
    out.push(<a class="button" href={href(`new-${kind.restoreWith.resource}`, name)} aria-label={`Restore backup ${name}`}>Restore</a>);
  }
  if (done && can('get', kind.api.group, `${kind.resource}/logs`)) {
    out.push(<a class="button" href={`${kind.api.url(kind.resource)}/${encodeURIComponent(name)}/logs`} download={`${name}-logs.txt`}
      aria-label={`Download the log of backup ${name}`}>Log</a>);
  }
  if (done && kind.mayRemove()) {
    out.push(<Confirm label="Delete" what={`backup ${name}`} onConfirm={() => run(`Deleting ${name}`, () => kind.remove(name))} />);
  }
  return <span class="actions">{out}</span>;
}

// sizeOf is what a backup's objects hold in its location (status.sizeBytes,
// written when it completes), blank until then.
export function sizeOf(s) {
  return s.sizeBytes ? bytes(Number(s.sizeBytes)) : '';
}

function backupColumns(kind, run) {
  return [
    { title: 'Name', cell: (o) => <a href={href(kind.id, o.metadata.name)}>{o.metadata.name}</a> },
    { title: 'Phase', cell: (o) => <Phase phase={kind.phase(o)} reason={kind.status(o).failureReason} /> },
    { title: 'Progress', cell: (o) => <Progress name={o.metadata.name} what="backup" done={kind.status(o).progress?.itemsBackedUp} total={kind.status(o).progress?.totalItems} /> },
    { title: 'Queue', num: true, cell: (o) => kind.queue(o) || '' },
    { title: 'Items', num: true, cell: (o) => kind.status(o).progress?.itemsBackedUp ?? '' },
    { title: 'Size', num: true, cell: (o) => sizeOf(kind.status(o)) },
    { title: 'Warnings', num: true, cell: (o) => kind.status(o).warnings || '' },
    { title: 'Errors', num: true, cell: (o) => kind.status(o).errors || '' },
    { title: 'Started', cell: (o) => shortTime(kind.status(o).startTimestamp) },
    { title: 'Ended', cell: (o) => shortTime(kind.status(o).completionTimestamp) },
    { title: 'Location', cell: (o) => kind.location(o) ?? '' },
    { title: 'Expires', cell: (o) => shortTime(kind.status(o).expiration) },
    { title: 'Actions', hidden: true, cell: (o) => <BackupActions kind={kind} o={o} run={run} /> },
  ];
}

function BackupSection({ kind }) {
  const collection = useCollection(kind.api.url(kind.resource));
  const { error, run } = useAction();
  return (
    <Section id={kind.id} title={kind.title} collection={collection} columns={backupColumns(kind, run)} order={newestFirst}
      error={error} mark={`console:${kind.id}:listed`}>
      {can('create', kind.api.group, kind.resource) ? <p><a class="button" href={href('new-backup', kind.id)}>New backup</a></p> : null}
    </Section>
  );
}

export function BackupsView() {
  const shown = backupKinds.filter((k) => canRead(k.api.group, k.resource));
  if (!shown.length) return <p>You may not read backups here.</p>;
  return shown.map((k) => <BackupSection key={k.id} kind={k} />);
}

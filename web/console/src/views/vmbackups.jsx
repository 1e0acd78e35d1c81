// The VM backups view: KubeVirt VirtualMachineBackups of the namespace as
// chains per VM (a full backup, then the incrementals on it), and as a
// live list with Cancel.
import { useComputed } from '@preact/signals';
import { useCollection, newestFirst } from '../collection.js';
import { Section, useAction } from '../table.jsx';
import { post } from '../api.js';
import { kubevirt, can, canRead } from '../context.js';
import { time, shortTime, bytes } from '../format.jsx';
import { Phase } from './backups.jsx';

const resource = 'virtualmachinebackups';

function condition(o, type) {
  return (o.status?.conditions ?? []).find((c) => c.type === type);
}

// state reads a backup's state off its conditions, as the server's
// lifecycle table does: Failed, Complete, Running, Waiting or Pending.
export function state(o) {
  if (condition(o, 'Failed')?.status === 'True') return 'Failed';
  if (condition(o, 'Complete')?.status === 'True') return 'Complete';
  const p = condition(o, 'Progressing');
  if (!p) return 'Pending';
  return p.status === 'True' ? 'Running' : 'Waiting';
}

const ended = new Set(['Complete', 'Failed']);

function source(o) {
  const s = o.spec?.source ?? {};
  return `${s.kind === 'VirtualMachineBackupTracker' ? 'tracker ' : ''}${s.name ?? ''}`;
}

function size(o) {
  const p = o.status?.progress;
  return p?.totalBytes ? bytes(p.totalBytes) : '';
}

// chains groups the completed backups by source, each chain a full backup
// (or an incremental whose parent is gone) followed by the incrementals
// built on it, link by link: an incremental's parent is the backup whose
// checkpoint it holds the changes since (status.parentCheckpointName).
// Backups that did not complete are in the list only.
export function chains(list) {
  const complete = [...list].filter((o) => state(o) === 'Complete').sort((a, b) => -newestFirst(a, b));
  const byCheckpoint = new Map(complete.filter((o) => o.status?.checkpointName).map((o) => [o.status.checkpointName, o]));
  const children = new Map();
  const roots = [];
  for (const o of complete) {
    const parent = byCheckpoint.get(o.status?.parentCheckpointName ?? '');
    if (parent && parent !== o) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(o);
    } else {
      roots.push(o);
    }
  }
  const bySource = new Map();
  while (roots.length) {
    const root = roots.shift();
    const chain = [root];
    for (let next = children.get(root); next?.length;) {
      const [first, ...others] = next;
      roots.push(...others); // a second incremental on one parent: a chain of its own
      chain.push(first);
      next = children.get(first);
    }
    const key = source(root);
    if (!bySource.has(key)) bySource.set(key, { source: key, chains: [] });
    bySource.get(key).chains.push(chain);
  }
  return [...bySource.values()].sort((a, b) => a.source.localeCompare(b.source));
}

function Link({ o }) {
  const type = o.status?.type ?? o.status?.backupType ?? '';
  return (
    <li class={`link link-${type}`} data-vmbackup={o.metadata.name} data-type={type}>
      <strong>{o.metadata.name}</strong>
      <span>{type === 'Incremental' ? 'Incremental' : 'Full'}{size(o) ? `, ${size(o)}` : ''}</span>
      <span class="muted">{time(o.metadata.creationTimestamp)}</span>
    </li>
  );
}

function Chains({ items }) {
  const all = useComputed(() => chains(items.value.values()));
  if (!all.value.length) return null;
  return (
    <div class="chains">
      {all.value.map((e) => (
        <section key={e.source} aria-label={`Backup chains of ${e.source}`} data-source={e.source}>
          <h3>{e.source}</h3>
          {e.chains.map((c) => (
            <ol key={c[0].metadata.name} class="chain" aria-label={`Chain from ${c[0].metadata.name}, ${c.length} backups`} data-chain={c.map((o) => o.metadata.name).join(',')}>
              {c.map((o) => <Link key={o.metadata.name} o={o} />)}
            </ol>
          ))}
        </section>
      ))}
    </div>
  );
}

export function VMBackupsView() {
  if (!canRead(kubevirt.group, resource)) return <p>You may not read VM backups here.</p>;
  const collection = useCollection(kubevirt.url(resource));
  const { error, run } = useAction();
  const columns = [
    { title: 'Name', cell: (o) => o.metadata.name },
    { title: 'VM', cell: (o) => source(o) },
    { title: 'State', cell: (o) => <Phase phase={state(o)} reason={state(o) === 'Failed' ? condition(o, 'Failed')?.message : ''} /> },
    { title: 'Type', cell: (o) => o.status?.type ?? '' },
    {
      title: 'Progress',
      cell: (o) => {
        const p = o.status?.progress;
        if (!p?.totalBytes) return null;
        const label = `${bytes(p.bytesDone ?? 0)} of ${bytes(p.totalBytes)}`;
        return <progress max={p.totalBytes} value={p.bytesDone ?? 0} aria-label={`Progress of VM backup ${o.metadata.name}: ${label}`} title={label} />;
      },
    },
    { title: 'Size', num: true, cell: size },
    { title: 'Created', cell: (o) => shortTime(o.metadata.creationTimestamp) },
    {
      title: 'Actions', hidden: true,
      cell: (o) => (!ended.has(state(o)) && can('create', kubevirt.group, `${resource}/cancel`) ?
        <button type="button" aria-label={`Cancel VM backup ${o.metadata.name}`}
          onClick={() => run(`Cancelling ${o.metadata.name}`, () => post(`${kubevirt.url(resource)}/${encodeURIComponent(o.metadata.name)}/cancel`, {}))}>Cancel</button> : null),
    },
  ];
  return (
    <Section id={resource} title="VM backups" collection={collection} columns={columns} order={newestFirst} error={error} mark={`console:${resource}:listed`}>
      <Chains items={collection.items} />
    </Section>
  );
}

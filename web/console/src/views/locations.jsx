// The storage locations view: Velero's BackupStorageLocations and the
// tenants' NonAdminBackupStorageLocations, with their availability.
import { useCollection } from '../collection.js';
import { Section } from '../table.jsx';
import { velero, oadp, canRead } from '../context.js';
import { time, shortTime, bytes } from '../format.jsx';
import { Phase } from './backups.jsx';

const locationKinds = [
  {
    id: 'backupstoragelocations',
    title: 'Storage locations',
    api: velero,
    resource: 'backupstoragelocations',
    spec: (o) => o.spec ?? {},
    status: (o) => o.status ?? {},
  },
  {
    id: 'nonadminbackupstoragelocations',
    title: 'Storage locations of this namespace (NonAdminBackupStorageLocations)',
    api: oadp,
    resource: 'nonadminbackupstoragelocations',
    spec: (o) => o.spec?.backupStorageLocationSpec ?? {},
    status: (o) => o.status?.veleroBackupStorageLocation?.status ?? {},
  },
];

function where(spec) {
  const os = spec.objectStorage ?? {};
  return [os.bucket, os.prefix].filter(Boolean).join('/');
}

// UsageChart draws the space a location's objects took over time, as the
// server measured it (status.usage).
function UsageChart({ name, usage }) {
  if (!usage?.length) return null;
  const width = 420;
  const height = 120;
  const pad = { left: 64, right: 8, top: 8, bottom: 22 };
  const times = usage.map((u) => new Date(u.time).getTime());
  const values = usage.map((u) => Number(u.bytes ?? 0));
  const t0 = times[0];
  const t1 = Math.max(times[times.length - 1], t0 + 1);
  const max = Math.max(...values, 1);
  const x = (t) => pad.left + ((t - t0) / (t1 - t0)) * (width - pad.left - pad.right);
  const y = (v) => height - pad.bottom - (v / max) * (height - pad.top - pad.bottom);
  const points = usage.map((_, i) => `${x(times[i]).toFixed(1)},${y(values[i]).toFixed(1)}`).join(' ');
  const last = values[values.length - 1];
  const label = `Space used by ${name}: ${bytes(last)} at ${time(usage[usage.length - 1].time)}, ${bytes(values[0])} at ${time(usage[0].time)}, at most ${bytes(max)}; ${usage.length} measures`;
  return (
    <figure class="usage" data-location={name} data-samples={usage.length} data-min-bytes={Math.min(...values)} data-max-bytes={Math.max(...values)}>
      <figcaption><strong>{name}</strong> {bytes(last)} in {usage[usage.length - 1].objects ?? 0} objects</figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={label}>
        <line x1={pad.left} x2={width - pad.right} y1={y(0)} y2={y(0)} class="grid" />
        <line x1={pad.left} x2={width - pad.right} y1={y(max)} y2={y(max)} class="grid" />
        <text x={pad.left - 6} y={y(max) + 4} text-anchor="end" class="axis">{bytes(max)}</text>
        <text x={pad.left - 6} y={y(0) + 4} text-anchor="end" class="axis">0</text>
        <text x={pad.left} y={height - 6} class="axis">{time(usage[0].time)}</text>
        <text x={width - pad.right} y={height - 6} text-anchor="end" class="axis">{time(usage[usage.length - 1].time)}</text>
        {usage.length > 1 ? <polyline points={points} class="line" /> : <circle cx={x(times[0])} cy={y(values[0])} r={3} class="dot" />}
      </svg>
    </figure>
  );
}

function LocationSection({ kind }) {
  const collection = useCollection(kind.api.url(kind.resource));
  const columns = [
    { title: 'Name', cell: (o) => o.metadata.name },
    { title: 'Phase', cell: (o) => <Phase phase={kind.status(o).phase || 'Unknown'} /> },
    { title: 'Provider', cell: (o) => kind.spec(o).provider ?? '' },
    { title: 'Bucket', cell: (o) => <span class="clip" title={where(kind.spec(o))}>{where(kind.spec(o))}</span> },
    { title: 'Default', cell: (o) => (kind.spec(o).default ? 'Default' : '') },
    { title: 'Access', cell: (o) => kind.spec(o).accessMode ?? 'ReadWrite' },
    { title: 'Used', num: true, cell: (o) => { const u = kind.status(o).usage; return u?.length ? bytes(u[u.length - 1].bytes ?? 0) : ''; } },
    { title: 'Checked', cell: (o) => shortTime(kind.status(o).lastValidationTime) },
    { title: 'Message', cell: (o) => <span class="clip" title={kind.status(o).message}>{kind.status(o).message ?? ''}</span> },
  ];
  const charts = [...collection.items.value.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
    .filter((o) => kind.status(o).usage?.length);
  return (
    <Section id={kind.id} title={kind.title} collection={collection} columns={columns}
      order={(a, b) => a.metadata.name.localeCompare(b.metadata.name)} mark={`console:${kind.id}:listed`}>
      {charts.length ? (
        <div class="charts">{charts.map((o) => <UsageChart key={o.metadata.name} name={o.metadata.name} usage={kind.status(o).usage} />)}</div>
      ) : null}
    </Section>
  );
}

export function LocationsView() {
  const shown = locationKinds.filter((k) => canRead(k.api.group, k.resource));
  if (!shown.length) return <p>You may not read storage locations here.</p>;
  return shown.map((k) => <LocationSection key={k.id} kind={k} />);
}

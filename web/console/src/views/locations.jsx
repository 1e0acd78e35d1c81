// The storage locations view: Velero's BackupStorageLocations and the
// tenants' NonAdminBackupStorageLocations, with their availability.
import { useCollection } from '../collection.js';
import { Section } from '../table.jsx';
import { velero, oadp, canRead } from '../context.js';
import { time } from '../format.js';
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

function LocationSection({ kind }) {
  const collection = useCollection(kind.api.url(kind.resource));
  const columns = [
    { title: 'Name', cell: (o) => o.metadata.name },
    { title: 'Phase', cell: (o) => <Phase phase={kind.status(o).phase || 'Unknown'} /> },
    { title: 'Provider', cell: (o) => kind.spec(o).provider ?? '' },
    { title: 'Bucket', cell: (o) => <span class="clip" title={where(kind.spec(o))}>{where(kind.spec(o))}</span> },
    { title: 'Default', cell: (o) => (kind.spec(o).default ? 'Default' : '') },
    { title: 'Access', cell: (o) => kind.spec(o).accessMode ?? 'ReadWrite' },
    { title: 'Checked', cell: (o) => time(kind.status(o).lastValidationTime) },
    { title: 'Message', cell: (o) => <span class="clip" title={kind.status(o).message}>{kind.status(o).message ?? ''}</span> },
  ];
  return <Section id={kind.id} title={kind.title} collection={collection} columns={columns}
    order={(a, b) => a.metadata.name.localeCompare(b.metadata.name)} mark={`console:${kind.id}:listed`} />;
}

export function LocationsView() {
  const shown = locationKinds.filter((k) => canRead(k.api.group, k.resource));
  if (!shown.length) return <p>You may not read storage locations here.</p>;
  return shown.map((k) => <LocationSection key={k.id} kind={k} />);
}

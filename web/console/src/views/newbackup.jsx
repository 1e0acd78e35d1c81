// The form that creates a backup: a Velero Backup of the namespaces the
// user picks, or a tenant's NonAdminBackup of its own namespace.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { get, post } from '../api.js';
import { base, namespace, velero, oadp, can } from '../context.js';
import { go } from '../route.js';
import { stamp } from '../format.jsx';
import { backupKinds } from './backups.jsx';

// useNames lists the names of a collection the user may list ([] when not,
// or when the server has none: a standalone server has no namespaces).
function useNames(url, allowed) {
  const names = useSignal([]);
  useEffect(() => {
    if (!allowed) return undefined;
    const ctl = new AbortController();
    get(url, ctl.signal).then((l) => { names.value = (l.items ?? []).map((o) => o.metadata.name).sort(); }, () => {});
    return () => ctl.abort();
  }, [url, allowed]);
  return names;
}

export function NewBackupForm({ kindID }) {
  const kind = backupKinds.find((k) => k.id === kindID) ?? backupKinds.find((k) => can('create', k.api.group, k.resource));
  const admin = kind?.id === 'backups';
  const name = useSignal(`backup-${stamp(new Date())}`);
  const picked = useSignal(new Set());
  const typed = useSignal('');
  const location = useSignal('');
  const ttl = useSignal('');
  const error = useSignal(null);
  const busy = useSignal(false);
  const namespaces = useNames(`${base}/api/v1/namespaces`, admin && can('list', '', 'namespaces'));
  const locations = useNames(admin ? velero.url('backupstoragelocations') : oadp.url('nonadminbackupstoragelocations'),
    admin ? can('list', 'velero.io', 'backupstoragelocations') : can('list', 'oadp.openshift.io', 'nonadminbackupstoragelocations'));
  if (!kind || !can('create', kind.api.group, kind.resource)) return <p>You may not create backups here.</p>;
  const toggle = (ns) => {
    const next = new Set(picked.value);
    if (next.has(ns)) next.delete(ns);
    else next.add(ns);
    picked.value = next;
  };
  const submit = async (e) => {
    e.preventDefault();
    busy.value = true;
    error.value = null;
    const spec = {
      ...(location.value ? { storageLocation: location.value } : {}),
      ...(ttl.value.trim() ? { ttl: ttl.value.trim() } : {}),
    };
    const included = [...picked.value, ...typed.value.split(/[\s,]+/).filter(Boolean)];
    const body = admin ?
      { apiVersion: 'velero.io/v1', kind: 'Backup', metadata: { name: name.value.trim() }, spec: { ...spec, ...(included.length ? { includedNamespaces: included } : {}) } } :
      { apiVersion: 'oadp.openshift.io/v1alpha1', kind: 'NonAdminBackup', metadata: { name: name.value.trim() }, spec: { backupSpec: spec } };
    try {
      const created = await post(kind.api.url(kind.resource), body);
      go(kind.id, created.metadata.name);
    } catch (err) {
      error.value = `Creating the backup: ${err.message}`;
    } finally {
      busy.value = false;
    }
  };
  return (
    <section aria-labelledby="backup-form-title">
      <h2 id="backup-form-title">New backup</h2>
      <form class="form" onSubmit={submit}>
        {error.value ? <p role="alert" class="error">{error.value}</p> : null}
        <label for="backup-name">Name</label>
        <input id="backup-name" name="name" required value={name.value} onInput={(e) => { name.value = e.currentTarget.value; }} />
        {admin ? (
          <fieldset>
            <legend>Namespaces (none picked: every namespace)</legend>
            {namespaces.value.map((ns) => (
              <label key={ns} class="check"><input type="checkbox" checked={picked.value.has(ns)} onChange={() => toggle(ns)} /> {ns}</label>
            ))}
            <label for="backup-namespaces">{namespaces.value.length ? 'Others' : 'Names'}, separated by commas</label>
            <input id="backup-namespaces" name="namespaces" value={typed.value} onInput={(e) => { typed.value = e.currentTarget.value; }} />
          </fieldset>
        ) : <p class="muted">Backs up {namespace}.</p>}
        <label for="backup-location">Storage location</label>
        <select id="backup-location" name="location" value={location.value} onChange={(e) => { location.value = e.currentTarget.value; }}>
          <option value="">The default location</option>
          {locations.value.map((l) => <option key={l} value={l}>{l}</option>)}
        </select>
        <label for="backup-ttl">Keep for (a duration such as 720h; blank: the server's default)</label>
        <input id="backup-ttl" name="ttl" value={ttl.value} placeholder="720h" onInput={(e) => { ttl.value = e.currentTarget.value; }} />
        <div class="buttons">
          <button type="submit" disabled={busy.value}>Back up</button>
          <a class="button" href="#/backups">Back</a>
        </div>
      </form>
    </section>
  );
}

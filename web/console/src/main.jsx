// Backstop's web console: a single-page app over the API, as its user.
// Its views (route.js) show what the user's rights (rights.js) let them
// read, and offer what they let them do.
import { render } from 'preact';
import { signal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { rulesFor } from './rights.js';
import { base, namespace, rules, canRead } from './context.js';
import { route, href } from './route.js';
import { BackupsView } from './views/backups.jsx';
import { BackupPage } from './views/backup.jsx';
import { NewBackupForm } from './views/newbackup.jsx';
import { RestoresView, RestoreForm } from './views/restores.jsx';
import { RestorePage } from './views/restore.jsx';
import { SchedulesView } from './views/schedules.jsx';
import { LocationsView } from './views/locations.jsx';
import { VMBackupsView } from './views/vmbackups.jsx';

const rulesError = signal(null);

// The views of the navigation, each shown when the user may read one of
// its kinds.
const views = [
  { id: 'backups', title: 'Backups', kinds: [['velero.io', 'backups'], ['oadp.openshift.io', 'nonadminbackups']], View: BackupsView },
  { id: 'restores', title: 'Restores', kinds: [['velero.io', 'restores'], ['oadp.openshift.io', 'nonadminrestores']], View: RestoresView },
  { id: 'schedules', title: 'Schedules', kinds: [['velero.io', 'schedules'], ['oadp.openshift.io', 'nonadminschedules']], View: SchedulesView },
  { id: 'vmbackups', title: 'VM backups', kinds: [['backup.kubevirt.io', 'virtualmachinebackups']], View: VMBackupsView },
  { id: 'locations', title: 'Storage locations', kinds: [['velero.io', 'backupstoragelocations'], ['oadp.openshift.io', 'nonadminbackupstoragelocations']], View: LocationsView },
];

function current() {
  const { view, name } = route.value;
  switch (view) {
    case 'backups':
    case 'nonadminbackups':
      if (name) return { id: 'backups', page: <BackupPage key={`${view}/${name}`} kindID={view} name={name} /> };
      break;
    case 'restores':
    case 'nonadminrestores':
      if (name) return { id: 'restores', page: <RestorePage key={`${view}/${name}`} kindID={view} name={name} /> };
      break;
    case 'new-backup':
      return { id: 'backups', page: <NewBackupForm key={name} kindID={name} /> };
    case 'new-restores':
    case 'new-nonadminrestores':
      return { id: 'restores', page: <RestoreForm key={`${view}/${name}`} kindID={view.slice('new-'.length)} backup={name} /> };
    default:
  }
  const shown = views.filter((v) => v.kinds.some(([g, r]) => canRead(g, r)));
  const v = shown.find((x) => x.id === view) ?? shown[0];
  return v ? { id: v.id, page: <v.View key={v.id} /> } : { id: '', page: <p>You may not read backups in {namespace}.</p> };
}

function Nav({ active }) {
  const shown = views.filter((v) => v.kinds.some(([g, r]) => canRead(g, r)));
  return (
    <nav aria-label="Views">
      <ul>
        {shown.map((v) => (
          <li key={v.id}><a href={href(v.id)} aria-current={v.id === active ? 'page' : undefined}>{v.title}</a></li>
        ))}
      </ul>
    </nav>
  );
}

function App() {
  useEffect(() => {
    rulesFor(base, namespace).then((r) => { rules.value = r; }, (e) => { rulesError.value = e; });
  }, []);
  let body;
  let active = '';
  if (rulesError.value) body = <p role="alert" class="error">Your rights in {namespace} could not be read: {rulesError.value.message}</p>;
  else if (!rules.value) body = <p>Reading your rights…</p>;
  else ({ id: active, page: body } = current());
  return (
    <>
      <header>
        <h1>Backstop</h1>
        <p>Namespace <strong>{namespace}</strong></p>
        {rules.value ? <Nav active={active} /> : null}
      </header>
      <main>{body}</main>
    </>
  );
}

const root = document.getElementById('app');
root.textContent = ''; // the page's "Loading" line
render(<App />, root);

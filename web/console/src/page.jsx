// Parts of an object's page: the object read live by name, its fields as
// a list of terms, why it is invalid, and a file of it read when asked.
import { useSignal } from '@preact/signals';
import { useCollection } from './collection.js';
import { downloadJSON } from './download.js';

// useOne keeps the object name of the collection at url live.
export function useOne(url, name) {
  const c = useCollection(`${url}?fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`);
  return { object: c.items.value.get(name), error: c.error.value, listed: c.listed.value };
}

// Details lists rows of [term, value], those without a value left out.
export function Details({ rows }) {
  return (
    <dl class="details">
      {rows.filter(([, v]) => v !== '' && v !== undefined).map(([k, v]) => <div key={k}><dt>{k}</dt><dd>{v}</dd></div>)}
    </dl>
  );
}

// Invalid lists an object's validation errors, if any.
export function Invalid({ errors }) {
  if (!errors?.length) return null;
  return (
    <section aria-labelledby="invalid-title">
      <h3 id="invalid-title">Why it is invalid</h3>
      <ul>{errors.map((e) => <li key={e}>{e}</li>)}</ul>
    </section>
  );
}

// useDownloaded reads a file of a backup or restore (a DownloadRequest of
// kind) when load is called: data is null until read, note says what
// happens (reading, nothing stored, an error), empty saying none.
export function useDownloaded(name, kind, empty, nothing) {
  const data = useSignal(null);
  const note = useSignal('');
  const load = async () => {
    note.value = 'Reading…';
    try {
      const got = await downloadJSON(name, kind);
      data.value = got ?? nothing;
      note.value = got && !empty(got) ? '' : `Nothing of this is stored (${kind}).`;
    } catch (e) {
      note.value = `This could not be read: ${e.message}`;
    }
  };
  return { data: data.value, note: note.value, reading: note.value === 'Reading…', load };
}

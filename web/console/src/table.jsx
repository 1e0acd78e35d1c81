// A table of a live collection whose rows are drawn as the page scrolls
// to them: a namespace of 10,000 backups opens as fast as one of ten.
// Every row is rowHeight pixels high (app.css); the rows above and below
// the window are spacers.
import { signal, useSignal, useComputed } from '@preact/signals';
import { useEffect, useLayoutEffect, useRef } from 'preact/hooks';

const rowHeight = 33;
const overscan = 30;

// The window's scroll position and height, updated once per frame.
const viewport = signal({ top: window.scrollY, height: window.innerHeight });
let framePending = false;
function onViewport() {
  if (framePending) return;
  framePending = true;
  requestAnimationFrame(() => {
    framePending = false;
    viewport.value = { top: window.scrollY, height: window.innerHeight };
  });
}
window.addEventListener('scroll', onViewport, { passive: true });
window.addEventListener('resize', onViewport, { passive: true });

// filterAbove is how many rows a section has before it offers a filter.
const filterAbove = 10;

// matches reports whether an object's name, namespace or phase holds the
// filter's words (each, in any case).
function matches(o, words) {
  const s = o.status ?? {};
  const text = [o.metadata.name, o.metadata.namespace, s.phase, s.veleroBackup?.status?.phase, s.veleroRestore?.status?.phase]
    .filter(Boolean).join(' ').toLowerCase();
  return words.every((w) => text.includes(w));
}

// Section shows a collection (from useCollection) under a heading, as a
// windowed table of columns ({ title, cell(o), num, hidden }): rows keyed
// by name (data-name), and, past filterAbove rows, a filter by name or
// phase (rows scrolled out of the window are not in the page: the filter
// is how to find one). mark names the performance mark set after the
// frame that shows the first list (the browser tests' timing).
export function Section({ id, title, collection, columns, order, error, children, mark }) {
  const { items, listed } = collection;
  const bodyTop = useSignal(0); // the table body's top, in the page
  const body = useRef(null);
  const filter = useSignal('');
  const all = useComputed(() => [...items.value.values()].sort(order));
  const rows = useComputed(() => {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    return words.length ? all.value.filter((o) => matches(o, words)) : all.value;
  });
  useEffect(() => {
    if (listed.value && mark) requestAnimationFrame(() => setTimeout(() => performance.mark(mark, { detail: items.value.size })));
  }, [listed.value]);
  useLayoutEffect(() => {
    if (body.current) bodyTop.value = body.current.getBoundingClientRect().top + window.scrollY;
  });
  const first = useComputed(() => Math.max(0, Math.floor((viewport.value.top - bodyTop.value) / rowHeight) - overscan));
  const total = all.value.length;
  const count = rows.value.length;
  const filtered = filter.value.trim() !== '';
  // A filter that leaves fewer rows than the window was scrolled past
  // shows its last ones.
  const start = Math.min(first.value, Math.max(0, count - Math.ceil(viewport.value.height / rowHeight)));
  const last = Math.min(count, start + Math.ceil(viewport.value.height / rowHeight) + 2 * overscan);
  const titleID = `${id}-title`;
  return (
    <section aria-labelledby={titleID} data-kind={id}>
      <h2 id={titleID}>{title} <span class="count" data-count={total}>{filtered ? `${count} of ${total}` : total}</span></h2>
      {collection.error.value ? <p role="alert" class="error">These could not be read: {collection.error.value.message}</p> : null}
      {error?.value ? <p role="alert" class="error">{error.value}</p> : null}
      {children}
      {total > filterAbove || filtered ? (
        <p class="filter">
          <label for={`${id}-filter`}>Filter</label>{' '}
          <input id={`${id}-filter`} type="search" value={filter.value} placeholder="name or phase" autocomplete="off"
            aria-describedby={`${id}-filtered`} onInput={(e) => { filter.value = e.currentTarget.value; }} />{' '}
          <span id={`${id}-filtered`} class="muted" role="status" data-shown={count}>{filtered ? `${count} of ${total} shown` : ''}</span>
        </p>
      ) : null}
      <table aria-rowcount={count + 1}>
        <thead>
          <tr aria-rowindex={1}>
            {columns.map((c) => <th scope="col" key={c.title}>{c.hidden ? <span class="sr-only">{c.title}</span> : c.title}</th>)}
          </tr>
        </thead>
        <tbody ref={body}>
          {start > 0 ? <tr class="spacer" aria-hidden="true" style={{ height: `${start * rowHeight}px` }} /> : null}
          {rows.value.slice(start, last).map((o, i) => (
            <tr key={o.metadata.name} data-name={o.metadata.name} aria-rowindex={start + i + 2}>
              {columns.map((c, j) => (j === 0 ? <th scope="row" key={c.title}>{c.cell(o)}</th> :
                <td key={c.title} class={c.num ? 'num' : undefined}>{c.cell(o)}</td>))}
            </tr>
          ))}
          {last < count ? <tr class="spacer" aria-hidden="true" style={{ height: `${(count - last) * rowHeight}px` }} /> : null}
        </tbody>
      </table>
    </section>
  );
}

// useAction runs a write, showing its failure in the section (error).
export function useAction() {
  const error = useSignal(null);
  const run = async (what, fn) => {
    error.value = null;
    try {
      await fn();
    } catch (e) {
      error.value = `${what}: ${e.message}`;
    }
  };
  return { error, run };
}

// Confirm is a button that asks again before acting: a first press shows
// "Yes, <label>" and "Keep" in its place, the focus on Keep; Keep brings
// the first button back, focused.
export function Confirm({ label, what, onConfirm }) {
  const asking = useSignal(false);
  const returning = useSignal(false);
  const keep = useRef(null);
  const first = useRef(null);
  useEffect(() => {
    if (asking.value) keep.current?.focus();
    else if (returning.value) {
      returning.value = false;
      first.current?.focus();
    }
  }, [asking.value]);
  if (!asking.value) return <button type="button" ref={first} onClick={() => { asking.value = true; }} aria-label={`${label} ${what}`}>{label}</button>;
  return (
    <span class="confirm" role="group" aria-label={`${label} ${what}?`}>
      <button type="button" class="danger" onClick={() => { asking.value = false; onConfirm(); }} aria-label={`Yes, ${label.toLowerCase()} ${what}`}>Yes, {label.toLowerCase()}</button>
      <button type="button" ref={keep} onClick={() => { returning.value = true; asking.value = false; }} aria-label={`Keep ${what}`}>Keep</button>
    </span>
  );
}

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

// Section shows a collection (from useCollection) under a heading, as a
// windowed table of columns ({ title, cell(o), num, hidden }): rows keyed
// by name (data-name). mark names the performance mark set after the
// frame that shows the first list (the browser tests' timing).
export function Section({ id, title, collection, columns, order, error, children, mark }) {
  const { items, listed } = collection;
  const bodyTop = useSignal(0); // the table body's top, in the page
  const body = useRef(null);
  const rows = useComputed(() => [...items.value.values()].sort(order));
  useEffect(() => {
    if (listed.value && mark) requestAnimationFrame(() => setTimeout(() => performance.mark(mark, { detail: items.value.size })));
  }, [listed.value]);
  useLayoutEffect(() => {
    if (body.current) bodyTop.value = body.current.getBoundingClientRect().top + window.scrollY;
  });
  const first = useComputed(() => Math.max(0, Math.floor((viewport.value.top - bodyTop.value) / rowHeight) - overscan));
  const count = rows.value.length;
  const last = Math.min(count, first.value + Math.ceil(viewport.value.height / rowHeight) + 2 * overscan);
  const titleID = `${id}-title`;
  return (
    <section aria-labelledby={titleID} data-kind={id}>
      <h2 id={titleID}>{title} <span class="count" data-count={count}>{count}</span></h2>
      {collection.error.value ? <p role="alert" class="error">These could not be read: {collection.error.value.message}</p> : null}
      {error?.value ? <p role="alert" class="error">{error.value}</p> : null}
      {children}
      <table aria-rowcount={count + 1}>
        <thead>
          <tr aria-rowindex={1}>
            {columns.map((c) => <th scope="col" key={c.title}>{c.hidden ? <span class="sr-only">{c.title}</span> : c.title}</th>)}
          </tr>
        </thead>
        <tbody ref={body}>
          {first.value > 0 ? <tr class="spacer" aria-hidden="true" style={{ height: `${first.value * rowHeight}px` }} /> : null}
          {rows.value.slice(first.value, last).map((o, i) => (
            <tr key={o.metadata.name} data-name={o.metadata.name} aria-rowindex={first.value + i + 2}>
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

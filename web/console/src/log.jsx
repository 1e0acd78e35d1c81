// A backup's or restore's log on its page: followed live while its run
// goes on (the log subresource with follow=true, asked again from the
// offset reached whenever the server ends a stream), then read to its end
// from its storage location once stored.
import { useSignal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { APIError } from './api.js';
import { can } from './context.js';

// The response headers of a log (pkg/registry/resource/logs.go).
const offsetHeader = 'Backstop-Log-Offset';
const liveHeader = 'Backstop-Log-Live';

// sleep waits ms, or less when signal aborts.
const sleep = (ms, signal) => new Promise((resolve) => {
  const done = () => { clearTimeout(t); signal.removeEventListener('abort', done); resolve(); };
  const t = setTimeout(done, ms);
  signal.addEventListener('abort', done, { once: true });
});

// retried: the statuses after which a reader asks again, later (no log
// here yet; too many requests; the server or a proxy in between failing).
const retried = (status) => status === 404 || status === 429 || status >= 500;

// follow reads the log at url from its start: each piece read is given to
// onText (with whether it came from the run's live log); onGap is told of
// bytes a live log no longer kept. It ends when the stored log is read
// whole, or when no log is stored and ended() says the run is over; a
// stream broken off, or a refusal that may pass, is asked for again from
// the offset reached, after a wait that grows to 10 s.
async function follow(url, signal, { onText, onGap, ended }) {
  let offset = 0;
  let wait = 1000;
  const later = async () => {
    await sleep(wait, signal);
    wait = Math.min(wait * 2, 10000);
  };
  while (!signal.aborted) {
    let resp;
    try {
      resp = await fetch(`${url}?follow=true&offset=${offset}`, { headers: { Accept: 'text/plain' }, signal });
    } catch (e) {
      if (signal.aborted) return;
      await later(); // the network: try again
      continue;
    }
    if (!resp.ok) {
      resp.body?.cancel();
      if (resp.status === 404 && ended()) throw new APIError(404, 'no log stored');
      if (!retried(resp.status)) throw new APIError(resp.status, `${resp.status} ${resp.statusText}`);
      // 404: the run has not started, runs on another replica of the
      // server, or its log is being stored.
      await later();
      continue;
    }
    const start = Number(resp.headers.get(offsetHeader) ?? offset);
    if (start > offset) onGap(start - offset);
    offset = start;
    const live = resp.headers.get(liveHeader) === 'true';
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let whole = true;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        offset += value.length;
        onText(decoder.decode(value, { stream: true }), live);
      }
    } catch (e) {
      if (signal.aborted) return;
      whole = false; // broken off: asked for again from offset
    }
    const rest = decoder.decode();
    if (rest) onText(rest, live);
    if (!whole) {
      await later();
      continue;
    }
    wait = 1000;
    if (!live) return; // the stored log, to its end
  }
}

// logURL is the URL of an object's log the user may read: its log
// subresource (long-running in kube-apiserver, as pods/log is: a followed
// log holds none of its request seats), else logs; null for neither.
export function logURL(api, resource, name) {
  for (const sub of ['log', 'logs']) {
    if (can('get', api.group, `${resource}/${sub}`)) return `${api.url(resource)}/${encodeURIComponent(name)}/${sub}`;
  }
  return null;
}

// Log shows the log of a backup or restore (its logs subresource at url):
// nothing before its run starts, its lines as they come while it runs
// (active), the whole stored log once it ended (done).
export function Log({ url, name, what, active, done }) {
  const text = useSignal('');
  const lines = useSignal(0);
  const live = useSignal(false);
  const state = useSignal('waiting'); // waiting, reading, read, missing, failed
  const problem = useSignal(null);
  const doneRef = useRef(done);
  doneRef.current = done;
  const pre = useRef(null);
  const started = active || done;
  useEffect(() => {
    if (!started) return undefined;
    const ctl = new AbortController();
    let pending = '';
    let timer = null;
    const flush = () => {
      timer = null;
      if (ctl.signal.aborted || !pending) return;
      const el = pre.current;
      const atEnd = !el || el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      lines.value += pending.split('\n').length - 1;
      text.value += pending;
      pending = '';
      if (atEnd && el) requestAnimationFrame(() => { el.scrollTop = el.scrollHeight; });
    };
    // At most four renders a second, however fast the lines come.
    const later = () => { if (!timer) timer = setTimeout(flush, 250); };
    text.value = '';
    lines.value = 0;
    live.value = false;
    problem.value = null;
    state.value = 'reading';
    follow(url, ctl.signal, {
      onText: (t, isLive) => {
        live.value = isLive;
        pending += t;
        later();
      },
      onGap: (n) => {
        pending += `[${n} bytes of the log's start are not kept while it runs: the whole log is stored when the ${what} ends]\n`;
        later();
      },
      ended: () => doneRef.current,
    }).then(() => {
      if (ctl.signal.aborted) return;
      clearTimeout(timer);
      flush();
      live.value = false;
      state.value = 'read';
    }, (e) => {
      if (ctl.signal.aborted) return;
      clearTimeout(timer);
      flush();
      live.value = false;
      state.value = e.status === 404 ? 'missing' : 'failed';
      problem.value = e.message;
    });
    return () => { ctl.abort(); clearTimeout(timer); };
  }, [url, started]);
  return (
    <section aria-labelledby="log-title">
      <h3 id="log-title">Log</h3>
      {!started ? <p class="muted">The log starts when the {what} runs.</p> : null}
      {state.value === 'missing' ? <p class="muted">No log is stored for this {what}.</p> : null}
      {state.value === 'failed' ? <p class="muted">The log could not be read: {problem.value}</p> : null}
      {done && state.value === 'read' ? <p><a class="button" href={url} download={`${name}-logs.txt`}>Download the log</a></p> : null}
      {live.value ? <p class="muted" data-log-live>Following the {what}'s log as it runs.</p> : null}
      {text.value ? (
        <pre class="log" ref={pre} tabindex="0" aria-label={`Log of ${what} ${name}${live.value ? ', as it runs' : ''}`}
          data-log-lines={lines.value} data-log-state={state.value}>{text.value}</pre>
      ) : null}
    </section>
  );
}

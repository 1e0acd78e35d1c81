// A backup's or restore's log on its page: followed live while its run
// goes on (the logs subresource with follow=true, asked again from the
// offset reached whenever the server ends a stream), then read to its end
// from its storage location once stored.
import { useSignal } from '@preact/signals';
import { useEffect, useRef } from 'preact/hooks';
import { APIError } from './api.js';

// The response headers of a log (pkg/registry/resource/logs.go).
const offsetHeader = 'Backstop-Log-Offset';
const liveHeader = 'Backstop-Log-Live';

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// follow reads the log at url from its start: each piece read is given to
// onText (with whether it came from the run's live log); onGap is told of
// bytes a live log no longer kept. It ends when the stored log is read, or
// when no log is stored and ended() says the run is over.
async function follow(url, signal, { onText, onGap, ended }) {
  let offset = 0;
  let wait = 1000;
  while (!signal.aborted) {
    const resp = await fetch(`${url}?follow=true&offset=${offset}`, { headers: { Accept: 'text/plain' }, signal });
    if (resp.status === 404) {
      // No log here yet: the run has not started, runs on another replica
      // of the server, or ended without one.
      if (ended()) throw new APIError(404, 'no log stored');
      await sleep(wait, signal);
      wait = Math.min(wait * 2, 10000);
      continue;
    }
    if (!resp.ok) throw new APIError(resp.status, `${resp.status} ${resp.statusText}`);
    wait = 1000;
    const start = Number(resp.headers.get(offsetHeader) ?? offset);
    if (start > offset) onGap(start - offset);
    offset = start;
    const live = resp.headers.get(liveHeader) === 'true';
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      offset += value.length;
      onText(decoder.decode(value, { stream: true }), live);
    }
    if (!live) return; // the stored log, to its end
  }
}

// Log shows the log of a backup or restore (its logs subresource at url):
// nothing before its run starts, its lines as they come while it runs
// (active), the whole stored log once it ended (done).
export function Log({ url, name, what, active, done }) {
  const text = useSignal('');
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
      const el = pre.current;
      const atEnd = !el || el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      text.value += pending;
      pending = '';
      if (atEnd && el) requestAnimationFrame(() => { el.scrollTop = el.scrollHeight; });
    };
    text.value = '';
    state.value = 'reading';
    follow(url, ctl.signal, {
      onText: (t, isLive) => {
        live.value = isLive;
        pending += t;
        // At most four renders a second, however fast the lines come.
        if (!timer) timer = setTimeout(flush, 250);
      },
      onGap: (n) => {
        pending += `[${n} bytes of the log's start are not kept while it runs: the whole log is stored when the ${what} ends]\n`;
      },
      ended: () => doneRef.current,
    }).then(() => {
      if (timer) clearTimeout(timer);
      flush();
      live.value = false;
      state.value = 'read';
    }, (e) => {
      if (ctl.signal.aborted) return;
      if (timer) clearTimeout(timer);
      flush();
      live.value = false;
      state.value = e.status === 404 ? 'missing' : 'failed';
      problem.value = e.message;
    });
    return () => { ctl.abort(); if (timer) clearTimeout(timer); };
  }, [url, started]);
  const lines = text.value.split('\n').filter(Boolean).length;
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
          data-log-lines={lines} data-log-state={state.value}>{text.value}</pre>
      ) : null}
    </section>
  );
}

// useCollection keeps a live copy of a collection: listed, then watched.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { watchList } from './api.js';

export function useCollection(url) {
  const items = useSignal(new Map());
  const error = useSignal(null);
  const listed = useSignal(false);
  useEffect(() => {
    listed.value = false;
    return watchList(url, (m) => { items.value = m; listed.value = true; }, (e) => { error.value = e; });
  }, [url]);
  return { items, error, listed };
}

// newestFirst orders objects by creation, the newest first, then by name.
export function newestFirst(a, b) {
  return (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '') ||
    a.metadata.name.localeCompare(b.metadata.name);
}

// useCollection keeps a live copy of a collection: listed, then watched
// (keyed by name, or by keyOf).
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { watchList } from './api.js';

export function useCollection(url, keyOf) {
  const items = useSignal(new Map());
  const error = useSignal(null);
  const listed = useSignal(false);
  useEffect(() => {
    listed.value = false;
    return watchList(url, (m) => { items.value = m; listed.value = true; }, (e) => { error.value = e; }, keyOf);
  }, [url]);
  return { items, error, listed };
}

// newestFirst orders objects by creation, the newest first, then by name.
export function newestFirst(a, b) {
  return (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '') ||
    a.metadata.name.localeCompare(b.metadata.name);
}

// byNamespace keys the objects of a list across namespaces.
export const byNamespace = (o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

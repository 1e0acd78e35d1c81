// The console's views are addressed by the URL's fragment (#/<view> or
// #/<view>/<name>): the page itself is one file the server serves, so the
// views need no route of the server's.
import { signal } from '@preact/signals';

function parse(hash) {
  const [view = '', name = ''] = hash.replace(/^#\/?/, '').split('/').map((p) => {
    try {
      return decodeURIComponent(p);
    } catch (_) {
      return p;
    }
  });
  return { view, name };
}

export const route = signal(parse(location.hash));
window.addEventListener('hashchange', () => { route.value = parse(location.hash); });

// href is the fragment of a view, and of one object in it.
export function href(view, name) {
  return `#/${view}${name ? `/${encodeURIComponent(name)}` : ''}`;
}

export function go(view, name) {
  location.hash = href(view, name);
}

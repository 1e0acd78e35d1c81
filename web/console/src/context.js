// Where the console runs (the API's base path and the namespace it shows)
// and what its user may do there.
import { signal } from '@preact/signals';
import { where } from './api.js';
import { may } from './rights.js';

export const { base, namespace } = where(location.pathname);

// nsPath is the path of the console's namespace in group/version.
export const nsPath = (group, version) => `${base}/apis/${group}/${version}/namespaces/${encodeURIComponent(namespace)}`;

// rules are the user's rights in the namespace (null until read).
export const rules = signal(null);

// can reports whether the user may verb group's resource in the namespace.
export function can(verb, group, resource) {
  return rules.value !== null && may(rules.value, verb, group, resource);
}

// canRead reports whether the user may list and watch group's resource.
export function canRead(group, resource) {
  return can('list', group, resource) && can('watch', group, resource);
}

export const velero = { group: 'velero.io', url: (resource) => `${nsPath('velero.io', 'v1')}/${resource}` };
export const oadp = { group: 'oadp.openshift.io', url: (resource) => `${nsPath('oadp.openshift.io', 'v1alpha1')}/${resource}` };
export const kubevirt = { group: 'backup.kubevirt.io', url: (resource) => `${nsPath('backup.kubevirt.io', 'v1alpha1')}/${resource}` };

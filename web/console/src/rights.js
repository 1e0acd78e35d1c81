// What the user may do in the console's namespace, from a
// SelfSubjectRulesReview (the API server's own RBAC answer): the console
// asks only for what the user may see, so a tenant's console sends no
// request its rights refuse.
import { post } from './api.js';

export async function rulesFor(base, namespace) {
  const review = await post(`${base}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews`, {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectRulesReview',
    spec: { namespace },
  });
  return review.status?.resourceRules ?? [];
}

function has(list, value) {
  return (list ?? []).includes('*') || (list ?? []).includes(value);
}

// may reports whether rules allow verb on group's resource (resource/sub
// for a subresource).
export function may(rules, verb, group, resource) {
  return rules.some((r) => has(r.verbs, verb) && has(r.apiGroups, group) && has(r.resources, resource) &&
    !(r.resourceNames?.length));
}

// Package artifacts holds the manifests Backstop ships (deploy/, examples/)
// and embeds the ones a standalone server applies itself.
package artifacts

import _ "embed"

// ClusterRoles is deploy/15-clusterroles.yaml: Backstop's own ClusterRoles,
// applied to the host cluster in aggregated mode and reconciled by a
// standalone server at every start.
//
//go:embed deploy/15-clusterroles.yaml
var ClusterRoles []byte

package restore

// The waits of a restore: for the CRDs of its first pass to be
// Established, and for a namespace being deleted to be gone before it is
// made again.

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
)

// namespacesResource is the core group's namespaces.
var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// crdGroupResource names CustomResourceDefinitions in a backup.
const crdGroupResource = "customresourcedefinitions.apiextensions.k8s.io"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDEstablishedWait is how long a restore waits for the CRDs it restored
// to be Established before it restores their custom resources.
const CRDEstablishedWait = time.Minute

// waitEstablished waits until every CRD of the first pass is Established
// (kube-apiserver serves its resources); one that is not by
// CRDEstablishedWait is a warning, and its custom resources fail on their
// own.
func (run *restoreRun) waitEstablished(ctx context.Context) {
	client := run.target.Resource(crdResource)
	for _, name := range run.crds {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, CRDEstablishedWait, true, func(ctx context.Context) (bool, error) {
			crd, err := client.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conditions {
				cond, _ := c.(map[string]any)
				if cond["type"] == "Established" && cond["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			run.log.Warning("", items.ScopeCluster, fmt.Sprintf("CustomResourceDefinition %s is not Established after %s: its custom resources may not restore", name, CRDEstablishedWait))
		}
	}
}

// NamespaceDeletionWait is how long a restore waits for a namespace that
// is being deleted to be gone before it creates it again.
const NamespaceDeletionWait = 2 * time.Minute

// ensureNamespace creates the target namespace of an item when it is
// missing (the backup may not hold it, or namespaceMapping names a new
// one), labelled like restored items.
func (run *restoreRun) ensureNamespace(ctx context.Context, name string) error {
	run.nsMu.Lock()
	defer run.nsMu.Unlock()
	if run.namespaces[name] {
		return nil
	}
	exists, err := run.waitNamespaceGone(ctx, name)
	if err != nil || !run.namespacesServed() {
		return err
	}
	if !exists {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
		ns.SetName(name)
		ns.SetLabels(map[string]string{BackupNameLabel: velerov1.LabelValue(run.backup.Name), RestoreNameLabel: velerov1.LabelValue(run.r.Name)})
		created, err := run.target.Resource(namespacesResource).Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		run.log.Info("Created the missing namespace", "namespace", name)
		if run.preview != nil && run.preview.namespaceCreated(name) {
			run.record("namespaces", "", name, velerov1.PreviewCreate, "missing: made for the items restored into it", created)
		}
	}
	run.namespaces[name] = true
	return nil
}

// namespacesServed: a standalone target serves no namespaces, and has
// none to create or wait for.
func (run *restoreRun) namespacesServed() bool {
	_, ok := run.pass.byGR["namespaces"]
	return ok
}

// waitNamespaceGone reports whether namespace name exists; one being
// deleted is waited for (up to NamespaceDeletionWait) until it is gone, so
// that a restore right after `kubectl delete namespace` restores into a
// new one instead of failing against the old one.
func (run *restoreRun) waitNamespaceGone(ctx context.Context, name string) (bool, error) {
	if !run.namespacesServed() {
		return true, nil
	}
	client := run.target.Resource(namespacesResource)
	exists, waited := false, false
	err := wait.PollUntilContextTimeout(ctx, time.Second, NamespaceDeletionWait, true, func(ctx context.Context) (bool, error) {
		existing, err := client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			exists = false
			return true, nil
		case err != nil:
			return false, fmt.Errorf("reading namespace %s: %w", name, err)
		case existing.GetDeletionTimestamp() != nil:
			if !waited {
				run.log.Info("Waiting for the namespace being deleted to be gone", "namespace", name)
				waited = true
			}
			return false, nil
		}
		exists = true
		return true, nil
	})
	if wait.Interrupted(err) {
		return false, fmt.Errorf("namespace %s is still being deleted after %s: restore again once it is gone", name, NamespaceDeletionWait)
	}
	return exists, err
}

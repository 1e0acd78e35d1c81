package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/restore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// workloads is a namespace as users have them: what the restore rules are
// for (Services of each kind, a Deployment whose ReplicaSet and pods its
// controllers make, a Job, a ServiceAccount bound to a Role, a claim).
const workloads = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {currency: EUR}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: robot, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: settings-reader, namespace: shop}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: robot-reads-settings, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: settings-reader}
subjects: [{kind: ServiceAccount, name: robot, namespace: shop}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web-nodeport, namespace: shop}
spec: {type: NodePort, selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: web-headless, namespace: shop}
spec: {clusterIP: None, selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: robot
      containers: [{name: web, image: registry.invalid/web:1}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: registry.invalid/migrate:1}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, storageClassName: "", volumeName: shop-data}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: shop-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: /srv/shop-data}
  claimRef: {namespace: shop, name: data}
---
apiVersion: v1
kind: Secret
metadata:
  name: robot-token
  namespace: shop
  annotations: {kubernetes.io/service-account.name: robot}
type: kubernetes.io/service-account-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: shop-auditor}
rules: [{apiGroups: [""], resources: [namespaces], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: shop-robot-audits}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: shop-auditor}
subjects: [{kind: ServiceAccount, name: robot, namespace: shop}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  serviceName: web-headless
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: registry.invalid/db:1, volumeMounts: [{name: pgdata, mountPath: /var/lib/db}]}]
  volumeClaimTemplates:
  - metadata: {name: pgdata}
    spec: {accessModes: [ReadWriteOnce], storageClassName: "", resources: {requests: {storage: 1Gi}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: shop}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: registry.invalid/agent:1}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: shop}
spec:
  schedule: "0 3 * * *"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: report, image: registry.invalid/report:1}]
`

// TestRestoreWorkloads backs up a namespace of real workloads with what it
// brings along (its volume, its CRD, the cluster role binding of its
// ServiceAccount), deletes it (the namespace controller empties it) and
// restores it, at once, while it is still being deleted; then again under
// namespaceMapping. Every object compares field by field with its restored
// copy, minus what servers set, or was left to the cluster by a rule; the
// table of kinds is in the test log.
func TestRestoreWorkloads(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	admin := c.AdminKubeconfig
	if out, err := c.Kubectl(admin, []byte(workloads+"---\n"+widgets), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// A custom resource, a ConfigMap it owns, and a Job made from the
	// CronJob (which owns it), as kubectl create job --from does.
	poll(t, "the widget", time.Minute, func(context.Context) (bool, error) {
		_, err := c.Kubectl(admin, []byte(widget), "apply", "-f", "-")
		return err == nil, nil
	})
	uid, err := c.Kubectl(admin, nil, "get", "widgets.example.com", "gear", "-n", "shop", "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(admin, []byte(fmt.Sprintf(gearParts, uid)), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := c.Kubectl(admin, nil, "create", "job", "nightly-manual", "--from=cronjob/nightly", "-n", "shop"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The controllers have made what the restore must leave to them, and
	// bound the claim.
	poll(t, "the workloads' pods, the bound claim and the token", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != shopPods {
			return false, err
		}
		pvc, err := c.Kube.CoreV1().PersistentVolumeClaims("shop").Get(ctx, "data", metav1.GetOptions{})
		if err != nil || pvc.Status.Phase != corev1.ClaimBound {
			return false, err
		}
		token, err := c.Kube.CoreV1().Secrets("shop").Get(ctx, "robot-token", metav1.GetOptions{})
		return err == nil && len(token.Data["token"]) > 0, err
	})
	oldIP := serviceIP(t, c, "shop", "web")
	before := snapshot(t, c, "shop")

	backup := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "shop-workloads"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"shop"}}}
	b := runBackup(t, c, backup)
	if b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("backup: %s (%d errors)", b.Status.Phase, b.Status.Errors)
	}

	// Deleted, and restored at once: the restore waits for the namespace
	// controller to finish.
	if err := c.Kube.CoreV1().Namespaces().Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-back"}, Spec: velerov1.RestoreSpec{BackupName: backup.Name}})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 || r.Status.Warnings != 0 || r.Status.Progress == nil ||
		r.Status.Progress.ItemsRestored != r.Status.Progress.TotalItems {
		t.Errorf("restore into the deleted namespace: phase %s, errors %d, warnings %d, progress %+v",
			r.Status.Phase, r.Status.Errors, r.Status.Warnings, r.Status.Progress)
	}
	// The volume outlived its claim; the restored claim binds to it again.
	poll(t, "the restored claim to bind to its volume", time.Minute, func(ctx context.Context) (bool, error) {
		pvc, err := c.Kube.CoreV1().PersistentVolumeClaims("shop").Get(ctx, "data", metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
	})
	if n := compareRestored(t, c, before, "shop", "shop", r.Name); n != 0 {
		t.Errorf("restore %s: %d objects differ", r.Name, n)
	}
	checkRestored(t, c, "shop")
	if ip := serviceIP(t, c, "shop", "web"); ip == "" || ip == "None" {
		t.Errorf("the restored Service web has cluster IP %q (before: %s), want a new allocation", ip, oldIP)
	}

	// Again under another name, beside the first copy. The cluster-scoped
	// objects are there already: the volume, bound to the first copy's
	// claim, and the cluster role binding, naming its ServiceAccount, are
	// kept with a warning each.
	r = runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-copy"}, Spec: velerov1.RestoreSpec{
		BackupName: backup.Name, NamespaceMapping: map[string]string{"shop": "shop-copy"},
	}})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 {
		t.Errorf("restore under namespaceMapping: phase %s, errors %d, warnings %d", r.Status.Phase, r.Status.Errors, r.Status.Warnings)
	}
	var namespaced []snapshotObject
	for _, s := range before {
		if s.obj.GetNamespace() != "" || s.gvr.Resource == "namespaces" {
			namespaced = append(namespaced, s)
		}
	}
	if n := compareRestored(t, c, namespaced, "shop", "shop-copy", r.Name); n != 0 {
		t.Errorf("restore %s: %d objects differ", r.Name, n)
	}
	checkRestored(t, c, "shop-copy")

	// Live objects that differ from the backup: left alone with a warning,
	// or set back to the backed-up version with existingResourcePolicy
	// update.
	if _, err := c.Kube.CoreV1().ConfigMaps("shop").Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "shop"}, Data: map[string]string{"currency": "USD"},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-again"}, Spec: velerov1.RestoreSpec{
		BackupName: backup.Name, IncludedResources: []string{"configmaps"},
	}})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Warnings == 0 || currency(t, c) != "USD" {
		t.Errorf("restore over a changed ConfigMap without a policy: phase %s, warnings %d, currency %s, want Completed, a warning, USD kept",
			r.Status.Phase, r.Status.Warnings, currency(t, c))
	}
	r = runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "shop-update"}, Spec: velerov1.RestoreSpec{
		BackupName: backup.Name, IncludedResources: []string{"configmaps"}, ExistingResourcePolicy: velerov1.PolicyTypeUpdate,
	}})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 || currency(t, c) != "EUR" {
		t.Errorf("restore with existingResourcePolicy update: phase %s, errors %d, currency %s, want Completed, EUR back",
			r.Status.Phase, r.Status.Errors, currency(t, c))
	}

	// A CRD and its custom resources, both deleted: the restore brings the
	// CRD back first and waits until it is Established.
	if out, err := c.Kubectl(admin, []byte(widgets), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	poll(t, "the widget", time.Minute, func(context.Context) (bool, error) {
		_, err := c.Kubectl(admin, []byte(widget), "apply", "-f", "-")
		return err == nil, nil
	})
	withCRD := &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: velerov1.BackupSpec{
		IncludedNamespaces: []string{"shop"}, IncludedResources: []string{"customresourcedefinitions", "widgets.example.com"},
		IncludeClusterResources: ptr(true),
	}}
	if b = runBackup(t, c, withCRD); b.Status.Phase != velerov1.BackupPhaseCompleted {
		t.Fatalf("CRD backup: %s", b.Status.Phase)
	}
	if out, err := c.Kubectl(admin, nil, "delete", "crd", "widgets.example.com", "--wait"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r = runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: velerov1.RestoreSpec{BackupName: withCRD.Name}})
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 {
		t.Errorf("restore of a CRD and its resources: phase %s, errors %d", r.Status.Phase, r.Status.Errors)
	}
	if out, err := c.Kubectl(admin, nil, "get", "widgets.example.com", "gear", "-n", "shop", "-o", "jsonpath={.spec.teeth}"); err != nil || out != "12" {
		t.Errorf("the restored widget: %q, %v", out, err)
	}

	checkResourceModifiers(t, c, backup.Name)
}

// checkResourceModifiers restores backup (of namespace shop) into
// shop-modified with resource modifiers (Velero's spec.resourceModifier: a
// ConfigMap of rules in the restore's namespace, named through the velero
// CLI), one rule of each kind of
// patch, matched on the items as backed up; and refuses restores whose
// ConfigMap is missing or holds a bad rule (FailedValidation, saying why).
func checkResourceModifiers(t *testing.T, c *framework.Cluster, backup string) {
	t.Helper()
	ctx := context.Background()
	for name, doc := range map[string]string{
		"modifiers": `version: v1
resourceModifierRules:
- conditions: {groupResource: deployments.apps, namespaces: [shop]}
  strategicPatches:
  - patchData: '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"registry.invalid/web:2"}]}}}}'
- conditions: {groupResource: configmaps, resourceNameRegex: "^settings$", matches: [{path: /data/currency, value: EUR}]}
  mergePatches:
  - patchData: 'data: {currency: CHF}'
- conditions: {groupResource: services, resourceNameRegex: "^web$"}
  patches:
  - {operation: add, path: /metadata/annotations, value: '{"restored-by": "modifiers"}'}
`,
		"bad-modifiers": "version: v1\nresourceModifierRules:\n- conditions: {groupResource: services}\n  patches: [{operation: upsert, path: /spec}]\n",
	} {
		if _, err := c.Kube.CoreV1().ConfigMaps(adminNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"rules.yaml": doc}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	modifiers := func(name string) *corev1.TypedLocalObjectReference {
		return &corev1.TypedLocalObjectReference{Kind: "ConfigMap", Name: name}
	}
	// Previewed first, as the restore the CLI then makes.
	preview := checkModifiersPreview(t, c, backup, modifiers("modifiers"))
	// As a user asks for it: velero restore create --resource-modifier-configmap.
	velero, wants := veleroCLI(t, c)
	wants("restore create --resource-modifier-configmap", velero("restore", "create", "shop-modified", "--from-backup", backup,
		"--namespace-mappings", "shop:shop-modified", "--resource-modifier-configmap", "modifiers", "--wait"),
		"Restore completed with status: Completed")
	r, err := c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, "shop-modified", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := r.Spec.ResourceModifier; ref == nil || ref.Name != "modifiers" {
		t.Errorf("the restore's resource modifiers %+v, want the ConfigMap the CLI named", ref)
	}
	if r.Status.Phase != velerov1.RestorePhaseCompleted || r.Status.Errors != 0 {
		t.Errorf("restore with resource modifiers: phase %s, errors %d, warnings %d", r.Status.Phase, r.Status.Errors, r.Status.Warnings)
	}
	compareWithPreview(t, c, preview, "shop-modified", "shop-modified")
	for _, check := range []struct{ what, kind, name, path, want string }{
		{"the web container's image (strategic merge patch)", "deployment", "web", `{.spec.template.spec.containers[?(@.name=="web")].image}`, "registry.invalid/web:2"},
		{"the currency (merge patch, where it was EUR)", "configmap", "settings", "{.data.currency}", "CHF"},
		{"the annotation (JSON patch)", "service", "web", "{.metadata.annotations.restored-by}", "modifiers"},
		{"a Job's image (no rule for it)", "job", "migrate", "{.spec.template.spec.containers[0].image}", "registry.invalid/migrate:1"},
	} {
		if out, err := c.Kubectl(c.AdminKubeconfig, nil, "get", check.kind, check.name, "-n", "shop-modified", "-o", "jsonpath="+check.path); err != nil || out != check.want {
			t.Errorf("%s in shop-modified: %q (%v), want %q", check.what, out, err, check.want)
		}
	}
	for _, tc := range []struct{ configMap, want string }{
		{"bad-modifiers", "Validation error in resource modifiers provided in configmap " + adminNamespace + "/bad-modifiers"},
		{"no-such-modifiers", "failed to get resource modifiers configmap " + adminNamespace + "/no-such-modifiers: not found"},
	} {
		r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: tc.configMap}, Spec: velerov1.RestoreSpec{
			BackupName: backup, NamespaceMapping: map[string]string{"shop": "shop-refused"}, ResourceModifier: modifiers(tc.configMap)}})
		if r.Status.Phase != velerov1.RestorePhaseFailedValidation || len(r.Status.ValidationErrors) != 1 || !strings.Contains(r.Status.ValidationErrors[0], tc.want) {
			t.Errorf("restore %s: %s %v, want FailedValidation saying %q", r.Name, r.Status.Phase, r.Status.ValidationErrors, tc.want)
		}
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, "shop-refused", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace shop-refused: %v, want none made by the refused restores", err)
	}
}

func ptr[T any](v T) *T { return &v }

func currency(t *testing.T, c *framework.Cluster) string {
	t.Helper()
	cm, err := c.Kube.CoreV1().ConfigMaps("shop").Get(context.Background(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["currency"]
}

const widgets = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {teeth: {type: integer}}}
`

// gearParts is a ConfigMap the widget gear owns (%s: its UID).
const gearParts = `apiVersion: v1
kind: ConfigMap
metadata:
  name: gear-parts
  namespace: shop
  ownerReferences: [{apiVersion: example.com/v1, kind: Widget, name: gear, uid: %s}]
data: {teeth: "12"}
`

// shopPods are the pods the controllers make for the workloads: the
// Deployment's two, the StatefulSet's first, one per Job.
const shopPods = 5

const widget = `apiVersion: example.com/v1
kind: Widget
metadata: {name: gear, namespace: shop}
spec: {teeth: 12}
`

func serviceIP(t *testing.T, c *framework.Cluster, namespace, name string) string {
	t.Helper()
	svc, err := c.Kube.CoreV1().Services(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Service %s/%s: %v", namespace, name, err)
	}
	return svc.Spec.ClusterIP
}

// runBackup creates b in the admin namespace and waits for its end.
func runBackup(t *testing.T, c *framework.Cluster, b *velerov1.Backup) *velerov1.Backup {
	t.Helper()
	if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitBackupEnd(t, c, b.Name)
}

// runRestore creates r in the admin namespace and waits for its end.
func runRestore(t *testing.T, c *framework.Cluster, r *velerov1.Restore) *velerov1.Restore {
	t.Helper()
	if _, err := c.Backstop.VeleroV1().Restores(adminNamespace).Create(context.Background(), r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *velerov1.Restore
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, restore.NamespaceDeletionWait+2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, r.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase.Terminal(), err
	})
	if err != nil {
		namespaces, _ := c.Kubectl(c.AdminKubeconfig, nil, "get", "namespaces", "-o", "yaml")
		t.Fatalf("restore %s did not end: %v; status %+v\nnamespaces:\n%s", r.Name, err, got.Status, namespaces)
	}
	if got.Status.Errors != 0 || got.Status.Warnings != 0 {
		if out, err := c.Kubectl(c.AdminKubeconfig, nil, "get", "--raw",
			"/apis/velero.io/v1/namespaces/"+adminNamespace+"/restores/"+r.Name+"/logs"); err == nil {
			t.Logf("restore %s log:\n%s", r.Name, out)
		}
	}
	return got
}

// checkRestored checks what the restore rules promise in namespace ns.
func checkRestored(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap %s/settings: %v", ns, err)
	}
	if s, err := c.Kube.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil || string(s.Data["password"]) != "s3cret" {
		t.Errorf("Secret %s/db: %v", ns, err)
	}
	if ip := serviceIP(t, c, ns, "web-headless"); ip != corev1.ClusterIPNone {
		t.Errorf("headless Service in %s: cluster IP %q, want None", ns, ip)
	}
	if svc, err := c.Kube.CoreV1().Services(ns).Get(ctx, "web-nodeport", metav1.GetOptions{}); err != nil || svc.Spec.Ports[0].NodePort == 0 {
		t.Errorf("NodePort Service in %s: %v, %+v", ns, err, svc)
	}
	rb, err := c.Kube.RbacV1().RoleBindings(ns).Get(ctx, "robot-reads-settings", metav1.GetOptions{})
	if err != nil || len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != ns {
		t.Errorf("RoleBinding in %s: %v, subjects %+v, want its ServiceAccount in %s", ns, err, rb, ns)
	}
	if _, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("Deployment %s/web: %v", ns, err)
	}
	if _, err := c.Kube.BatchV1().Jobs(ns).Get(ctx, "migrate", metav1.GetOptions{}); err != nil {
		t.Errorf("Job %s/migrate: %v", ns, err)
	}
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{}); err != nil {
		t.Errorf("PersistentVolumeClaim %s/data: %v", ns, err)
	}
	// ReplicaSets and pods are the controllers' again, not restored copies.
	poll(t, "the controllers to recreate the pods in "+ns, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == shopPods, err
	})
	pods, _ := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		if _, restored := p.Labels[restore.RestoreNameLabel]; restored || len(p.OwnerReferences) == 0 {
			t.Errorf("pod %s/%s was restored (labels %v, owners %v), not made by its controller", ns, p.Name, p.Labels, p.OwnerReferences)
		}
	}
	rss, _ := c.Kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	for _, rs := range rss.Items {
		if _, restored := rs.Labels[restore.RestoreNameLabel]; restored {
			t.Errorf("ReplicaSet %s/%s was restored, not made by its Deployment", ns, rs.Name)
		}
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Errorf("namespace %s missing", ns)
	}
}

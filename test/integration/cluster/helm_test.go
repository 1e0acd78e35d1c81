package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	certutil "k8s.io/client-go/util/cert"
	sigsyaml "sigs.k8s.io/yaml"

	clientv3 "go.etcd.io/etcd/client/v3"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestDeployFromChart: artifacts/deploy and artifacts/monitoring are what
// hack/update-deploy.sh renders from the chart, file by file: the plain
// manifests, the monitoring objects and the chart never drift apart.
func TestDeployFromChart(t *testing.T) {
	root := filepath.Dir(filepath.Dir(framework.ChartDir(t)))
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "update-deploy.sh"), out)
	cmd.Env = append(os.Environ(), "HELM="+framework.Binary(t, "helm"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/update-deploy.sh: %v\n%s", err, b)
	}
	for _, dir := range []string{"deploy", "monitoring"} {
		t.Run(dir, func(t *testing.T) {
			shippedDir := framework.ArtifactsDir(t, dir)
			rendered, _ := filepath.Glob(filepath.Join(out, dir, "*.*"))
			shipped, _ := filepath.Glob(filepath.Join(shippedDir, "*.*"))
			names := func(paths []string) []string {
				var n []string
				for _, p := range paths {
					n = append(n, filepath.Base(p))
				}
				return n
			}
			if len(rendered) == 0 || !slices.Equal(names(rendered), names(shipped)) {
				t.Fatalf("the chart renders %v, artifacts/%s has %v: run hack/update-deploy.sh", names(rendered), dir, names(shipped))
			}
			for _, name := range names(rendered) {
				want, _ := os.ReadFile(filepath.Join(out, dir, name))
				got, _ := os.ReadFile(filepath.Join(shippedDir, name))
				if string(got) != string(want) {
					t.Errorf("artifacts/%s/%s differs from what the chart renders: run hack/update-deploy.sh", dir, name)
				}
			}
		})
	}
}

// TestHelmChart: the chart with the helm CLI against a real control plane:
// lint; values the chart refuses; install with a values file (the server
// runs as the pod of the chart's Deployment, as its ServiceAccount with
// the chart's RBAC, its APIServices Available; the values' storage
// location and schedule made by the server from the chart's ConfigMap),
// a backup to that location and a restore; an upgrade with changed
// values, applied to the Deployment and the server started from it (a
// schedule gone from the values deleted, a new one made); an uninstall
// that leaves nothing of the chart but the data claim, which Helm keeps
// (helm.sh/resource-policy: keep).
func TestHelmChart(t *testing.T) {
	t.Parallel()
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true})
	ctx := context.Background()
	chart := framework.ChartDir(t)
	step := inOrder(t)

	step("lint", func(t *testing.T) {
		if out, err := c.Helm("lint", "--strict", chart); err != nil {
			t.Fatalf("helm lint: %v\n%s", err, out)
		}
		for _, tc := range []struct {
			values []string
			want   string
		}{
			{[]string{"replicas=2"}, "single-writer"},
			{[]string{"storage.backend=etcd3"}, "needs the etcd servers"},
			{[]string{"storage.backend=sqlite"}, "neither pebble nor etcd3"},
			{[]string{"storage.backend=etcd3", "storage.etcd.servers={https://etcd:2379}", "replicas=3"}, "signingKeySecret"},
			{[]string{"storage.backend=etcd3", "storage.etcd.servers={https://etcd:2379}", "replicas=3", "downloadLinks.signingKeySecret=links"}, "apiService.tlsSecret"},
			{[]string{"vmHost.perNode=true"}, "storage.backend etcd3"},
			{[]string{"storage.backend=etcd3", "storage.etcd.servers={https://etcd:2379}", "vmHost.perNode=true"}, "signingKeySecret"},
			{[]string{"vmHost.perNode=true", "vmHost.enabled=false"}, "vmHost.enabled"},
			{[]string{"storage.backend=etcd3", "storage.etcd.servers={https://etcd:2379}", "replicas=3", "leaderElection.enabled=false"}, "leaderElection.enabled"},
		} {
			args := []string{"template", "backstop", chart}
			for _, v := range tc.values {
				args = append(args, "--set", v)
			}
			if out, err := c.Helm(args...); err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("helm template --set %v: %v, %q; want refused with %q", tc.values, err, out, tc.want)
			}
		}
		// etcd3 with what replicas need renders them.
		out, err := c.Helm("template", "backstop", chart, "--set", "storage.backend=etcd3", "--set", "storage.etcd.servers={https://etcd:2379}",
			"--set", "replicas=3", "--set", "downloadLinks.signingKeySecret=links", "--set", "apiService.tlsSecret=serving")
		if err != nil {
			t.Fatalf("helm template with etcd3 and three replicas: %v\n%s", err, out)
		}
		for _, want := range []string{"replicas: 3", "--storage-backend=etcd3", "--etcd-servers=https://etcd:2379",
			"--tls-cert-file=/etc/backstop/serving/tls.crt", "--download-signing-key-file=/etc/backstop/download-links/key", "emptyDir: {}",
			// Tenants' locations reach no private network by default.
			"--tenant-denied-networks=10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"} {
			if !strings.Contains(out, want) {
				t.Errorf("helm template with etcd3 and three replicas lacks %q", want)
			}
		}
		if strings.Contains(out, "kind: PersistentVolumeClaim") {
			t.Errorf("helm template with etcd3 makes a data claim")
		}
	})

	// Values as a user keeps them in a file: a storage location (a
	// directory: the server runs on this host), two schedules.
	values := func(name, content string) string {
		path := filepath.Join(c.Dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	backups := filepath.Join(c.Dir, "chart-backups")
	installValues := values("values.yaml", `configuration:
  concurrentBackups: 2
  backupStorageLocation:
  - name: primary
    provider: filesystem
    bucket: `+backups+`
    default: true
nonAdmin:
  policy:
    enable: true
    requireApprovalForBSL: true
schedules:
  nightly:
    schedule: "0 2 * * *"
    paused: true
    labels: {team: platform}
    template:
      includedNamespaces: [charted]
      ttl: 168h0m0s
  off:
    disabled: true
    schedule: "0 4 * * *"
`)

	var manifest string
	step("install", func(t *testing.T) {
		c.InstallBackstopChart([]string{"--values", installValues})
		d := c.BackstopDeployment()
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--concurrent-backups=2") || !slices.Contains(args, "--namespace="+adminNamespace) {
			t.Errorf("the Deployment's arguments %v lack the values'", args)
		}
		if !slices.Contains(c.BackstopArgs, "--concurrent-backups=2") {
			t.Errorf("the server runs with %v, not the Deployment's arguments", c.BackstopArgs)
		}
		out, err := c.Helm("get", "manifest", framework.HelmRelease, "--namespace", adminNamespace)
		if err != nil {
			t.Fatalf("helm get manifest: %v\n%s", err, out)
		}
		manifest = out
		status, err := c.Helm("status", framework.HelmRelease, "--namespace", adminNamespace)
		if err != nil || !strings.Contains(status, "STATUS: deployed") {
			t.Fatalf("helm status: %v\n%s", err, status)
		}
		// The values' storage location and schedule, kept by the server;
		// no default location of its own beside them.
		poll(t, "the values' storage location and schedule", time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "primary", metav1.GetOptions{})
			if err != nil || !l.Spec.Default || l.Spec.ObjectStorage == nil || l.Spec.ObjectStorage.Bucket != backups {
				return false, nil
			}
			s, err := c.Backstop.VeleroV1().Schedules(adminNamespace).Get(ctx, "backstop-nightly", metav1.GetOptions{})
			if err != nil || s.Spec.Schedule != "0 2 * * *" || s.Labels["team"] != "platform" || s.Spec.Template.TTL.Duration != 168*time.Hour {
				return false, nil
			}
			dpa, err := c.Backstop.OadpV1alpha1().DataProtectionApplications(adminNamespace).Get(ctx, framework.HelmRelease, metav1.GetOptions{})
			return err == nil && dpa.Spec.NonAdmin != nil && dpa.Spec.NonAdmin.Enable != nil && *dpa.Spec.NonAdmin.Enable, nil
		})
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the server's default location beside the values' one: %v, want none", err)
		}
		if _, err := c.Backstop.VeleroV1().Schedules(adminNamespace).Get(ctx, "backstop-off", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the disabled schedule: %v, want none", err)
		}
	})

	step("backup-and-restore", func(t *testing.T) {
		if out, err := c.Kubectl(c.AdminKubeconfig, []byte(`apiVersion: v1
kind: Namespace
metadata: {name: charted}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: charted}
data: {mode: production}
`), "apply", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "charted"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"charted"}}})
		if b.Status.Phase != velerov1.BackupPhaseCompleted || b.Spec.StorageLocation != "primary" {
			t.Fatalf("backup: %s (%d errors) to %q, want Completed to the values' location", b.Status.Phase, b.Status.Errors, b.Spec.StorageLocation)
		}
		if err := c.Kube.CoreV1().ConfigMaps("charted").Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "charted"}, Spec: velerov1.RestoreSpec{BackupName: b.Name}})
		if r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore: %s (%d errors)", r.Status.Phase, r.Status.Errors)
		}
		cm, err := c.Kube.CoreV1().ConfigMaps("charted").Get(ctx, "settings", metav1.GetOptions{})
		if err != nil || cm.Data["mode"] != "production" {
			t.Fatalf("the restored ConfigMap: %v, %+v", err, cm)
		}
	})

	step("upgrade", func(t *testing.T) {
		// The nightly schedule goes, a weekly one comes.
		upgradeValues := values("values-2.yaml", strings.Replace(strings.Replace(readFile(t, installValues), "nightly:", "weekly:", 1),
			`"0 2 * * *"`, `"0 3 * * 0"`, 1))
		c.UpgradeBackstopChart([]string{"--values", upgradeValues, "--set", "configuration.concurrentBackups=3", "--set", "memoryLimit=1536Mi",
			"--set", "resources.limits.memory=3Gi"})
		d := c.BackstopDeployment()
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--concurrent-backups=3", "--memory-limit=1536Mi"} {
			if !slices.Contains(args, want) || !slices.Contains(c.BackstopArgs, want) {
				t.Errorf("after the upgrade the Deployment has %v and the server runs with %v, want %s in both", args, c.BackstopArgs, want)
			}
		}
		if slices.Contains(args, "--concurrent-backups=2") {
			t.Errorf("after the upgrade the Deployment keeps the old value: %v", args)
		}
		if got := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; got.String() != "3Gi" {
			t.Errorf("after the upgrade the memory limit is %s, want 3Gi", got.String())
		}
		poll(t, "the schedules as the new values say", time.Minute, func(ctx context.Context) (bool, error) {
			_, gone := c.Backstop.VeleroV1().Schedules(adminNamespace).Get(ctx, "backstop-nightly", metav1.GetOptions{})
			s, err := c.Backstop.VeleroV1().Schedules(adminNamespace).Get(ctx, "backstop-weekly", metav1.GetOptions{})
			return apierrors.IsNotFound(gone) && err == nil && s.Spec.Schedule == "0 3 * * 0", nil
		})
		// The server from the new Deployment serves what the old one stored.
		if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Get(ctx, "charted", metav1.GetOptions{}); err != nil {
			t.Errorf("the backup after the upgrade: %v", err)
		}
	})

	step("uninstall", func(t *testing.T) {
		if out, err := c.Helm("uninstall", framework.HelmRelease, "--namespace", adminNamespace, "--wait"); err != nil {
			t.Fatalf("helm uninstall: %v\n%s", err, out)
		}
		c.StopBackstop(false)
		objects := manifestObjects(t, manifest)
		if len(objects) < 10 {
			t.Fatalf("the release's manifest holds %d objects, want the chart's (more than 10)", len(objects))
		}
		mapper := c.Mapper()
		for _, obj := range objects {
			gvk := obj.GroupVersionKind()
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Errorf("%s: %v", gvk, err)
				continue
			}
			var get func() (*unstructured.Unstructured, error)
			if mapping.Scope.Name() == "namespace" {
				get = func() (*unstructured.Unstructured, error) {
					return c.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
				}
			} else {
				get = func() (*unstructured.Unstructured, error) {
					return c.Dynamic.Resource(mapping.Resource).Get(ctx, obj.GetName(), metav1.GetOptions{})
				}
			}
			live, err := get()
			kept := gvk.Kind == "PersistentVolumeClaim"
			switch {
			case kept && err != nil:
				t.Errorf("%s %s/%s after uninstall: %v, want it kept (helm.sh/resource-policy: keep)", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
			case kept && live.GetAnnotations()["helm.sh/resource-policy"] != "keep":
				t.Errorf("%s %s/%s kept without the keep policy", gvk.Kind, obj.GetNamespace(), obj.GetName())
			case !kept && err == nil && live.GetDeletionTimestamp() == nil:
				t.Errorf("%s %s/%s is left after uninstall", gvk.Kind, obj.GetNamespace(), obj.GetName())
			case !kept && err != nil && !apierrors.IsNotFound(err):
				t.Errorf("%s %s/%s after uninstall: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
			}
		}
		if out, err := c.Helm("list", "--namespace", adminNamespace, "-q"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("helm list after uninstall: %v, %q", err, out)
		}
		if out, err := c.Helm("status", framework.HelmRelease, "--namespace", adminNamespace); err == nil || !strings.Contains(out, "not found") {
			t.Errorf("helm status after uninstall: %v, %q; want the release not found", err, out)
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// manifestObjects reads the objects of a release's manifest.
func manifestObjects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var m map[string]any
		if err := decoder.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("reading the manifest: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// TestHelmChartPerNode: vmHost.perNode with the etcd3 backend (the
// cluster's etcd, under a prefix of its own) and the user's serving
// certificate and download-link key, as a user installs a server on every
// VM host: the chart makes a DaemonSet (no Deployment, no data claim)
// whose pod, run as the harness' node, serves the API with that
// certificate (kube-apiserver verifies it with the CA the server put in
// the APIServices), keeps its objects in etcd under the prefix, holds its
// node's VM engines' Lease, and backs up and restores.
func TestHelmChartPerNode(t *testing.T) {
	t.Parallel()
	c := framework.StartClusterWith(t, framework.ClusterOptions{WithoutBackstop: true})
	ctx := context.Background()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(framework.BackstopService+"."+adminNamespace+".svc", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	linkKey := make([]byte, 32)
	if _, err := rand.Read(linkKey); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adminNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "serving"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "links"}, Data: map[string][]byte{"key": linkKey}},
	} {
		if _, err := c.Kube.CoreV1().Secrets(adminNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const prefix = "/backstop-chart"
	c.InstallBackstopChart([]string{"--set", "storage.backend=etcd3", "--set", "storage.etcd.servers={" + c.EtcdURL() + "}",
		"--set", "storage.etcd.prefix=" + prefix, "--set", "vmHost.perNode=true", "--set", "vmHost.libvirtSocketDir=/var/run/libvirt",
		"--set", "apiService.tlsSecret=serving", "--set", "downloadLinks.signingKeySecret=links"})

	t.Run("a DaemonSet", func(t *testing.T) {
		if _, err := c.Kube.AppsV1().Deployments(adminNamespace).Get(ctx, framework.BackstopService, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Deployment beside the DaemonSet: %v", err)
		}
		if claims, err := c.Kube.CoreV1().PersistentVolumeClaims(adminNamespace).List(ctx, metav1.ListOptions{}); err != nil || len(claims.Items) != 0 {
			t.Errorf("data claims with etcd3: %v, %d", err, len(claims.Items))
		}
		pod := c.BackstopDaemonSet().Spec.Template.Spec
		args := pod.Containers[0].Args
		for _, want := range []string{"--vm-host=$(NODE_NAME)", "--storage-backend=etcd3", "--etcd-prefix=" + prefix, "--tls-cert-file=/etc/backstop/serving/tls.crt"} {
			if !slices.Contains(args, want) {
				t.Errorf("the DaemonSet's arguments %v lack %s", args, want)
			}
		}
		libvirt := false
		for _, v := range pod.Volumes {
			libvirt = libvirt || v.HostPath != nil && v.HostPath.Path == "/var/run/libvirt"
		}
		if !libvirt {
			t.Errorf("the DaemonSet's pod mounts no libvirt socket directory: %+v", pod.Volumes)
		}
		if !slices.Contains(c.BackstopArgs, "--vm-host="+framework.HarnessNode) {
			t.Errorf("the server runs with %v, not as the pod of the harness' node", c.BackstopArgs)
		}
	})

	t.Run("the user's certificate", func(t *testing.T) {
		apiService, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).Get(ctx, "v1.velero.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bundle, _, _ := unstructured.NestedString(apiService.Object, "spec", "caBundle")
		if decoded, err := base64.StdEncoding.DecodeString(bundle); err != nil || !bytes.Equal(decoded, certPEM) {
			t.Errorf("the APIService's caBundle is not the user's certificate (%v)", err)
		}
	})

	t.Run("backup and restore, stored in etcd", func(t *testing.T) {
		if out, err := c.Kubectl(c.AdminKubeconfig, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: hosted}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: hosted}\ndata: {a: b}\n"), "apply", "-f", "-"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if b := runBackup(t, c, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: velerov1.BackupSpec{IncludedNamespaces: []string{"hosted"}}}); b.Status.Phase != velerov1.BackupPhaseCompleted {
			t.Fatalf("backup: %s %q", b.Status.Phase, b.Status.FailureReason)
		}
		if err := c.Kube.CoreV1().ConfigMaps("hosted").Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if r := runRestore(t, c, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: "hosted"}, Spec: velerov1.RestoreSpec{BackupName: "hosted"}}); r.Status.Phase != velerov1.RestorePhaseCompleted {
			t.Fatalf("restore: %s", r.Status.Phase)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps("hosted").Get(ctx, "settings", metav1.GetOptions{}); err != nil {
			t.Errorf("the restored ConfigMap: %v", err)
		}
		etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{c.EtcdURL()}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer etcd.Close()
		keys, err := etcd.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, kv := range keys.Kvs {
			found = found || strings.Contains(string(kv.Key), "/backups/") && strings.HasSuffix(string(kv.Key), "/hosted")
		}
		if !found {
			t.Errorf("no key of the backup under %s in etcd (%d keys there)", prefix, len(keys.Kvs))
		}
	})

	t.Run("the node's VM engines", func(t *testing.T) {
		lease := leader.HostLease("backstop-engines", framework.HarnessNode)
		poll(t, "the Lease "+lease+" held", time.Minute, func(ctx context.Context) (bool, error) {
			l, err := c.Kube.CoordinationV1().Leases(adminNamespace).Get(ctx, lease, metav1.GetOptions{})
			return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
		})
	})
}

// TestMonitoringObjects: the shipped monitoring objects
// (artifacts/monitoring/70-monitoring.yaml) are what the Prometheus
// Operator accepts, read strictly into its own types (a field it does not
// know is an error); the PrometheusRule holds exactly the groups of the
// shipped rule file, the dashboard's ConfigMap exactly the shipped
// dashboard; the ServiceMonitor scrapes the chart's Service by the port it
// names, verifying it with the CA ConfigMap the chart makes, as the job the
// rules select; the Prometheus' ServiceAccount may get /metrics.
func TestMonitoringObjects(t *testing.T) {
	dir := monitoringDir(t)
	objects := manifestObjects(t, readFile(t, filepath.Join(dir, "70-monitoring.yaml")))
	strict := func(t *testing.T, obj *unstructured.Unstructured, into any) {
		t.Helper()
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := sigsyaml.UnmarshalStrict(data, into); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	kinds := map[string]int{}
	var monitorSelector map[string]string
	for _, obj := range objects {
		kinds[obj.GetKind()]++
		switch obj.GetKind() {
		case monitoringv1.ServiceMonitorsKind:
			var sm monitoringv1.ServiceMonitor
			strict(t, obj, &sm)
			if len(sm.Spec.Endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints: %+v", sm.Spec.Endpoints)
			}
			e := sm.Spec.Endpoints[0]
			if !e.HonorLabels {
				t.Errorf("ServiceMonitor endpoint without honorLabels: the series' namespace label would become exported_namespace")
			}
			monitorSelector = sm.Spec.Selector.MatchLabels
			tls := e.TLSConfig
			if e.Port != "https" || e.Path != "/metrics" || tls == nil || tls.CA.ConfigMap == nil ||
				tls.CA.ConfigMap.Name != framework.ServingCAConfigMap || tls.CA.ConfigMap.Key != "ca.crt" || deref(tls.ServerName) != "backstop-apiserver.backstop-system.svc" {
				t.Errorf("ServiceMonitor endpoint %+v, TLS %+v", e, tls)
			}
			job := false
			for _, r := range e.RelabelConfigs {
				job = job || r.TargetLabel == "job" && deref(r.Replacement) == framework.PrometheusJob
			}
			if !job {
				t.Errorf("ServiceMonitor relabelings %+v: the job is not named %s", e.RelabelConfigs, framework.PrometheusJob)
			}
		case monitoringv1.PrometheusRuleKind:
			var rule monitoringv1.PrometheusRule
			strict(t, obj, &rule)
			var file monitoringv1.PrometheusRuleSpec
			if err := sigsyaml.UnmarshalStrict([]byte(readFile(t, filepath.Join(dir, shippedRules))), &file); err != nil {
				t.Fatalf("%s: %v", shippedRules, err)
			}
			if len(file.Groups) == 0 || !apiequality.Semantic.DeepEqual(rule.Spec, file) {
				t.Errorf("the PrometheusRule's groups are not those of %s", shippedRules)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			strict(t, obj, &cm)
			if cm.Labels["grafana_dashboard"] != "1" || cm.Data["backstop-overview.json"] != strings.TrimSuffix(readFile(t, filepath.Join(dir, shippedDashboard)), "\n") {
				t.Errorf("the dashboard's ConfigMap (labels %v) does not hold %s", cm.Labels, shippedDashboard)
			}
		case "ClusterRoleBinding", "RoleBinding":
			var binding rbacv1.RoleBinding
			strict(t, obj, &binding)
			if len(binding.Subjects) != 1 || binding.Subjects[0].Name != "prometheus-k8s" || binding.Subjects[0].Namespace != "monitoring" {
				t.Errorf("%s subjects %+v", obj.GetKind(), binding.Subjects)
			}
		}
	}
	want := map[string]int{monitoringv1.ServiceMonitorsKind: 1, monitoringv1.PrometheusRuleKind: 1, "ConfigMap": 1, "ClusterRole": 1, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1}
	if !maps.Equal(kinds, want) {
		t.Errorf("artifacts/monitoring/70-monitoring.yaml holds %v, want %v", kinds, want)
	}
	// The Service the ServiceMonitor selects, with the port it names.
	for _, obj := range manifestObjects(t, readFile(t, filepath.Join(framework.ArtifactsDir(t, "deploy"), "30-service.yaml"))) {
		if obj.GetKind() != "Service" {
			continue
		}
		var svc corev1.Service
		strict(t, obj, &svc)
		if len(monitorSelector) == 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" {
			t.Errorf("the Service: ports %+v; the ServiceMonitor selects %v", svc.Spec.Ports, monitorSelector)
		}
		for k, v := range monitorSelector {
			if svc.Labels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%s, the Service has %v", k, v, svc.Labels)
			}
		}
	}
}

// deref is what a string pointer points at, "" for none.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

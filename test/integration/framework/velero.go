package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// veleroProfiler is where the Velero server serves net/http/pprof
// (Velero.Heap).
const veleroProfiler = "127.0.0.1:16060"

// VeleroNamespace is where the Velero server runs and keeps its objects.
const VeleroNamespace = "velero"

// VeleroResource is a resource of Velero's CRDs (velero.io/v1).
func VeleroResource(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "velero.io", Version: "v1", Resource: resource}
}

// Velero is the real Velero server, the peer of the benchmarks: `velero
// server` (hack/install-velero.sh's version) with velero-plugin-for-aws,
// run out of cluster as its pod would run, against the Cluster's
// kube-apiserver, its objects in Velero's CustomResourceDefinitions
// (JSON in etcd), storing into an S3Server.
type Velero struct {
	c    *Cluster
	proc *process
}

// StartVelero installs Velero's CRDs (`velero install --crds-only`), its
// namespace, a credentials Secret and a default BackupStorageLocation on
// bucket of s3, starts `velero server` with extra flags and waits until
// the location is Available. The cluster must not serve velero.io from
// Backstop (StartClusterWith, WithoutBackstop).
func (c *Cluster) StartVelero(s3 *S3Server, bucket string, flags ...string) *Velero {
	t := c.t
	t.Helper()
	bin := Binary(t, "velero")
	plugin := Binary(t, "velero-plugins/velero-plugin-for-aws")
	out, err := exec.Command(bin, "version", "--client-only").Output()
	if err != nil {
		t.Fatalf("velero version: %v", err)
	}
	version := ""
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version: "); ok {
			version = v
		}
	}
	c.InstallVeleroCRDs()
	s3.MakeBucket(t, bucket)
	creds, err := os.ReadFile(s3.CredentialsFile(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	setup := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: cloud-credentials, namespace: %[1]s}
stringData:
  cloud: |
%[2]s
---
# What velero install makes: its restore actions read the Deployment (the
# image of restore helpers). No kubelet runs it here: the server runs below.
apiVersion: apps/v1
kind: Deployment
metadata: {name: velero, namespace: %[1]s, labels: {component: velero}}
spec:
  replicas: 0
  selector: {matchLabels: {deploy: velero}}
  template:
    metadata: {labels: {deploy: velero, component: velero}}
    spec:
      containers: [{name: velero, image: "velero/velero:%[5]s", command: [/velero], args: [server]}]
---
apiVersion: velero.io/v1
kind: BackupStorageLocation
metadata: {name: default, namespace: %[1]s}
spec:
  provider: aws
  default: true
  objectStorage: {bucket: %[3]s}
  credential: {name: cloud-credentials, key: cloud}
  config:
    region: us-east-1
    s3Url: %[4]s
    s3ForcePathStyle: "true"
    checksumAlgorithm: ""
`, VeleroNamespace, indent(string(creds), "    "), bucket, s3.Endpoint, version)
	if out, err := c.Kubectl(c.AdminKubeconfig, []byte(setup), "apply", "-f", "-"); err != nil {
		t.Fatalf("setting Velero up: %v\n%s", err, out)
	}
	tmp := c.path("velero-tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	// Every flag after "server": Velero starts its plugins with them.
	args := append([]string{"server", "--kubeconfig=" + c.AdminKubeconfig, "--namespace=" + VeleroNamespace,
		"--plugin-dir=" + filepath.Dir(plugin), "--metrics-address=127.0.0.1:18085", "--profiler-address=" + veleroProfiler,
		"--uploader-type=kopia", "--store-validation-frequency=5s", "--item-operation-sync-frequency=1s"}, flags...)
	v := &Velero{c: c}
	v.proc = c.startEnv("velero", bin, []string{"TMPDIR=" + tmp, "AWS_EC2_METADATA_DISABLED=true"}, args...)
	c.waitFor("Velero's storage location Available", v.proc, 2*time.Minute, func(ctx context.Context) error {
		bsl, err := c.Dynamic.Resource(VeleroResource("backupstoragelocations")).Namespace(VeleroNamespace).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(bsl.Object, "status", "phase"); phase != "Available" {
			msg, _, _ := unstructured.NestedString(bsl.Object, "status", "message")
			return fmt.Errorf("phase %q: %s", phase, msg)
		}
		return nil
	})
	return v
}

// InstallVeleroCRDs applies Velero's CustomResourceDefinitions (`velero
// install --crds-only`) and waits until kube-apiserver serves them. The
// cluster must not serve velero.io from Backstop.
func (c *Cluster) InstallVeleroCRDs() {
	t := c.t
	t.Helper()
	crds, err := exec.Command(Binary(t, "velero"), "install", "--crds-only", "--dry-run", "-o", "yaml").Output()
	if err != nil {
		t.Fatalf("velero install --crds-only --dry-run: %v", err)
	}
	if out, err := c.Kubectl(c.AdminKubeconfig, crds, "apply", "-f", "-"); err != nil {
		t.Fatalf("applying Velero's CRDs: %v\n%s", err, out)
	}
	c.waitFor("Velero's CRDs served", nil, time.Minute, func(ctx context.Context) error {
		_, err := c.Dynamic.Resource(VeleroResource("backupstoragelocations")).Namespace(VeleroNamespace).List(ctx, metav1.ListOptions{})
		return err
	})
}

// PID is the Velero server's process ID.
func (v *Velero) PID() int { return v.proc.cmd.Process.Pid }

// Heap is the live heap of the Velero server's process (its plugins run
// as processes of their own), from its profiler.
func (v *Velero) Heap(t testing.TB) Heap {
	t.Helper()
	return HeapAt(t, veleroProfiler)
}

// Stop stops the Velero server and removes its CRDs (and with them its
// objects), so that Backstop may serve velero.io next.
func (v *Velero) Stop() {
	c := v.c
	c.t.Helper()
	v.proc.stop(syscall.SIGTERM)
	c.RemoveVeleroCRDs()
}

// RemoveVeleroCRDs deletes Velero's CustomResourceDefinitions, and with
// them their objects, and waits until kube-apiserver no longer serves
// velero.io/v1 from them.
func (c *Cluster) RemoveVeleroCRDs() {
	c.t.Helper()
	crds, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).
		List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx := context.Background()
	for _, crd := range crds.Items {
		if !strings.HasSuffix(crd.GetName(), ".velero.io") {
			continue
		}
		// Velero's finalizers (restores have one) are removed by the server,
		// which is gone: without this the CRD's deletion would wait forever.
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			name, _, _ := unstructured.NestedString(v.(map[string]any), "name")
			ri := c.Dynamic.Resource(schema.GroupVersionResource{Group: "velero.io", Version: name, Resource: plural})
			list, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue // a version not served
			}
			for _, o := range list.Items {
				if len(o.GetFinalizers()) == 0 {
					continue
				}
				if _, err := ri.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.MergePatchType,
					[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
					c.t.Fatalf("removing the finalizers of %s %s/%s: %v", plural, o.GetNamespace(), o.GetName(), err)
				}
			}
		}
		if out, err := c.Kubectl(c.AdminKubeconfig, nil, "delete", "crd", crd.GetName(), "--wait=true", "--timeout=2m"); err != nil {
			c.t.Fatalf("deleting CRD %s: %v\n%s", crd.GetName(), err, out)
		}
	}
	// The aggregator's APIServices for the CRDs' group versions go too.
	c.waitFor("velero.io no longer served from CRDs", nil, 2*time.Minute, func(ctx context.Context) error {
		for _, name := range apiServiceNames {
			if !strings.HasSuffix(name, ".velero.io") {
				continue
			}
			_, err := c.Dynamic.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).
				Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("APIService %s is still there", name)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestEveryVerbThroughKubeAPIServer: the conformance suite of the
// standalone server (every API verb on every resource, the status rules)
// through kube-apiserver; then kubectl's verbs on every resource, and the
// subresources.
func TestEveryVerbThroughKubeAPIServer(t *testing.T) {
	t.Parallel()
	c := framework.StartCluster(t)
	ctx := context.Background()
	// As in the standalone suite: the backup engine off, and a user the
	// server takes for an engine.
	c.StopBackstop(false)
	c.BackstopArgs = append(c.BackstopArgs, "--disable-controllers=backup,backup-sync", "--engine-groups="+framework.EngineGroup)
	c.StartBackstop()
	for _, ns := range conformance.Namespaces {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.UserKubeconfig("test-engine", "system:masters", framework.EngineGroup))
	if err != nil {
		t.Fatal(err)
	}
	engine, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target := conformance.Target{Client: c.Backstop, Engine: engine}

	t.Run("api", func(t *testing.T) { conformance.EveryResourceAndVerb(t, target) })

	t.Run("kubectl", func(t *testing.T) {
		conformance.Prerequisites(t, target)
		objects := conformance.ValidObjects(target, "by-kubectl")
		resources := make([]string, 0, len(objects))
		for r := range objects {
			resources = append(resources, r)
		}
		sort.Strings(resources)
		// Each resource's object is its own: their kubectl runs go side by
		// side (starting kubectl is most of their time).
		for _, resource := range resources {
			obj := objects[resource]
			t.Run(resource, func(t *testing.T) {
				t.Parallel()
				kubectlVerbs(t, c, resource, obj.(metav1.Object).GetNamespace(), obj)
			})
		}
	})

	t.Run("subresources", func(t *testing.T) {
		admin := c.AdminKubeconfig
		run := func(stdin []byte, args ...string) string {
			t.Helper()
			out, err := c.Kubectl(admin, stdin, args...)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		// backups/cancel: a POST through the aggregator.
		if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "to-cancel"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Backstop.VeleroV1().RESTClient().Post().Namespace(adminNamespace).Resource("backups").Name("to-cancel").SubResource("cancel").Do(ctx).Error(); err != nil {
			t.Errorf("backups/cancel: %v", err)
		}
		if out := run(nil, "get", "backup", "to-cancel", "-n", adminNamespace, "-o", "jsonpath={.spec.cancel}"); out != "true" {
			t.Errorf("after backups/cancel: spec.cancel %q", out)
		}
		// backups/logs of a backup without a log: 404 with a message, not a hang.
		_, err := c.Kubectl(admin, nil, "get", "--raw", "/apis/velero.io/v1/namespaces/"+adminNamespace+"/backups/to-cancel/logs")
		if err == nil || !strings.Contains(err.Error(), "NotFound") {
			t.Errorf("backups/logs of a backup without a log: %v, want NotFound", err)
		}
		// schedules/pause, unpause, trigger.
		if _, err := c.Backstop.VeleroV1().Schedules(adminNamespace).Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly"},
			Spec: velerov1.ScheduleSpec{Schedule: "@every 1h", SkipImmediately: ptr(true), Template: velerov1.BackupSpec{IncludedNamespaces: []string{"vms"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		post := func(resource, name, sub string) error {
			return c.Backstop.VeleroV1().RESTClient().Post().Namespace(adminNamespace).Resource(resource).Name(name).SubResource(sub).Do(ctx).Error()
		}
		for _, step := range []struct {
			sub, paused string
		}{{"pause", "true"}, {"unpause", ""}} {
			if err := post("schedules", "hourly", step.sub); err != nil {
				t.Errorf("schedules/%s: %v", step.sub, err)
			}
			if out := run(nil, "get", "schedule", "hourly", "-n", adminNamespace, "-o", "jsonpath={.spec.paused}"); out != step.paused && !(step.paused == "" && out == "false") {
				t.Errorf("after schedules/%s: spec.paused %q", step.sub, out)
			}
		}
		scheduled := func() string {
			t.Helper()
			return strings.TrimSpace(run(nil, "get", "backups", "-n", adminNamespace, "-l", "velero.io/schedule-name=hourly", "-o", "name"))
		}
		if out := scheduled(); out != "" {
			t.Fatalf("backups of a schedule that skips its first run, before a trigger: %q", out)
		}
		if err := post("schedules", "hourly", "trigger"); err != nil {
			t.Errorf("schedules/trigger: %v", err)
		}
		poll(t, "the triggered backup", time.Minute, func(context.Context) (bool, error) { return scheduled() != "", nil })
		// virtualmachinebackups/cancel.
		vmb := []byte(`{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackup","metadata":{"name":"vmb-cancel","namespace":"vms"},
			"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm1"},"pvcName":"out"}}`)
		run(vmb, "create", "-f", "-")
		err = c.Backstop.BackupV1alpha1().RESTClient().Post().Namespace("vms").Resource("virtualmachinebackups").Name("vmb-cancel").SubResource("cancel").Do(ctx).Error()
		if err != nil && !apierrors.IsConflict(err) {
			t.Errorf("virtualmachinebackups/cancel: %v, want success or 409 for a finished backup", err)
		}
	})
}

// kubeEditor is the KUBE_EDITOR of kubectlVerbs' edit step: it changes the
// label the json patch step set.
const kubeEditor = "sed -i s/step:\\ json/step:\\ edit/"

// kubectlVerbs runs kubectl's verbs on one object of resource: create,
// get (name, table, yaml), describe, label, annotate, patch (merge and
// JSON), server-side apply, replace, edit, a watch that sees a change,
// wait, delete.
func kubectlVerbs(t *testing.T, c *framework.Cluster, resource, namespace string, obj any) {
	admin := c.AdminKubeconfig
	if resource == "nonadminbackupstoragelocationrequests" {
		// Made by the server alone: kubectl plays an engine.
		admin = c.UserKubeconfig("test-engine", "system:masters", framework.EngineGroup)
	}
	manifest, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	name := "by-kubectl"
	ref := []string{resource, name, "-n", namespace}
	run := func(stdin []byte, args ...string) string {
		t.Helper()
		out, err := c.KubectlEnv([]string{"KUBE_EDITOR=" + kubeEditor}, admin, stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	label := func() string {
		t.Helper()
		return run(nil, append([]string{"get"}, append(ref, "-o", "jsonpath={.metadata.labels.step}")...)...)
	}
	run(manifest, "create", "-f", "-")
	if out := run(nil, append([]string{"get"}, append(ref, "-o", "name")...)...); !strings.Contains(out, "/"+name) {
		t.Errorf("get -o name: %q", out)
	}
	if out := run(nil, "get", resource, "-n", namespace); !strings.HasPrefix(out, "NAME") || !strings.Contains(out, name) {
		t.Errorf("get (table): %q", out)
	}
	if out := run(nil, append([]string{"get"}, append(ref, "-o", "yaml")...)...); !strings.Contains(out, "name: "+name) {
		t.Errorf("get -o yaml: %q", out)
	}
	if out := run(nil, append([]string{"describe"}, ref...)...); !strings.Contains(out, name) {
		t.Errorf("describe: %q", out)
	}

	// A watch sees each change that follows.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	watch := exec.CommandContext(ctx, framework.Binary(t, "kubectl"), append([]string{"--kubeconfig", admin, "get", "-w"},
		append(ref, "-o", `jsonpath={.metadata.labels.step}{"\n"}`)...)...)
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Scan() // the object as it is

	steps := []struct {
		step string
		args []string
	}{
		{"label", []string{"label", resource, name, "-n", namespace, "step=label"}},
		{"merge", []string{"patch", resource, name, "-n", namespace, "--type", "merge", "-p", `{"metadata":{"labels":{"step":"merge"}}}`}},
		{"json", []string{"patch", resource, name, "-n", namespace, "--type", "json", "-p", `[{"op":"replace","path":"/metadata/labels/step","value":"json"}]`}},
		{"edit", []string{"edit", resource, name, "-n", namespace}},
	}
	// Engines may write the status meanwhile (a NonAdminBackup's engine
	// mirrors its backup): events that leave the label as it was are
	// skipped.
	prev := lines.Text()
	for _, s := range steps {
		run(nil, s.args...)
		if got := label(); got != s.step {
			t.Errorf("after %s: label step=%q", s.step, got)
		}
		for lines.Scan() && lines.Text() == prev {
		}
		if lines.Text() != s.step {
			t.Errorf("kubectl get -w after %s: %q", s.step, lines.Text())
		}
		prev = lines.Text()
	}
	run(nil, append([]string{"annotate"}, append(ref, "note=by-kubectl")...)...)

	// Server-side apply by a second manager, then replace.
	var applied map[string]any
	_ = json.Unmarshal(manifest, &applied)
	applied["metadata"].(map[string]any)["labels"] = map[string]any{"step": "apply"}
	data, _ := json.Marshal(applied)
	run(data, "apply", "--server-side", "--field-manager", "ops-team", "--force-conflicts", "-f", "-")
	if out := run(nil, append([]string{"get"}, append(ref, "-o", "jsonpath={.metadata.labels.step} {.metadata.managedFields[*].manager}")...)...); !strings.HasPrefix(out, "apply ") || !strings.Contains(out, "ops-team") {
		t.Errorf("after apply --server-side: %q", out)
	}
	// replace sends the object with the resourceVersion read: an engine's
	// status write in between makes it a 409, as for any client, which
	// reads and replaces again.
	if err := retry.OnError(retry.DefaultRetry, func(err error) bool { return strings.Contains(err.Error(), "(Conflict)") }, func() error {
		current := run(nil, append([]string{"get"}, append(ref, "-o", "json")...)...)
		_, err := c.Kubectl(admin, []byte(strings.Replace(current, `"step": "apply"`, `"step": "replace"`, 1)), "replace", "-f", "-")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := label(); got != "replace" {
		t.Errorf("after replace: label step=%q", got)
	}

	run(nil, append([]string{"wait", "--for=jsonpath={.metadata.labels.step}=replace", "--timeout=30s"}, ref...)...)
	if resource == "nonadminbackups" {
		// The design's flow: a plain delete waits (Deleting,
		// DeletionPending) for the owner to say what becomes of the
		// backup; deleteBackup deletes it with its data.
		run(nil, append([]string{"delete", "--wait=false"}, ref...)...)
		run(nil, append([]string{"wait", "--for=jsonpath={.status.conditions[?(@.type==\"Deleting\")].reason}=DeletionPending", "--timeout=60s"}, ref...)...)
		run(nil, append([]string{"patch", "--type=merge", "-p", `{"spec":{"deleteBackup":true}}`}, ref...)...)
		run(nil, append([]string{"wait", "--for=delete", "--timeout=60s"}, ref...)...)
	} else {
		run(nil, append([]string{"delete", "--wait"}, ref...)...)
	}
	if _, err := c.Kubectl(admin, nil, append([]string{"get"}, ref...)...); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}

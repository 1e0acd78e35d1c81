package apiserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/configuration"
	"github.com/backstop-io/backstop/test/integration/framework"
)

const configuredLocations = `apiVersion: velero.io/v1
kind: BackupStorageLocation
metadata:
  name: primary
spec:
  provider: aws
  default: true
  objectStorage: {bucket: backups, prefix: cluster-a}
  config: {region: eu-west-1, s3Url: "http://127.0.0.1:1"}
---
apiVersion: velero.io/v1
kind: VolumeSnapshotLocation
metadata:
  name: snapshots
spec:
  provider: aws
  config: {region: eu-west-1}
`

const configuredPolicy = `apiVersion: oadp.openshift.io/v1alpha1
kind: DataProtectionApplication
metadata:
  name: backstop
spec:
  nonAdmin:
    enable: true
    requireApprovalForBSL: true
`

const configuredSchedule = `apiVersion: velero.io/v1
kind: Schedule
metadata:
  name: backstop-nightly
  labels: {team: platform}
spec:
  schedule: "0 2 * * *"
  paused: true
  template:
    includedNamespaces: [shop]
`

// TestConfigurationDir: --configuration-dir (what the Helm chart's
// storage locations, snapshot locations and schedules become). At start
// the engines apply its objects, labelled as the configuration's, and make
// no default location when it holds one; restarted on another content,
// what left it is deleted, what changed is updated, and what was made by
// hand stays; a content that does not read changes nothing and stops
// nothing.
func TestConfigurationDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	write := func(files map[string]string) {
		t.Helper()
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.Remove(filepath.Join(dir, e.Name()))
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(map[string]string{"locations.yaml": configuredLocations, "schedules.yaml": configuredSchedule, "policy.yaml": configuredPolicy})
	args := []string{"--configuration-dir=" + dir}
	s := framework.Start(t, framework.Options{Args: args})
	v1 := s.Clientset.VeleroV1()
	until := func(what string, cond func(context.Context) (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, cond); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("applied", func(t *testing.T) {
		l := waitLocation(t, s, "primary", func(*velerov1.BackupStorageLocation) bool { return true })
		if l.Labels[configuration.Label] != configuration.LabelValue || !l.Spec.Default || l.Spec.ObjectStorage == nil ||
			l.Spec.ObjectStorage.Prefix != "cluster-a" || l.Spec.Config["region"] != "eu-west-1" {
			t.Errorf("the configured location: %+v", l)
		}
		if _, err := v1.VolumeSnapshotLocations(ns).Get(ctx, "snapshots", metav1.GetOptions{}); err != nil {
			t.Errorf("the configured snapshot location: %v", err)
		}
		sch, err := v1.Schedules(ns).Get(ctx, "backstop-nightly", metav1.GetOptions{})
		if err != nil || sch.Spec.Schedule != "0 2 * * *" || sch.Labels["team"] != "platform" || sch.Labels[configuration.Label] != configuration.LabelValue {
			t.Fatalf("the configured schedule: %v, %+v", err, sch)
		}
		if dpa, err := s.Clientset.OadpV1alpha1().DataProtectionApplications(ns).Get(ctx, "backstop", metav1.GetOptions{}); err != nil ||
			dpa.Spec.NonAdmin == nil || dpa.Spec.NonAdmin.Enable == nil || !*dpa.Spec.NonAdmin.Enable || dpa.Labels[configuration.Label] != configuration.LabelValue {
			t.Errorf("the configured policy: %v, %+v", err, dpa)
		}
		if _, err := v1.BackupStorageLocations(ns).Get(ctx, "default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the default location with a configured one: %v, want none", err)
		}
		if _, err := v1.Schedules(ns).Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns},
			Spec: velerov1.ScheduleSpec{Schedule: "@hourly", Paused: true}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	step("changed-and-pruned", func(t *testing.T) {
		write(map[string]string{"schedules.yaml": strings.Replace(configuredSchedule, `"0 2 * * *"`, `"0 3 * * *"`, 1)})
		s.RestartWith(args)
		until("the changed schedule", func(ctx context.Context) (bool, error) {
			sch, err := v1.Schedules(ns).Get(ctx, "backstop-nightly", metav1.GetOptions{})
			return err == nil && sch.Spec.Schedule == "0 3 * * *", nil
		})
		until("the locations and the policy gone from the configuration deleted", func(ctx context.Context) (bool, error) {
			_, errL := v1.BackupStorageLocations(ns).Get(ctx, "primary", metav1.GetOptions{})
			_, errS := v1.VolumeSnapshotLocations(ns).Get(ctx, "snapshots", metav1.GetOptions{})
			_, errP := s.Clientset.OadpV1alpha1().DataProtectionApplications(ns).Get(ctx, "backstop", metav1.GetOptions{})
			return apierrors.IsNotFound(errL) && apierrors.IsNotFound(errS) && apierrors.IsNotFound(errP), nil
		})
		// No configured location: the server's default is made.
		waitLocation(t, s, "default", func(*velerov1.BackupStorageLocation) bool { return true })
		if _, err := v1.Schedules(ns).Get(ctx, "by-hand", metav1.GetOptions{}); err != nil {
			t.Errorf("the schedule made by hand: %v, want it left alone", err)
		}
	})

	step("unreadable", func(t *testing.T) {
		write(map[string]string{"schedules.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: not-mine}\n"})
		s.RestartWith(args)
		// The engines run: a backup completes (of its namespace only: a
		// backup of every namespace takes in the VMs other suites run on the
		// shared libvirt, and fails on their disks).
		createBackup(t, s, "after-a-bad-configuration", ns)
		waitBackup(t, s, "after-a-bad-configuration", "Completed", func(b *velerov1.Backup) bool { return b.Status.Phase == velerov1.BackupPhaseCompleted })
		if _, err := v1.Schedules(ns).Get(ctx, "backstop-nightly", metav1.GetOptions{}); err != nil {
			t.Errorf("the configured schedule after a configuration that does not read: %v, want it kept", err)
		}
		log, _ := os.ReadFile(filepath.Join(s.DataDir, "server.log"))
		if !strings.Contains(string(log), "The configuration is not applied") || !strings.Contains(string(log), "not a configuration's kind") {
			t.Errorf("the server's log does not say why the configuration is not applied")
		}
	})
}

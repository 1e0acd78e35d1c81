package conformance

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	kvv1alpha1 "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadpclient "github.com/backstop-io/backstop/pkg/generated/clientset/versioned/typed/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/rootdir/rootdirtest"
)

// Tenant is a user bound to edit in its own namespace.
type Tenant struct {
	Namespace string
	Client    versioned.Interface
	// Kube reaches RBAC (and, on a host cluster, core objects) as the
	// tenant.
	Kube kubernetes.Interface
	// HTTP fetches URLs as the tenant (its credentials, the server's CA).
	HTTP *http.Client
}

// TenantTarget is a server with two tenants and its admin.
type TenantTarget struct {
	Admin     versioned.Interface
	AdminKube kubernetes.Interface
	// AdminNamespace holds the Velero objects.
	AdminNamespace string
	A, B           Tenant
	// Core is set when the server's cluster serves core objects
	// (Secrets): a host cluster.
	Core bool
	// DataDir is the server's data directory when the test can read it:
	// its files (but Pebble's, which change with every write) must be
	// unchanged by the attacks.
	DataDir string
}

// attack is one row of the matrix: what tenant A tries.
type attack struct {
	name string
	try  func(ctx context.Context) error
}

// TenantAttacks runs tenant A against tenant B and the admin: every row
// must be refused (403, 404 or 422) and change nothing the admin can
// read; then A's own paths must work. It prints "N attacks, N refused or
// harmless, 0 leaked".
func TenantAttacks(t *testing.T, target TenantTarget) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, b := target.A, target.B
	adminNS := target.AdminNamespace

	// B's objects, and A's own, settled (backups finished, mirrored).
	newNAB := func(tn Tenant, name string) *oadpv1alpha1.NonAdminBackup {
		t.Helper()
		if _, err := tn.Client.OadpV1alpha1().NonAdminBackups(tn.Namespace).Create(ctx, &oadpv1alpha1.NonAdminBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating NonAdminBackup %s/%s: %v", tn.Namespace, name, err)
		}
		var nab *oadpv1alpha1.NonAdminBackup
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			nab, err = target.Admin.OadpV1alpha1().NonAdminBackups(tn.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			vb := nab.Status.VeleroBackup
			return nab.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && vb != nil && vb.Status != nil && vb.Status.Phase.Terminal(), nil
		}); err != nil {
			t.Fatalf("NonAdminBackup %s/%s did not finish: %v", tn.Namespace, name, err)
		}
		return nab
	}
	bNAB := newNAB(b, "bob-nab")
	newNAB(a, "alice-nab")
	if _, err := b.Client.OadpV1alpha1().NonAdminRestores(b.Namespace).Create(ctx, &oadpv1alpha1.NonAdminRestore{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-nar"}, Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: &velerov1.RestoreSpec{BackupName: "bob-nab"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nar, err := target.Admin.OadpV1alpha1().NonAdminRestores(b.Namespace).Get(ctx, "bob-nar", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vr := nar.Status.VeleroRestore
		return vr != nil && vr.Status != nil && vr.Status.Phase.Terminal(), nil
	}); err != nil {
		t.Fatalf("NonAdminRestore bob-nar did not finish: %v", err)
	}
	bBackup := bNAB.Status.VeleroBackup.Name
	// B's storage location, settled: its request made, its Secret missing
	// (or, standalone, no Secrets at all), so it backs off.
	if _, err := b.Client.OadpV1alpha1().NonAdminBackupStorageLocations(b.Namespace).Create(ctx, tenantLocation("bob-loc", "aws", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating B's NonAdminBackupStorageLocation: %v", err)
	}
	var bLocation string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := target.Admin.OadpV1alpha1().NonAdminBackupStorageLocations(b.Namespace).Get(ctx, "bob-loc", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if v := l.Status.VeleroBackupStorageLocation; v != nil {
			bLocation = v.NACUUID
		}
		return l.Status.Phase == oadpv1alpha1.NonAdminPhaseBackingOff && bLocation != "", nil
	}); err != nil {
		t.Fatalf("B's NonAdminBackupStorageLocation did not settle: %v", err)
	}
	aLocations, ownLocations := a.Client.OadpV1alpha1().NonAdminBackupStorageLocations(b.Namespace), a.Client.OadpV1alpha1().NonAdminBackupStorageLocations(a.Namespace)
	// B's schedule and download request, settled.
	if _, err := b.Client.OadpV1alpha1().NonAdminSchedules(b.Namespace).Create(ctx, &oadpv1alpha1.NonAdminSchedule{ObjectMeta: metav1.ObjectMeta{Name: "bob-nas"},
		Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@every 1h", Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating B's NonAdminSchedule: %v", err)
	}
	if _, err := b.Client.OadpV1alpha1().NonAdminDownloadRequests(b.Namespace).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: "bob-nadr"},
		Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "bob-nab"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating B's NonAdminDownloadRequest: %v", err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nas, err := target.Admin.OadpV1alpha1().NonAdminSchedules(b.Namespace).Get(ctx, "bob-nas", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		nadr, err := target.Admin.OadpV1alpha1().NonAdminDownloadRequests(b.Namespace).Get(ctx, "bob-nadr", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vs := nas.Status.VeleroSchedule
		return nas.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated && nas.Status.NextRun != nil && vs != nil && vs.Status != nil &&
			vs.Status.Phase == velerov1.SchedulePhaseEnabled && nadr.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated, nil
	}); err != nil {
		t.Fatalf("B's NonAdminSchedule and NonAdminDownloadRequest did not settle: %v", err)
	}
	aSchedules, aDownloads := a.Client.OadpV1alpha1().NonAdminSchedules(b.Namespace), a.Client.OadpV1alpha1().NonAdminDownloadRequests(b.Namespace)
	// A's own link to its backup's contents, to forge from.
	aLink, aBackup := ownLink(ctx, t, target)
	links := LinkClient(ctx, t, target.Admin, target.AdminNamespace)

	// aNABs, aNARs: A's clients of B's namespace.
	aNABs := a.Client.OadpV1alpha1().NonAdminBackups(b.Namespace)
	aNARs := a.Client.OadpV1alpha1().NonAdminRestores(b.Namespace)
	ownNABs, ownNARs := a.Client.OadpV1alpha1().NonAdminBackups(a.Namespace), a.Client.OadpV1alpha1().NonAdminRestores(a.Namespace)
	velero := a.Client.VeleroV1()
	rc := a.Client.OadpV1alpha1().RESTClient()
	nab := func(mutate func(*velerov1.BackupSpec)) *oadpv1alpha1.NonAdminBackup {
		spec := &velerov1.BackupSpec{}
		mutate(spec)
		return &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"}, Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: spec}}
	}
	nar := func(mutate func(*velerov1.RestoreSpec)) *oadpv1alpha1.NonAdminRestore {
		spec := &velerov1.RestoreSpec{BackupName: "alice-nab"}
		mutate(spec)
		return &oadpv1alpha1.NonAdminRestore{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"}, Spec: oadpv1alpha1.NonAdminRestoreSpec{RestoreSpec: spec}}
	}
	watchErr := func(w interface{ Stop() }, err error) error {
		if err == nil {
			w.Stop()
		}
		return err
	}

	attacks := []attack{
		// B's objects.
		{"get B's NonAdminBackup", func(ctx context.Context) error { return errOf(aNABs.Get(ctx, "bob-nab", metav1.GetOptions{})) }},
		{"list B's NonAdminBackups", func(ctx context.Context) error { return errOf(aNABs.List(ctx, metav1.ListOptions{})) }},
		{"watch B's NonAdminBackups", func(ctx context.Context) error { return watchErr(aNABs.Watch(ctx, metav1.ListOptions{})) }},
		{"patch B's NonAdminBackup", func(ctx context.Context) error {
			return errOf(aNABs.Patch(ctx, "bob-nab", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}))
		}},
		{"set deleteBackup on B's NonAdminBackup", func(ctx context.Context) error {
			return errOf(aNABs.Patch(ctx, "bob-nab", types.MergePatchType, []byte(`{"spec":{"deleteBackup":true}}`), metav1.PatchOptions{}))
		}},
		{"delete B's NonAdminBackup", func(ctx context.Context) error { return aNABs.Delete(ctx, "bob-nab", metav1.DeleteOptions{}) }},
		{"write B's NonAdminBackup status", func(ctx context.Context) error {
			return errOf(aNABs.Patch(ctx, "bob-nab", types.MergePatchType, []byte(`{"status":{"phase":"Deleting"}}`), metav1.PatchOptions{}, "status"))
		}},
		{"read B's backup log", func(ctx context.Context) error {
			return rc.Get().Namespace(b.Namespace).Resource("nonadminbackups").Name("bob-nab").SubResource("logs").Do(ctx).Error()
		}},
		{"cancel B's backup", func(ctx context.Context) error {
			return rc.Post().Namespace(b.Namespace).Resource("nonadminbackups").Name("bob-nab").SubResource("cancel").Do(ctx).Error()
		}},
		{"get B's NonAdminRestore", func(ctx context.Context) error { return errOf(aNARs.Get(ctx, "bob-nar", metav1.GetOptions{})) }},
		{"list B's NonAdminRestores", func(ctx context.Context) error { return errOf(aNARs.List(ctx, metav1.ListOptions{})) }},
		{"delete B's NonAdminRestore", func(ctx context.Context) error { return aNARs.Delete(ctx, "bob-nar", metav1.DeleteOptions{}) }},
		{"read B's restore log", func(ctx context.Context) error {
			return rc.Get().Namespace(b.Namespace).Resource("nonadminrestores").Name("bob-nar").SubResource("logs").Do(ctx).Error()
		}},
		{"follow B's restore log", func(ctx context.Context) error {
			return rc.Get().Namespace(b.Namespace).Resource("nonadminrestores").Name("bob-nar").SubResource("log").Param("follow", "true").Do(ctx).Error()
		}},
		{"read B's restore preview (the objects of its dry run)", func(ctx context.Context) error {
			return rc.Get().Namespace(b.Namespace).Resource("nonadminrestores").Name("bob-nar").SubResource("preview").Do(ctx).Error()
		}},
		{"rotate the password of a repository", func(ctx context.Context) error {
			return errOf(velero.BackupRepositories(adminNS).Patch(ctx, "any-kopia", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"backstop.io/rotate-password":"now"}}}`), metav1.PatchOptions{}))
		}},
		{"mark an admin's location as Velero's (its shared password)", func(ctx context.Context) error {
			return errOf(velero.BackupStorageLocations(adminNS).Patch(ctx, "default", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"backstop.io/repository-password":"velero"}}}`), metav1.PatchOptions{}))
		}},
		{"create a NonAdminBackup in B's namespace", func(ctx context.Context) error {
			return errOf(aNABs.Create(ctx, nab(func(*velerov1.BackupSpec) {}), metav1.CreateOptions{}))
		}},
		{"get B's NonAdminBackupStorageLocation", func(ctx context.Context) error { return errOf(aLocations.Get(ctx, "bob-loc", metav1.GetOptions{})) }},
		{"list B's NonAdminBackupStorageLocations", func(ctx context.Context) error { return errOf(aLocations.List(ctx, metav1.ListOptions{})) }},
		{"write B's NonAdminBackupStorageLocation status", func(ctx context.Context) error {
			return errOf(aLocations.Patch(ctx, "bob-loc", types.MergePatchType, []byte(`{"status":{"phase":"Created"}}`), metav1.PatchOptions{}, "status"))
		}},
		{"delete B's NonAdminBackupStorageLocation", func(ctx context.Context) error { return aLocations.Delete(ctx, "bob-loc", metav1.DeleteOptions{}) }},
		{"a NonAdminBackup to B's storage location", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, nab(func(s *velerov1.BackupSpec) { s.StorageLocation = "bob-loc" }), metav1.CreateOptions{}))
		}},
		{"get B's NonAdminSchedule", func(ctx context.Context) error { return errOf(aSchedules.Get(ctx, "bob-nas", metav1.GetOptions{})) }},
		{"list B's NonAdminSchedules", func(ctx context.Context) error { return errOf(aSchedules.List(ctx, metav1.ListOptions{})) }},
		{"pause B's NonAdminSchedule", func(ctx context.Context) error {
			return errOf(aSchedules.Patch(ctx, "bob-nas", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}))
		}},
		{"write B's NonAdminSchedule status", func(ctx context.Context) error {
			return errOf(aSchedules.Patch(ctx, "bob-nas", types.MergePatchType, []byte(`{"status":{"phase":"Deleting"}}`), metav1.PatchOptions{}, "status"))
		}},
		{"delete B's NonAdminSchedule", func(ctx context.Context) error { return aSchedules.Delete(ctx, "bob-nas", metav1.DeleteOptions{}) }},
		{"get B's NonAdminDownloadRequest (its link)", func(ctx context.Context) error {
			return errOf(aDownloads.Get(ctx, "bob-nadr", metav1.GetOptions{}))
		}},
		{"list B's NonAdminDownloadRequests", func(ctx context.Context) error { return errOf(aDownloads.List(ctx, metav1.ListOptions{})) }},
		{"delete B's NonAdminDownloadRequest", func(ctx context.Context) error { return aDownloads.Delete(ctx, "bob-nadr", metav1.DeleteOptions{}) }},
		{"get B's NonAdminBackupStorageLocationRequest", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(adminNS).Get(ctx, bLocation, metav1.GetOptions{}))
		}},
		{"a download request of B's backup", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminDownloadRequests(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec:       oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupContents, Name: "bob-nab"}}}, metav1.CreateOptions{}))
		}},
		{"a download request in B's namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminDownloadRequests(b.Namespace).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec:       oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupContents, Name: "bob-nab"}}}, metav1.CreateOptions{}))
		}},
		{"a download request of B's restore", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminDownloadRequests(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec:       oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindRestoreLog, Name: "bob-nar"}}}, metav1.CreateOptions{}))
		}},
		{"a schedule of B's namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminSchedules(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminSchedule{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@daily",
					Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{IncludedNamespaces: []string{b.Namespace}}}}}, metav1.CreateOptions{}))
		}},
		{"a schedule in B's namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminSchedules(b.Namespace).Create(ctx, &oadpv1alpha1.NonAdminSchedule{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec:       oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@daily", Template: oadpv1alpha1.NonAdminScheduleTemplate{BackupSpec: &velerov1.BackupSpec{}}}}, metav1.CreateOptions{}))
		}},
		{"list Schedules in the admin namespace", func(ctx context.Context) error {
			return errOf(velero.Schedules(adminNS).List(ctx, metav1.ListOptions{}))
		}},
		// The admin's decisions on storage locations.
		{"list NonAdminBackupStorageLocationRequests", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(adminNS).List(ctx, metav1.ListOptions{}))
		}},
		{"approve B's storage location", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(adminNS).Patch(ctx, bLocation, types.MergePatchType,
				[]byte(`{"spec":{"approvalDecision":"approve"}}`), metav1.PatchOptions{}))
		}},
		{"a NonAdminBackupStorageLocationRequest in its own namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminBackupStorageLocationRequests(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminBackupStorageLocationRequest{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"}, Spec: oadpv1alpha1.NonAdminBackupStorageLocationRequestSpec{ApprovalDecision: "approve"}}, metav1.CreateOptions{}))
		}},
		// Across namespaces.
		{"list NonAdminBackups of every namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminBackups("").List(ctx, metav1.ListOptions{}))
		}},
		{"watch NonAdminBackups of every namespace", func(ctx context.Context) error {
			return watchErr(a.Client.OadpV1alpha1().NonAdminBackups("").Watch(ctx, metav1.ListOptions{}))
		}},
		{"list NonAdminRestores of every namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminRestores("").List(ctx, metav1.ListOptions{}))
		}},
		// The admin's Velero objects.
		{"get B's Velero Backup", func(ctx context.Context) error {
			return errOf(velero.Backups(adminNS).Get(ctx, bBackup, metav1.GetOptions{}))
		}},
		{"list Backups in the admin namespace", func(ctx context.Context) error { return errOf(velero.Backups(adminNS).List(ctx, metav1.ListOptions{})) }},
		{"list Backups of every namespace", func(ctx context.Context) error { return errOf(velero.Backups("").List(ctx, metav1.ListOptions{})) }},
		{"watch Backups in the admin namespace", func(ctx context.Context) error {
			return watchErr(velero.Backups(adminNS).Watch(ctx, metav1.ListOptions{}))
		}},
		{"cancel B's Velero Backup", func(ctx context.Context) error {
			return velero.RESTClient().Post().Namespace(adminNS).Resource("backups").Name(bBackup).SubResource("cancel").Do(ctx).Error()
		}},
		{"read B's Velero Backup log", func(ctx context.Context) error {
			return velero.RESTClient().Get().Namespace(adminNS).Resource("backups").Name(bBackup).SubResource("logs").Do(ctx).Error()
		}},
		{"create a Backup in the admin namespace", func(ctx context.Context) error {
			return errOf(velero.Backups(adminNS).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: velerov1.BackupSpec{IncludedNamespaces: []string{b.Namespace}}}, metav1.CreateOptions{}))
		}},
		{"create a Backup in its own namespace", func(ctx context.Context) error {
			return errOf(velero.Backups(a.Namespace).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: velerov1.BackupSpec{IncludedNamespaces: []string{b.Namespace}}}, metav1.CreateOptions{}))
		}},
		{"list Restores in the admin namespace", func(ctx context.Context) error {
			return errOf(velero.Restores(adminNS).List(ctx, metav1.ListOptions{}))
		}},
		{"create a Restore of B's backup", func(ctx context.Context) error {
			return errOf(velero.Restores(adminNS).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: velerov1.RestoreSpec{BackupName: bBackup, NamespaceMapping: map[string]string{b.Namespace: a.Namespace}}}, metav1.CreateOptions{}))
		}},
		{"create a DeleteBackupRequest of B's backup", func(ctx context.Context) error {
			return errOf(velero.DeleteBackupRequests(adminNS).Create(ctx, &velerov1.DeleteBackupRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: velerov1.DeleteBackupRequestSpec{BackupName: bBackup}}, metav1.CreateOptions{}))
		}},
		{"list DeleteBackupRequests", func(ctx context.Context) error {
			return errOf(velero.DeleteBackupRequests(adminNS).List(ctx, metav1.ListOptions{}))
		}},
		{"list BackupStorageLocations", func(ctx context.Context) error {
			return errOf(velero.BackupStorageLocations(adminNS).List(ctx, metav1.ListOptions{}))
		}},
		{"create a DownloadRequest of B's backup", func(ctx context.Context) error {
			return errOf(velero.DownloadRequests(adminNS).Create(ctx, &velerov1.DownloadRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupContents, Name: bBackup}}}, metav1.CreateOptions{}))
		}},
		{"list DataProtectionApplications", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().DataProtectionApplications(adminNS).List(ctx, metav1.ListOptions{}))
		}},
		{"relax the policy", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().DataProtectionApplications(adminNS).Create(ctx, &oadpv1alpha1.DataProtectionApplication{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"}, Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{}}}, metav1.CreateOptions{}))
		}},
		{"a DataProtectionApplication in its own namespace", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().DataProtectionApplications(a.Namespace).Create(ctx, &oadpv1alpha1.DataProtectionApplication{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"}, Spec: oadpv1alpha1.DataProtectionApplicationSpec{NonAdmin: &oadpv1alpha1.NonAdmin{}}}, metav1.CreateOptions{}))
		}},
		// Its own namespace, asking for more than it may.
		{"a NonAdminBackupStorageLocation on a directory of the server", func(ctx context.Context) error {
			return errOf(ownLocations.Create(ctx, tenantLocation("", "filesystem", nil), metav1.CreateOptions{}))
		}},
		{"a NonAdminBackupStorageLocation with a credentials file of the server", func(ctx context.Context) error {
			return errOf(ownLocations.Create(ctx, tenantLocation("", "aws", func(s *velerov1.BackupStorageLocationSpec) {
				s.Config["credentialsFile"] = "/var/lib/backstop/credentials"
			}), metav1.CreateOptions{}))
		}},
		{"a default NonAdminBackupStorageLocation", func(ctx context.Context) error {
			return errOf(ownLocations.Create(ctx, tenantLocation("", "aws", func(s *velerov1.BackupStorageLocationSpec) { s.Default = true }), metav1.CreateOptions{}))
		}},
		{"a NonAdminBackup of B's namespace", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, nab(func(s *velerov1.BackupSpec) { s.IncludedNamespaces = []string{b.Namespace} }), metav1.CreateOptions{}))
		}},
		{"a NonAdminBackup of every namespace", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, nab(func(s *velerov1.BackupSpec) { s.IncludedNamespaces = []string{"*"} }), metav1.CreateOptions{}))
		}},
		{"a NonAdminBackup with cluster resources", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, nab(func(s *velerov1.BackupSpec) { s.IncludeClusterResources = ptr.To(true) }), metav1.CreateOptions{}))
		}},
		{"a NonAdminBackup to an admin storage location", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, nab(func(s *velerov1.BackupSpec) { s.StorageLocation = "default" }), metav1.CreateOptions{}))
		}},
		{"a NonAdminBackup with a hook in B's namespace", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, nab(func(s *velerov1.BackupSpec) {
				s.Hooks.Resources = []velerov1.BackupResourceHookSpec{{Name: "h", IncludedNamespaces: []string{b.Namespace}}}
			}), metav1.CreateOptions{}))
		}},
		{"a NonAdminRestore of B's backup", func(ctx context.Context) error {
			return errOf(ownNARs.Create(ctx, nar(func(s *velerov1.RestoreSpec) { s.BackupName = "bob-nab" }), metav1.CreateOptions{}))
		}},
		{"a NonAdminRestore of B's Velero backup by its name", func(ctx context.Context) error {
			return errOf(ownNARs.Create(ctx, nar(func(s *velerov1.RestoreSpec) { s.BackupName = bBackup }), metav1.CreateOptions{}))
		}},
		{"a NonAdminRestore mapped into B's namespace", func(ctx context.Context) error {
			return errOf(ownNARs.Create(ctx, nar(func(s *velerov1.RestoreSpec) { s.NamespaceMapping = map[string]string{a.Namespace: b.Namespace} }), metav1.CreateOptions{}))
		}},
		{"a NonAdminRestore whose resource modifiers are a Secret", func(ctx context.Context) error {
			return errOf(ownNARs.Create(ctx, nar(func(s *velerov1.RestoreSpec) {
				s.ResourceModifier = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "modifier"}
			}), metav1.CreateOptions{}))
		}},
		{"a NonAdminRestore with a hook in B's namespace", func(ctx context.Context) error {
			return errOf(ownNARs.Create(ctx, nar(func(s *velerov1.RestoreSpec) {
				s.Hooks.Resources = []velerov1.RestoreResourceHookSpec{{Name: "h", IncludedNamespaces: []string{b.Namespace}}}
			}), metav1.CreateOptions{}))
		}},
		// Its own objects' status: the server's.
		{"point its own NonAdminBackup at B's Backup", func(ctx context.Context) error {
			patch := fmt.Sprintf(`{"status":{"phase":"Created","veleroBackup":{"nacuuid":%q,"name":%q,"namespace":%q}}}`, bBackup, bBackup, adminNS)
			return errOf(ownNABs.Patch(ctx, "alice-nab", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"))
		}},
		{"update its own NonAdminBackup status", func(ctx context.Context) error {
			cur, err := ownNABs.Get(ctx, "alice-nab", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading its own NonAdminBackup: %w", err)
			}
			cur.Status.VeleroBackup.Name = bBackup
			return errOf(ownNABs.UpdateStatus(ctx, cur, metav1.UpdateOptions{}))
		}},
		// Escalation.
		{"bind itself to cluster-admin", func(ctx context.Context) error {
			return errOf(a.Kube.RbacV1().RoleBindings(a.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "attack"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}))
		}},
		{"grant itself status writes", func(ctx context.Context) error {
			return errOf(a.Kube.RbacV1().Roles(a.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "attack"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{oadpv1alpha1.GroupName}, Resources: []string{"nonadminbackups/status"}, Verbs: []string{"update", "patch"}}}}, metav1.CreateOptions{}))
		}},
		{"bind itself in B's namespace", func(ctx context.Context) error {
			return errOf(a.Kube.RbacV1().RoleBindings(b.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "attack"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}))
		}},
	}
	// Links are bearer tokens for one file until they expire: A's own
	// link, changed, must open nothing.
	attacks = append(attacks,
		attack{"A's download link pointed at B's backup", func(ctx context.Context) error {
			return fetch(ctx, links, forgeLink(t, aLink, func(q url.Values, target *string) { *target = strings.ReplaceAll(*target, aBackup, bBackup) }))
		}},
		attack{"A's download link with a later expiry", func(ctx context.Context) error {
			return fetch(ctx, links, forgeLink(t, aLink, func(q url.Values, _ *string) {
				e, _ := strconv.ParseInt(q.Get("expires"), 10, 64)
				q.Set("expires", strconv.FormatInt(e+3600, 10))
			}))
		}},
		attack{"A's download link replayed for another file of the backup", func(ctx context.Context) error {
			return fetch(ctx, links, forgeLink(t, aLink, func(q url.Values, target *string) {
				*target = strings.ReplaceAll(*target, string(velerov1.DownloadTargetKindBackupContents), string(velerov1.DownloadTargetKindBackupResourceList))
			}))
		}},
	)
	// Names that become paths under the server's data directory: each
	// variant on each field, in its own namespace, where it may create
	// VM backups and trackers.
	attacks = append(attacks, pathAttacks(a)...)
	// The server's link labels on what a tenant's backups carry: a
	// schedule's backups take its template's labels.
	link := func(key, value string) *velerov1.BackupSpec {
		return &velerov1.BackupSpec{Metadata: velerov1.Metadata{Labels: map[string]string{key: value}}}
	}
	attacks = append(attacks,
		attack{"a NonAdminSchedule whose backups carry B's link label", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminSchedules(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminSchedule{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@daily", Template: oadpv1alpha1.NonAdminScheduleTemplate{
					BackupSpec: link(oadpv1alpha1.NabOriginNACUUIDLabel, bNAB.Status.VeleroBackup.NACUUID)}}}, metav1.CreateOptions{}))
		}},
		attack{"a NonAdminSchedule whose backups say they were synced", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminSchedules(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminSchedule{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: oadpv1alpha1.NonAdminScheduleSpec{Schedule: "@daily", Template: oadpv1alpha1.NonAdminScheduleTemplate{
					BackupSpec: link(oadpv1alpha1.NabSyncLabel, bLocation)}}}, metav1.CreateOptions{}))
		}},
		attack{"a NonAdminBackup carrying velero.io/storage-location", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: link(velerov1.StorageLocationLabel, "default")}}, metav1.CreateOptions{}))
		}},
		attack{"a NonAdminBackup carrying a backstop.io label", func(ctx context.Context) error {
			return errOf(ownNABs.Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
				Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: link("backstop.io/vm-backup-series", "x")}}, metav1.CreateOptions{}))
		}},
	)
	if target.Core {
		attacks = append(attacks,
			attack{"list Secrets in the admin namespace", func(ctx context.Context) error {
				return errOf(a.Kube.CoreV1().Secrets(adminNS).List(ctx, metav1.ListOptions{}))
			}},
			attack{"list Secrets of every namespace", func(ctx context.Context) error {
				return errOf(a.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}))
			}},
			attack{"read a repository's password", func(ctx context.Context) error {
				return errOf(a.Kube.CoreV1().Secrets(adminNS).List(ctx, metav1.ListOptions{LabelSelector: "backstop.io/backup-repository"}))
			}},
		)
	}

	t.Run("every attack refused or harmless", func(t *testing.T) {
		before := fingerprint(ctx, t, target)
		filesBefore := DataDirSums(t, target.DataDir)
		refused, leaked := 0, 0
		for _, at := range attacks {
			err := at.try(ctx)
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
				refused++
				var st apierrors.APIStatus
				if errors.As(err, &st) {
					t.Logf("refused %d  %s", st.Status().Code, at.name)
				}
				continue
			}
			leaked++
			t.Errorf("%s: not refused: %v", at.name, err)
		}
		after := fingerprint(ctx, t, target)
		leaked += CompareSums(t, filesBefore, DataDirSums(t, target.DataDir))
		for k, v := range before {
			if after[k] != v {
				leaked++
				t.Errorf("changed by an attack: %s %s → %s", k, v, after[k])
			}
		}
		for k, v := range after {
			if _, ok := before[k]; !ok {
				leaked++
				t.Errorf("made by an attack: %s %s", k, v)
			}
		}
		total := len(attacks)
		if target.Core {
			// Accepted, and harmless: a location of A's on the server's
			// loopback (where tenants have Secrets, and so locations the
			// server opens) is made and never reaches the listener.
			total++
			if loopbackLocation(ctx, t, target) {
				refused++
			} else {
				leaked++
			}
		}
		t.Logf("%d attacks, %d refused or harmless, %d leaked", total, refused, leaked)
	})

	// A's own paths work.
	own := []attack{
		{"get its NonAdminBackup", func(ctx context.Context) error { return errOf(ownNABs.Get(ctx, "alice-nab", metav1.GetOptions{})) }},
		{"list its NonAdminBackups", func(ctx context.Context) error { return errOf(ownNABs.List(ctx, metav1.ListOptions{})) }},
		{"watch its NonAdminBackups", func(ctx context.Context) error { return watchErr(ownNABs.Watch(ctx, metav1.ListOptions{})) }},
		{"read its backup log", func(ctx context.Context) error {
			return rc.Get().Namespace(a.Namespace).Resource("nonadminbackups").Name("alice-nab").SubResource("logs").Do(ctx).Error()
		}},
		{"label its NonAdminBackup", func(ctx context.Context) error {
			return errOf(ownNABs.Patch(ctx, "alice-nab", types.MergePatchType, []byte(`{"metadata":{"labels":{"mine":"yes"}}}`), metav1.PatchOptions{}))
		}},
		{"ask for its backup's contents", func(ctx context.Context) error {
			return errOf(a.Client.OadpV1alpha1().NonAdminDownloadRequests(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "mine-"},
				Spec:       oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupContents, Name: "alice-nab"}}}, metav1.CreateOptions{}))
		}},
		{"restore its backup", func(ctx context.Context) error {
			return errOf(ownNARs.Create(ctx, nar(func(*velerov1.RestoreSpec) {}), metav1.CreateOptions{}))
		}},
	}
	t.Run("its own paths work", func(t *testing.T) {
		for _, o := range own {
			if err := o.try(ctx); err != nil {
				t.Errorf("tenant A's own path %q: %v", o.name, err)
			}
		}
	})
}

// fingerprint is what the admin reads of the tenants' objects and the
// admin namespace's Velero objects: name and resourceVersion of each.
func fingerprint(ctx context.Context, t *testing.T, target TenantTarget) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(kind string, list runtime.Object, err error) {
		if err != nil {
			t.Fatalf("listing %s as the admin: %v", kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			m := objMeta(item)
			out[kind+" "+m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
	}
	lo := metav1.ListOptions{}
	for _, ns := range []string{target.A.Namespace, target.B.Namespace} {
		nabs, err := target.Admin.OadpV1alpha1().NonAdminBackups(ns).List(ctx, lo)
		add("nonadminbackup", nabs, err)
		nars, err := target.Admin.OadpV1alpha1().NonAdminRestores(ns).List(ctx, lo)
		add("nonadminrestore", nars, err)
		nabsls, err := target.Admin.OadpV1alpha1().NonAdminBackupStorageLocations(ns).List(ctx, lo)
		add("nonadminbackupstoragelocation", nabsls, err)
		nadrs, err := target.Admin.OadpV1alpha1().NonAdminDownloadRequests(ns).List(ctx, lo)
		add("nonadmindownloadrequest", nadrs, err)
		nass, err := target.Admin.OadpV1alpha1().NonAdminSchedules(ns).List(ctx, lo)
		add("nonadminschedule", nass, err)
		rbs, err := target.AdminKube.RbacV1().RoleBindings(ns).List(ctx, lo)
		add("rolebinding", rbs, err)
		roles, err := target.AdminKube.RbacV1().Roles(ns).List(ctx, lo)
		add("role", roles, err)
	}
	v := target.Admin.VeleroV1()
	backups, err := v.Backups(target.AdminNamespace).List(ctx, lo)
	add("backup", backups, err)
	restores, err := v.Restores(target.AdminNamespace).List(ctx, lo)
	add("restore", restores, err)
	reqs, err := v.DeleteBackupRequests(target.AdminNamespace).List(ctx, lo)
	add("deletebackuprequest", reqs, err)
	drs, err := v.DownloadRequests(target.AdminNamespace).List(ctx, lo)
	add("downloadrequest", drs, err)
	schedules, err := v.Schedules(target.AdminNamespace).List(ctx, lo)
	add("schedule", schedules, err)
	nabslrs, err := target.Admin.OadpV1alpha1().NonAdminBackupStorageLocationRequests(target.AdminNamespace).List(ctx, lo)
	add("nonadminbackupstoragelocationrequest", nabslrs, err)
	for _, ns := range []string{target.AdminNamespace, target.A.Namespace} {
		dpas, err := target.Admin.OadpV1alpha1().DataProtectionApplications(ns).List(ctx, lo)
		add("dataprotectionapplication", dpas, err)
	}
	return out
}

// tenantLocation is a tenant's storage location on an S3 bucket (name ""
// generates one), changed by mutate.
func tenantLocation(name, provider string, mutate func(*velerov1.BackupStorageLocationSpec)) *oadpv1alpha1.NonAdminBackupStorageLocation {
	spec := &velerov1.BackupStorageLocationSpec{Provider: provider, Config: map[string]string{"region": "us-east-1"},
		Credential:  &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "cloud"},
		StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: "tenant"}}}
	if mutate != nil {
		mutate(spec)
	}
	l := &oadpv1alpha1.NonAdminBackupStorageLocation{Spec: oadpv1alpha1.NonAdminBackupStorageLocationSpec{BackupStorageLocationSpec: spec}}
	if name == "" {
		l.GenerateName = "attack-"
	} else {
		l.Name = name
	}
	return l
}

// ownLink makes tenant A's download request for its backup's contents and
// returns its link and the Velero backup's name.
func ownLink(ctx context.Context, t *testing.T, target TenantTarget) (string, string) {
	t.Helper()
	a := target.A
	if _, err := a.Client.OadpV1alpha1().NonAdminDownloadRequests(a.Namespace).Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: "alice-nadr"},
		Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupContents, Name: "alice-nab"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating A's NonAdminDownloadRequest: %v", err)
	}
	var link string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		nadr, err := a.Client.OadpV1alpha1().NonAdminDownloadRequests(a.Namespace).Get(ctx, "alice-nadr", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if st := nadr.Status.VeleroDownloadRequest.Status; st != nil {
			link = st.DownloadURL
		}
		return link != "", nil
	}); err != nil {
		t.Fatalf("A's download link: %v", err)
	}
	nab, err := a.Client.OadpV1alpha1().NonAdminBackups(a.Namespace).Get(ctx, "alice-nab", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The link works as given, for A, who may read its namespace's
	// Secrets; where backups hold Secrets (a cluster's), not for whoever
	// else holds it.
	if err := fetch(ctx, a.HTTP, link); err != nil {
		t.Fatalf("A's own download link, as A: %v", err)
	}
	if err := fetch(ctx, LinkClient(ctx, t, target.Admin, target.AdminNamespace), link); target.Core != apierrors.IsForbidden(err) {
		t.Fatalf("A's own contents link, anonymously: %v (backups hold Secrets: %v)", err, target.Core)
	}
	return link, nab.Status.VeleroBackup.Name
}

// LinkClient fetches download links as the velero CLI does: no
// credentials, the CA the default storage location of adminNamespace
// carries (admin reads it).
func LinkClient(ctx context.Context, t *testing.T, admin versioned.Interface, adminNamespace string) *http.Client {
	t.Helper()
	bsl, err := admin.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if bsl.Spec.ObjectStorage == nil || !pool.AppendCertsFromPEM(bsl.Spec.ObjectStorage.CACert) {
		t.Fatalf("the default storage location carries no CA: %+v", bsl.Spec.ObjectStorage)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
}

// forgeLink changes a download link: edit gets its query and the target
// (the path of a direct link, the query's kind/name of one through the
// aggregator, joined as "<kind>/<name>").
func forgeLink(t *testing.T, link string, edit func(q url.Values, target *string)) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Has("kind") {
		target := q.Get("kind") + "/" + q.Get("name")
		edit(q, &target)
		kind, name, _ := strings.Cut(target, "/")
		q.Set("kind", kind)
		q.Set("name", name)
	} else {
		target := u.Path
		edit(q, &target)
		u.Path = target
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// fetch GETs a link: nil when it is served; a 403 or 404 as the API's
// errors, anything else as itself.
func fetch(ctx context.Context, c *http.Client, link string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	gr := schema.GroupResource{Group: velerov1.SchemeGroupVersion.Group, Resource: "downloads"}
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusForbidden:
		return apierrors.NewForbidden(gr, link, fmt.Errorf("%s", strings.TrimSpace(string(body))))
	case http.StatusNotFound:
		return apierrors.NewNotFound(gr, link)
	}
	return fmt.Errorf("GET %s: %d %s", link, resp.StatusCode, body)
}

// pathAttacks are tenant A's VM backups and trackers in its own namespace
// whose names become paths (spec.pvcName, spec.source.name, the tracker's
// PVC annotation): every hostile variant of each must be refused.
func pathAttacks(a Tenant) []attack {
	kv := a.Client.BackupV1alpha1()
	vmGroup, trackerGroup := "kubevirt.io", kvv1alpha1.GroupName
	vmb := func(pvc, source, kind string) *kvv1alpha1.VirtualMachineBackup {
		group := vmGroup
		if kind != "VirtualMachine" {
			group = trackerGroup
		}
		return &kvv1alpha1.VirtualMachineBackup{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-"},
			Spec: kvv1alpha1.VirtualMachineBackupSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &group, Kind: kind, Name: source}, PvcName: &pvc}}
	}
	tracker := func(vm string, annotations map[string]string) *kvv1alpha1.VirtualMachineBackupTracker {
		return &kvv1alpha1.VirtualMachineBackupTracker{ObjectMeta: metav1.ObjectMeta{GenerateName: "attack-", Annotations: annotations},
			Spec: kvv1alpha1.VirtualMachineBackupTrackerSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &vmGroup, Kind: "VirtualMachine", Name: vm}}}
	}
	var out []attack
	for _, name := range append(append([]string{}, rootdirtest.Hostile...), rootdirtest.Lookalikes...) {
		q := strconv.Quote(name)
		if len(q) > 40 {
			q = q[:37] + "...\""
		}
		out = append(out,
			attack{"a VirtualMachineBackup with pvcName " + q, func(ctx context.Context) error {
				return errOf(kv.VirtualMachineBackups(a.Namespace).Create(ctx, vmb(name, "vm", "VirtualMachine"), metav1.CreateOptions{}))
			}},
			attack{"a VirtualMachineBackup of VirtualMachine " + q, func(ctx context.Context) error {
				return errOf(kv.VirtualMachineBackups(a.Namespace).Create(ctx, vmb("vm-backups", name, "VirtualMachine"), metav1.CreateOptions{}))
			}},
			attack{"a VirtualMachineBackup of tracker " + q, func(ctx context.Context) error {
				return errOf(kv.VirtualMachineBackups(a.Namespace).Create(ctx, vmb("vm-backups", name, "VirtualMachineBackupTracker"), metav1.CreateOptions{}))
			}},
			attack{"a VirtualMachineBackupTracker of VirtualMachine " + q, func(ctx context.Context) error {
				return errOf(kv.VirtualMachineBackupTrackers(a.Namespace).Create(ctx, tracker(name, nil), metav1.CreateOptions{}))
			}},
			attack{"a VirtualMachineBackupTracker with PVC annotation " + q, func(ctx context.Context) error {
				return errOf(kv.VirtualMachineBackupTrackers(a.Namespace).Create(ctx, tracker("vm", map[string]string{kvv1alpha1.VMBackupPVCAnnotation: name}), metav1.CreateOptions{}))
			}},
		)
	}
	return out
}

func errOf(_ any, err error) error { return err }

// DataDirSums maps the files of a server's data directory to their
// sha256, but for Pebble's (under pebble/) and the server's log, which
// change as it runs; nil when dir is "".
func DataDirSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	if dir == "" {
		return nil
	}
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == "pebble" {
				out[rel+"/"] = "dir"
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".log") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatalf("reading the data directory: %v", err)
	}
	return out
}

// CompareSums reports every file of before changed or gone in after, and
// every file made; it returns how many.
func CompareSums(t *testing.T, before, after map[string]string) int {
	t.Helper()
	n := 0
	for f, sum := range before {
		if after[f] != sum {
			n++
			t.Errorf("data directory: %s changed or removed by an attack", f)
		}
	}
	for f := range after {
		if _, ok := before[f]; !ok {
			n++
			t.Errorf("data directory: %s made by an attack", f)
		}
	}
	return n
}

// TenantLink makes a NonAdminDownloadRequest of name for the target and
// returns its link once the server has copied it in.
func TenantLink(ctx context.Context, t *testing.T, nadrs oadpclient.NonAdminDownloadRequestInterface, name string, kind velerov1.DownloadTargetKind, target string) string {
	t.Helper()
	if _, err := nadrs.Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: kind, Name: target}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var link string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r, err := nadrs.Get(ctx, name, metav1.GetOptions{})
		if err == nil && r.Status.VeleroDownloadRequest.Status != nil {
			link = r.Status.VeleroDownloadRequest.Status.DownloadURL
		}
		return link != "", err
	}); err != nil {
		t.Fatalf("the link of NonAdminDownloadRequest %s: %v", name, err)
	}
	return link
}

// Status GETs a link with c and returns the response's status code (the
// body of a refusal in the test's log).
func Status(ctx context.Context, t *testing.T, c *http.Client, link string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		t.Logf("GET %s: %d %s", link, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// loopbackLocation: tenant A's storage location pointing at a listener on
// the server's loopback, with a credential Secret of A's, is approved and
// made, the server opens it, and no request reaches the listener: the
// location ends Unavailable saying why. It reports whether that held, and
// removes the location.
func loopbackLocation(ctx context.Context, t *testing.T, target TenantTarget) bool {
	t.Helper()
	a := target.A
	var requests atomic.Int64
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusForbidden)
	}))
	defer listener.Close()
	creds := "[default]\naws_access_key_id = a\naws_secret_access_key = b\n"
	if _, err := a.Kube.CoreV1().Secrets(a.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "loopback-creds"},
		Data: map[string][]byte{"cloud": []byte(creds)}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("A's Secret: %v", err)
		return false
	}
	defer func() { _ = a.Kube.CoreV1().Secrets(a.Namespace).Delete(ctx, "loopback-creds", metav1.DeleteOptions{}) }()
	locations := a.Client.OadpV1alpha1().NonAdminBackupStorageLocations(a.Namespace)
	l := tenantLocation("loopback", "aws", func(s *velerov1.BackupStorageLocationSpec) {
		s.Config["s3Url"], s.Config["s3ForcePathStyle"] = listener.URL, "true"
		s.Credential.Name = "loopback-creds"
	})
	if _, err := locations.Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Errorf("A's location on the server's loopback: %v", err)
		return false
	}
	defer func() { _ = locations.Delete(ctx, "loopback", metav1.DeleteOptions{}) }()
	var phase velerov1.BackupStorageLocationPhase
	var message string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := target.Admin.OadpV1alpha1().NonAdminBackupStorageLocations(a.Namespace).Get(ctx, "loopback", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if v := got.Status.VeleroBackupStorageLocation; v != nil && v.Status != nil {
			phase, message = v.Status.Phase, v.Status.Message
		}
		return phase == velerov1.BackupStorageLocationPhaseUnavailable, nil
	}); err != nil {
		t.Errorf("A's location on the server's loopback never ended Unavailable: %v (phase %q %q)", err, phase, message)
		return false
	}
	if n := requests.Load(); n > 0 {
		t.Errorf("A's location on the server's loopback reached it: %d requests", n)
		return false
	}
	t.Logf("harmless  A's storage location on the server's loopback: Unavailable, %q, 0 requests reached it", message)
	return true
}

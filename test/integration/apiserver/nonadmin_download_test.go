package apiserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/test/integration/conformance"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// TestNonAdminDownloadRequests: a tenant asks for a link to its backup's
// log with a NonAdminDownloadRequest; the server makes the Velero
// DownloadRequest of the backup the NonAdminBackup's status names, copies
// the link back (phase Created, one condition Processed/Success), and the
// link serves the log to anyone holding it, for a backup on the default
// location (upstream refuses those). The request goes when its link
// expires (its Velero request is gone); targets of other namespaces, and
// unknown kinds, are refused at admission.
func TestNonAdminDownloadRequests(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	if _, err := alice.client.OadpV1alpha1().NonAdminBackups("tenant-a").Create(ctx, &oadpv1alpha1.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: "nab1"},
		Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: &velerov1.BackupSpec{}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nab := waitNAB(t, s, "tenant-a", "nab1", "its backup to finish", veleroBackupDone)
	nadrs := alice.client.OadpV1alpha1().NonAdminDownloadRequests("tenant-a")
	request := func(name string, kind velerov1.DownloadTargetKind, target string) error {
		om := metav1.ObjectMeta{Name: name}
		if name == "" {
			om.GenerateName = "bad-"
		}
		_, err := nadrs.Create(ctx, &oadpv1alpha1.NonAdminDownloadRequest{ObjectMeta: om,
			Spec: oadpv1alpha1.NonAdminDownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: kind, Name: target}}}, metav1.CreateOptions{})
		return err
	}
	if err := request("log", velerov1.DownloadTargetKindBackupLog, "nab1"); err != nil {
		t.Fatal(err)
	}
	var r *oadpv1alpha1.NonAdminDownloadRequest
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		r, err = nadrs.Get(ctx, "log", metav1.GetOptions{})
		return err == nil && r.Status.Phase == oadpv1alpha1.NonAdminPhaseCreated, err
	}); err != nil {
		t.Fatalf("the download request was not processed: %v (%+v)", err, r)
	}
	if len(r.Status.Conditions) != 1 || r.Status.Conditions[0].Type != "Processed" || r.Status.Conditions[0].Reason != "Success" {
		t.Errorf("conditions %+v, want only Processed/Success", r.Status.Conditions)
	}
	st := r.Status.VeleroDownloadRequest.Status
	if st == nil || st.DownloadURL == "" || st.Expiration == nil {
		t.Fatalf("status.velero.status %+v, want a link and its expiration", st)
	}
	dr, err := s.Clientset.VeleroV1().DownloadRequests(ns).Get(ctx, "nadr-"+string(r.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dr.Spec.Target.Name != nab.Status.VeleroBackup.Name || dr.Spec.Target.Kind != velerov1.DownloadTargetKindBackupLog {
		t.Errorf("the Velero request's target %+v, want the log of %s", dr.Spec.Target, nab.Status.VeleroBackup.Name)
	}

	// The link, fetched without credentials (as the CLI does), trusting
	// the server's CA (the default location carries it).
	resp, err := conformance.LinkClient(ctx, t, s.Clientset, ns).Get(st.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	logs, err := alice.client.OadpV1alpha1().RESTClient().Get().Namespace("tenant-a").Resource("nonadminbackups").Name("nab1").SubResource("logs").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !isGzipOf(string(body), string(logs)) {
		t.Errorf("the link: %d, %d bytes, want the backup's log (%d bytes, gzipped)", resp.StatusCode, len(body), len(logs))
	}

	// Refused at admission: a target that is not the tenant's, a kind
	// Velero does not know.
	if err := request("", velerov1.DownloadTargetKindBackupLog, "no-such-backup"); !invalidAt(err, "spec.target.name", "NonAdminBackup no-such-backup") {
		t.Errorf("a request for a backup that is not the tenant's: %v, want 422 at spec.target.name", err)
	}
	if err := request("", velerov1.DownloadTargetKindRestoreLog, "nab1"); !invalidAt(err, "spec.target.name", "NonAdminRestore nab1") {
		t.Errorf("a restore log of a NonAdminBackup's name: %v, want 422 at spec.target.name", err)
	}
	if err := request("", "Secrets", "nab1"); !invalidAt(err, "spec.target.kind", "") {
		t.Errorf("an unknown kind: %v, want 422 at spec.target.kind", err)
	}

	// Expired: the Velero request goes (after ten minutes; here by hand),
	// and the tenant's with it.
	if err := s.Clientset.VeleroV1().DownloadRequests(ns).Delete(ctx, dr.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the expired download request", func(ctx context.Context) error {
		_, err := nadrs.Get(ctx, "log", metav1.GetOptions{})
		return err
	})
}

// TestNonAdminLinksRevoked: a link opens only while its request exists:
// deleting the NonAdminDownloadRequest revokes it. Standalone, backups hold
// no Secrets (this server serves none), so a contents link is a bearer link
// like a log's (the cluster suite's TestTenantContentsLinks has the rule for
// backups that hold them).
func TestNonAdminLinksRevoked(t *testing.T) {
	t.Parallel()
	s := framework.Start(t, framework.Options{})
	ctx := context.Background()
	alice := newTenant(t, s, "alice", "tenant-a")
	finishedNAB(t, s, alice.client, "tenant-a", "nab1")
	anonymous := conformance.LinkClient(ctx, t, s.Clientset, ns)
	for _, kind := range []velerov1.DownloadTargetKind{velerov1.DownloadTargetKindBackupLog, velerov1.DownloadTargetKindBackupContents} {
		t.Run(string(kind), func(t *testing.T) {
			nadrs := alice.client.OadpV1alpha1().NonAdminDownloadRequests("tenant-a")
			name := strings.ToLower(string(kind))
			link := conformance.TenantLink(ctx, t, nadrs, name, kind, "nab1")
			if code := conformance.Status(ctx, t, anonymous, link); code != http.StatusOK {
				t.Fatalf("the link, anonymously: %d, want 200", code)
			}
			if err := nadrs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				return conformance.Status(ctx, t, anonymous, link) == http.StatusForbidden, nil
			}); err != nil {
				t.Errorf("the link still opens after its NonAdminDownloadRequest was deleted")
			}
		})
	}
}

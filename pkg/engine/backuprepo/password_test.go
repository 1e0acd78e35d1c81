package backuprepo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/test/integration/framework"
)

// passwordWorld is a server's repositories over filesystem locations: two
// tenants' (as the non-admin engine makes them) and an admin's.
type passwordWorld struct {
	w       *enginetest.World
	kube    *kubefake.Clientset
	repos   *Repositories
	buckets map[string]string
}

func newPasswordWorld(t *testing.T, locations ...*velerov1.BackupStorageLocation) *passwordWorld {
	t.Helper()
	pw := &passwordWorld{kube: kubefake.NewClientset(), buckets: map[string]string{}}
	for _, l := range locations {
		pw.buckets[l.Name] = l.Spec.ObjectStorage.Bucket
	}
	pw.w = enginetest.New(t, asObjects(locations)...)
	pw.repos = pw.newRepositories(t)
	t.Cleanup(func() { pw.repos.Close(context.Background()) })
	return pw
}

// newRepositories are another engine's repositories of the same world.
func (pw *passwordWorld) newRepositories(t *testing.T) *Repositories {
	return New(Config{Client: pw.w.Client, Namespace: "velero", Locations: pw.w.Factory.Velero().V1().BackupStorageLocations().Lister(),
		Secrets: pw.kube.CoreV1(), Dir: t.TempDir(), Status: status.Writer{Engine: ControllerName}})
}

func asObjects(locations []*velerov1.BackupStorageLocation) []runtime.Object {
	out := []runtime.Object{}
	for _, l := range locations {
		out = append(out, l)
	}
	return out
}

// location is a filesystem location; tenant makes it one the non-admin
// engine made for a tenant's NonAdminBackupStorageLocation.
func location(t *testing.T, name string, tenant bool, annotations map[string]string) *velerov1.BackupStorageLocation {
	l := &velerov1.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "velero", UID: types.UID("uid-" + name), Annotations: annotations},
		Spec: velerov1.BackupStorageLocationSpec{Provider: objectstore.ProviderFilesystem,
			StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: t.TempDir()}}},
	}
	if tenant {
		l.Labels = map[string]string{oadpv1alpha1.NabslOriginNACUUIDLabel: "nacuuid-" + name}
	}
	return l
}

func repository(ns, location string) *velerov1.BackupRepository {
	return &velerov1.BackupRepository{
		ObjectMeta: metav1.ObjectMeta{Name: Name(ns, location), Namespace: "velero"},
		Spec:       velerov1.BackupRepositorySpec{VolumeNamespace: ns, BackupStorageLocation: location, RepositoryType: RepositoryType},
	}
}

// passwordOf reads a repository's password Secret.
func (pw *passwordWorld) passwordOf(t *testing.T, ns, location string) *corev1.Secret {
	t.Helper()
	s, err := pw.kube.CoreV1().Secrets("velero").Get(context.Background(), PasswordSecretName(Name(ns, location)), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dirOf is the directory of a repository in its filesystem location.
func (pw *passwordWorld) dirOf(ns, location string) string {
	return filepath.Join(pw.buckets[location], filepath.FromSlash(kopiarepo.Prefix("", ns)))
}

// opens reports whether password opens the repository at dir, in this
// process.
func opens(t *testing.T, dir, password string) bool {
	t.Helper()
	ctx := context.Background()
	st, err := kopiarepo.FilesystemStorage(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: password, Dir: t.TempDir()})
	if errors.Is(err, kopiarepo.ErrWrongPassword) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close(ctx)
	return true
}

// TestRepositoryPasswords: each repository the engine creates gets a
// random password of its own, kept in a Secret of the admin namespace;
// two tenants' repositories open with their own password and not with the
// other's (the kopia CLI shows it); an engine that uses a repository never
// makes a password; a repository found in a bucket without its password is
// not taken over; Velero's shared password is used only for an admin's
// location that says so; a rotation changes the password (cut short, the
// next pass ends it) and connections open before it open again after.
func TestRepositoryPasswords(t *testing.T) {
	ctx := context.Background()
	pw := newPasswordWorld(t, location(t, "tenant-a", true, nil), location(t, "tenant-b", true, nil),
		location(t, "velero-made", false, map[string]string{PasswordAnnotation: PasswordVelero}),
		location(t, "tenant-says-velero", true, map[string]string{PasswordAnnotation: PasswordVelero}))

	t.Run("each repository has its own password in the admin namespace", func(t *testing.T) {
		for _, l := range []string{"tenant-a", "tenant-b"} {
			if _, _, err := pw.repos.setUp(ctx, repository("shop", l)); err != nil {
				t.Fatalf("setting up the repository of %s: %v", l, err)
			}
		}
		a, b := pw.passwordOf(t, "shop", "tenant-a"), pw.passwordOf(t, "shop", "tenant-b")
		pa, pb := string(a.Data[PasswordKey]), string(b.Data[PasswordKey])
		if len(pa) < 40 || len(pb) < 40 || pa == pb || pa == DefaultPassword || pb == DefaultPassword {
			t.Errorf("passwords %q and %q: want two different random ones", pa, pb)
		}
		if a.Labels[RepositoryLabel] != velerov1.LabelValue(Name("shop", "tenant-a")) {
			t.Errorf("Secret %s labels %v", a.Name, a.Labels)
		}
		if _, err := pw.kube.CoreV1().Secrets("velero").Get(ctx, CredentialsSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s: %v, want none made", CredentialsSecret, err)
		}
		if !opens(t, pw.dirOf("shop", "tenant-a"), pa) || opens(t, pw.dirOf("shop", "tenant-a"), pb) ||
			!opens(t, pw.dirOf("shop", "tenant-b"), pb) || opens(t, pw.dirOf("shop", "tenant-b"), pa) {
			t.Errorf("each repository must open with its own password and not with the other's")
		}
	})

	t.Run("the kopia CLI opens each with its own password, not with the other's", func(t *testing.T) {
		if testing.Short() {
			t.Skip("needs the kopia CLI that make tools builds: not in the fast tier (make test-unit); make test runs it")
		}
		a, b := string(pw.passwordOf(t, "shop", "tenant-a").Data[PasswordKey]), string(pw.passwordOf(t, "shop", "tenant-b").Data[PasswordKey])
		connect := func(dir, password string) (string, error) {
			cmd := exec.CommandContext(ctx, framework.Binary(t, "kopia"), "repository", "connect", "filesystem", "--path="+dir,
				"--override-username=default", "--override-hostname=default", "--cache-directory="+t.TempDir(),
				"--config-file="+filepath.Join(t.TempDir(), "kopia.config"))
			cmd.Env = append(os.Environ(), "KOPIA_CHECK_FOR_UPDATES=false", "KOPIA_PASSWORD="+password, "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, c := range []struct {
			repo, password, whose string
			ok                    bool
		}{
			{"tenant-a", a, "its own", true}, {"tenant-a", b, "tenant-b's", false},
			{"tenant-b", b, "its own", true}, {"tenant-b", a, "tenant-a's", false},
			{"tenant-a", DefaultPassword, "Velero's default", false},
		} {
			out, err := connect(pw.dirOf("shop", c.repo), c.password)
			if c.ok && err != nil {
				t.Errorf("kopia connects to %s's repository with %s password: %v\n%s", c.repo, c.whose, err, out)
			}
			if !c.ok && (err == nil || !strings.Contains(out, "invalid repository password")) {
				t.Errorf("kopia connects to %s's repository with %s password: %v\n%s; want an invalid password", c.repo, c.whose, err, out)
			}
		}
	})

	t.Run("an engine that uses a repository never makes its password", func(t *testing.T) {
		_, _, err := pw.repos.openRepository(ctx, mustLocation(t, pw, "tenant-a"), "other", false)
		if err == nil || !strings.Contains(err.Error(), ControllerName) {
			t.Errorf("opening a repository without a password: %v, want an error naming the %s engine", err, ControllerName)
		}
		if _, err := pw.kube.CoreV1().Secrets("velero").Get(ctx, PasswordSecretName(Name("other", "tenant-a")), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("password Secret: %v, want none", err)
		}
	})

	t.Run("a repository in the bucket without its password is not taken over", func(t *testing.T) {
		// Whoever writes the bucket made it, with a password of theirs.
		st, err := kopiarepo.FilesystemStorage(ctx, pw.dirOf("planted", "tenant-a"))
		if err != nil {
			t.Fatal(err)
		}
		planted, err := kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: DefaultPassword, Dir: t.TempDir(), Create: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = planted.Close(ctx)
		_, _, err = pw.repos.setUp(ctx, repository("planted", "tenant-a"))
		if err == nil || !strings.Contains(err.Error(), "holds no password for it") {
			t.Errorf("setting up a repository found in the bucket: %v, want refused", err)
		}
		if _, err := pw.kube.CoreV1().Secrets("velero").Get(ctx, PasswordSecretName(Name("planted", "tenant-a")), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("password Secret: %v, want none", err)
		}
	})

	t.Run("Velero's shared password only for an admin's location that says so", func(t *testing.T) {
		if _, _, err := pw.repos.setUp(ctx, repository("shop", "velero-made")); err != nil {
			t.Fatal(err)
		}
		if !opens(t, pw.dirOf("shop", "velero-made"), DefaultPassword) {
			t.Errorf("the repository of location velero-made does not open with Velero's password")
		}
		s, err := pw.kube.CoreV1().Secrets("velero").Get(ctx, CredentialsSecret, metav1.GetOptions{})
		if err != nil || string(s.Data[CredentialsKey]) != DefaultPassword {
			t.Errorf("Secret %s: %v (%v), want Velero's default password", CredentialsSecret, s, err)
		}
		if _, _, err := pw.repos.setUp(ctx, repository("shop", "tenant-says-velero")); err != nil {
			t.Fatal(err)
		}
		if opens(t, pw.dirOf("shop", "tenant-says-velero"), DefaultPassword) {
			t.Errorf("a tenant's location chose Velero's shared password")
		}
		if p := string(pw.passwordOf(t, "shop", "tenant-says-velero").Data[PasswordKey]); !opens(t, pw.dirOf("shop", "tenant-says-velero"), p) {
			t.Errorf("the tenant's repository does not open with its own password")
		}
	})

	t.Run("rotation", func(t *testing.T) {
		// The data mover's repositories, open before the rotation, with a
		// snapshot in the repository.
		mover := pw.newRepositories(t)
		defer mover.Close(ctx)
		rep, releaseFirst, err := mover.openRepository(ctx, mustLocation(t, pw, "tenant-a"), "shop", false)
		if err != nil {
			t.Fatal(err)
		}
		volume := t.TempDir()
		if err := os.WriteFile(filepath.Join(volume, "orders"), []byte("1,2,3"), 0o644); err != nil {
			t.Fatal(err)
		}
		up, err := rep.Upload(ctx, volume, kopiarepo.SourcePath("shop", "db"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := string(pw.passwordOf(t, "shop", "tenant-a").Data[PasswordKey])

		br := repository("shop", "tenant-a")
		br.Annotations = map[string]string{RotatePasswordAnnotation: "2026-12-02"}
		if _, err := pw.w.Client.VeleroV1().BackupRepositories("velero").Create(ctx, br, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pw.w.Put(t, br)
		c, err := NewController(pw.repos, pw.w.Factory.Velero().V1().BackupRepositories(), clocktesting.NewFakeClock(metav1.Now().Time))
		if err != nil {
			t.Fatal(err)
		}
		sync := func(t *testing.T) {
			t.Helper()
			if err := c.sync(ctx, cache.ObjectName{Namespace: "velero", Name: br.Name}); err != nil {
				t.Fatal(err)
			}
			got, err := pw.w.Client.VeleroV1().BackupRepositories("velero").Get(ctx, br.Name, metav1.GetOptions{})
			if err != nil || got.Status.Phase != velerov1.BackupRepositoryPhaseReady || got.Status.Message != "" {
				t.Errorf("BackupRepository after the rotation: %+v (%v), want Ready with no message", got.Status, err)
			}
		}
		sync(t)
		s := pw.passwordOf(t, "shop", "tenant-a")
		after := string(s.Data[PasswordKey])
		if after == before || len(after) < 40 || s.Annotations[RotatedAnnotation] != "2026-12-02" || s.Data[NextPasswordKey] != nil {
			t.Errorf("after the rotation the Secret holds %q (was %q), annotations %v, next %q", after, before, s.Annotations, s.Data[NextPasswordKey])
		}
		if opens(t, pw.dirOf("shop", "tenant-a"), before) || !opens(t, pw.dirOf("shop", "tenant-a"), after) {
			t.Errorf("after the rotation the repository must open with the new password only")
		}
		// The connection the data mover opened before goes on (an upload
		// may be using it); it opens the repository again with the new
		// password, and its snapshot is there.
		opened := rep
		rep, release, err := mover.openRepository(ctx, mustLocation(t, pw, "tenant-a"), "shop", false)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if rep == opened {
			t.Errorf("the data mover kept its connection after the password changed")
		}
		if all, err := opened.Snapshots(ctx, kopiarepo.SourcePath("shop", "db")); err != nil || len(all) != 1 {
			t.Errorf("the connection opened before the rotation: %d snapshots, %v", len(all), err)
		}
		releaseFirst()
		if res, err := rep.Restore(ctx, up.SnapshotID, t.TempDir(), nil); err != nil || res.Bytes != 5 {
			t.Errorf("restoring after the rotation: %+v, %v", res, err)
		}

		t.Run("cut short after the repository changed", func(t *testing.T) {
			// The next password written and the repository changed to it,
			// the Secret's password not yet replaced.
			next := "the-next-password-of-a-rotation-cut-short"
			if err := pw.repos.updatePassword(ctx, br.Name, func(s *corev1.Secret) { s.Data[NextPasswordKey] = []byte(next) }); err != nil {
				t.Fatal(err)
			}
			st, err := kopiarepo.FilesystemStorage(ctx, pw.dirOf("shop", "tenant-a"))
			if err != nil {
				t.Fatal(err)
			}
			r, err := kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: after, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.ChangePassword(ctx, next); err != nil {
				t.Fatal(err)
			}
			_ = r.Close(ctx)
			// Meanwhile the data mover opens it with the next password.
			if _, release, err := mover.openRepository(ctx, mustLocation(t, pw, "tenant-a"), "shop", false); err != nil {
				t.Errorf("opening a repository mid-rotation: %v", err)
			} else {
				release()
			}
			br.Annotations[RotatePasswordAnnotation] = "again"
			pw.w.Put(t, br)
			sync(t)
			s := pw.passwordOf(t, "shop", "tenant-a")
			if string(s.Data[PasswordKey]) != next || s.Data[NextPasswordKey] != nil || s.Annotations[RotatedAnnotation] != "again" {
				t.Errorf("the rotation ended with %q, next %q, annotations %v; want the next password kept", s.Data[PasswordKey], s.Data[NextPasswordKey], s.Annotations)
			}
			if !opens(t, pw.dirOf("shop", "tenant-a"), next) {
				t.Errorf("the repository does not open with the password of the rotation ended")
			}
		})
	})
}

func mustLocation(t *testing.T, pw *passwordWorld, name string) *velerov1.BackupStorageLocation {
	t.Helper()
	l, err := pw.w.Factory.Velero().V1().BackupStorageLocations().Lister().BackupStorageLocations("velero").Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRetiredConnections: a connection replaced (the location's settings
// or the passwords changed) stays open, its directory with it, while those
// it was handed out to use it, and is closed once the last releases it; a
// connection nobody uses is closed when replaced.
func TestRetiredConnections(t *testing.T) {
	ctx := context.Background()
	l := location(t, "admins", false, nil)
	pw := newPasswordWorld(t, l)
	connections := filepath.Join(pw.repos.cfg.Dir, string(l.UID)+"-shop")
	present := func(generation string) bool {
		_, err := os.Stat(filepath.Join(connections, generation))
		return err == nil
	}
	first, releaseSetUp, err := pw.repos.setUp(ctx, repository("shop", l.Name))
	if err != nil {
		t.Fatal(err)
	}
	releaseSetUp()
	// Two users of the first connection (an upload, a maintenance).
	var releases []func()
	for range 2 {
		rep, release, err := pw.repos.openRepository(ctx, l, "shop", false)
		if err != nil {
			t.Fatal(err)
		}
		if rep != first {
			t.Fatal("the same settings opened another connection")
		}
		releases = append(releases, release)
	}
	changed := l.DeepCopy()
	changed.Spec.Config = map[string]string{"a": "change"}
	second, releaseSecond, err := pw.repos.openRepository(ctx, changed, "shop", false)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("new settings reused the connection made with the old")
	}
	t.Run("the replaced connection stays while in use", func(t *testing.T) {
		if !present("1") {
			t.Error("the first connection's directory went while two users held it")
		}
		releases[0]()
		releases[0]() // a second release of the same lease counts once
		if !present("1") {
			t.Error("the first connection's directory went while one user still held it")
		}
	})
	t.Run("closed once the last user is done", func(t *testing.T) {
		releases[1]()
		if present("1") {
			t.Error("the first connection's directory is still there after its last user released it")
		}
		if n := len(pw.repos.open[string(l.UID)+"/shop"].retired); n != 0 {
			t.Errorf("%d connections retired, want none", n)
		}
	})
	t.Run("a connection nobody uses is closed when replaced", func(t *testing.T) {
		releaseSecond()
		again := changed.DeepCopy()
		again.Spec.Config["a"] = "again"
		_, release, err := pw.repos.openRepository(ctx, again, "shop", false)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if present("2") || !present("3") {
			t.Errorf("connections 2 (unused, replaced) and 3 (current): present %v and %v, want false and true", present("2"), present("3"))
		}
	})
}

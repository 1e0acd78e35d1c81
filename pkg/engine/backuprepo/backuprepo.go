// Package backuprepo gives the data mover's kopia repositories their life,
// as Velero v1.18 gives them theirs (docs/datamover-reference.md, 4.4 to
// 4.7): one repository per storage location and volume namespace, at
// <location prefix>/kopia/<namespace>/ in the location's bucket, encrypted
// with a password of its own (password.go: a random one kept in a Secret
// of the admin namespace, or Velero's shared one where an admin's location
// says so), and described by a
// BackupRepository <namespace>-<location>-kopia (Velero's name and three
// labels). Its engine (Controller, as Velero's BackupRepository
// controller) is the one creator of repositories: it sets each up (Ready,
// or NotReady with the reason) and runs its maintenance; the engines that
// use a repository (Repositories.Open) wait for it and never create one.
package backuprepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kopia/kopia/repo/blob"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/volumeinfo"
)

// Velero's names of the repository's password and of its repositories.
const (
	// CredentialsSecret holds the password of every repository, in the
	// admin namespace of the source cluster, under CredentialsKey.
	CredentialsSecret = "velero-repo-credentials"
	CredentialsKey    = "repository-password"
	// DefaultPassword is the password Velero puts in a Secret it makes.
	DefaultPassword = "static-passw0rd"
	// RepositoryType is the only repository type the data mover uses.
	RepositoryType = "kopia"
	// DefaultMaintenanceFrequency is Velero's for kopia repositories.
	DefaultMaintenanceFrequency = time.Hour
)

// Name is Velero's name of a volume namespace's repository in a location.
func Name(volumeNamespace, location string) string {
	return fmt.Sprintf("%s-%s-%s", volumeNamespace, location, RepositoryType)
}

// Config is what the repositories need.
type Config struct {
	// Client writes BackupRepositories in Namespace.
	Client    versioned.Interface
	Namespace string
	// Locations lists the storage locations of Namespace.
	Locations velerolisters.BackupStorageLocationLister
	// Secrets reads and makes the passwords' Secrets (the source
	// cluster's); nil where none are served (standalone): no repository
	// is made, and Velero's shared password is DefaultPassword.
	Secrets typedcorev1.SecretsGetter
	// Opener reads locations' settings and credentials.
	Opener objectstore.Opener
	// Dir is a private directory of the server's where connections keep
	// their configuration (with the location's credentials) and cache.
	Dir string
	// Status writes the repositories' status (the engine's writer).
	Status status.Writer
	// UploadBytesPerSecond limits each repository's writes (0: none).
	UploadBytesPerSecond float64
	// StorageCheckInterval is how often a running upload that has written
	// nothing since checks its storage (0: kopiarepo's default).
	StorageCheckInterval time.Duration
	// Maintained is told each maintenance run of a repository, by its
	// name (nil: told nothing).
	Maintained func(repository string, succeeded bool, took time.Duration)
}

// Repositories opens repositories and keeps them open, one per location
// and volume namespace, for the engine that uses them.
type Repositories struct {
	cfg  Config
	mu   sync.Mutex
	open map[string]*entry
}

// entry is one repository: opened once, by one caller at a time.
type entry struct {
	mu  sync.Mutex
	rep *kopiarepo.Repository
	// repDir is rep's directory (<dir>/<generation>).
	repDir string
	// fingerprint is what it was opened with (the location's spec, the
	// passwords): when it changes, it is opened again.
	fingerprint string
	// dir holds the connections, each in a directory of its own
	// (<dir>/<generation>).
	dir        string
	generation int
	// users counts, for each connection handed out, those who have not
	// released it yet.
	users map[*kopiarepo.Repository]int
	// retired are the connections replaced by the current one that an
	// upload or a maintenance still uses: each is closed, and its
	// directory removed, when its last user releases it.
	retired map[*kopiarepo.Repository]string
}

// lease hands rep out to one more user; release is theirs to call once.
func (e *entry) lease(rep *kopiarepo.Repository) (release func()) {
	e.users[rep]++
	var once sync.Once
	return func() {
		once.Do(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.users[rep]--; e.users[rep] > 0 {
				return
			}
			delete(e.users, rep)
			if dir, retired := e.retired[rep]; retired {
				delete(e.retired, rep)
				closeConnection(rep, dir)
			}
		})
	}
}

// retire replaces the current connection: closed now if nobody uses it,
// else by its last user's release.
func (e *entry) retire() {
	if e.rep == nil {
		return
	}
	if e.users[e.rep] == 0 {
		closeConnection(e.rep, e.repDir)
	} else {
		e.retired[e.rep] = e.repDir
	}
	e.rep, e.repDir = nil, ""
}

// closeConnection closes a connection and removes its directory (its
// configuration holds the location's credentials).
func closeConnection(rep *kopiarepo.Repository, dir string) {
	_ = rep.Close(context.Background())
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// New returns the repositories of cfg.
func New(cfg Config) *Repositories {
	return &Repositories{cfg: cfg, open: map[string]*entry{}}
}

// Open returns the repository of a volume namespace in a storage location
// for an engine that uses it (an upload, a download, a deletion). Its
// BackupRepository is made when missing, and the repository engine
// (Controller: the one creator of repositories) given up to ReadyTimeout
// to set it up; Open itself never creates a repository. The repository
// stays open until Close; the caller calls release once done with it (a
// connection replaced meanwhile, for new settings or a new password, is
// closed then).
func (r *Repositories) Open(ctx context.Context, location, volumeNamespace string) (rep *kopiarepo.Repository, release func(), err error) {
	bsl, err := r.cfg.Locations.BackupStorageLocations(r.cfg.Namespace).Get(location)
	if err != nil {
		return nil, nil, fmt.Errorf("backup storage location %s: %w", location, err)
	}
	repoObj, err := r.ensureObject(ctx, bsl, volumeNamespace)
	if err != nil {
		return nil, nil, err
	}
	if err := r.waitSetUp(ctx, repoObj); err != nil {
		return nil, nil, err
	}
	return r.openRepository(ctx, bsl, volumeNamespace, false)
}

// ReadyTimeout is how long Open waits for a new BackupRepository to be
// set up by the repository engine.
const ReadyTimeout = 2 * time.Minute

// waitSetUp waits until the repository engine has set br up once (its
// phase Ready or NotReady).
func (r *Repositories) waitSetUp(ctx context.Context, br *velerov1.BackupRepository) error {
	if br.Status.Phase == velerov1.BackupRepositoryPhaseReady || br.Status.Phase == velerov1.BackupRepositoryPhaseNotReady {
		return nil
	}
	client := r.cfg.Client.VeleroV1().BackupRepositories(br.Namespace)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, ReadyTimeout, false, func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, br.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == velerov1.BackupRepositoryPhaseReady || got.Status.Phase == velerov1.BackupRepositoryPhaseNotReady, nil
	})
	if err != nil {
		return fmt.Errorf("BackupRepository %s was not set up within %s (the %s engine sets repositories up): %w", br.Name, ReadyTimeout, ControllerName, err)
	}
	return nil
}

// setUp opens the repository br describes for the repository engine,
// creating it when its location holds none; release as for Open.
func (r *Repositories) setUp(ctx context.Context, br *velerov1.BackupRepository) (*kopiarepo.Repository, func(), error) {
	bsl, err := r.cfg.Locations.BackupStorageLocations(r.cfg.Namespace).Get(br.Spec.BackupStorageLocation)
	if err != nil {
		return nil, nil, fmt.Errorf("backup storage location %s: %w", br.Spec.BackupStorageLocation, err)
	}
	return r.openRepository(ctx, bsl, br.Spec.VolumeNamespace, true)
}

// Close closes every open repository and forgets their connections.
func (r *Repositories) Close(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, e := range r.open {
		e.mu.Lock()
		for rep := range e.retired {
			_ = rep.Close(ctx)
		}
		if e.rep != nil {
			_ = e.rep.Close(ctx)
		}
		e.rep, e.retired = nil, map[*kopiarepo.Repository]string{}
		_ = os.RemoveAll(e.dir)
		e.mu.Unlock()
		delete(r.open, key)
	}
}

// ensureObject returns the repository's BackupRepository, made when
// missing.
func (r *Repositories) ensureObject(ctx context.Context, bsl *velerov1.BackupStorageLocation, ns string) (*velerov1.BackupRepository, error) {
	client := r.cfg.Client.VeleroV1().BackupRepositories(r.cfg.Namespace)
	name := Name(ns, bsl.Name)
	got, err := client.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return got, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading BackupRepository %s: %w", name, err)
	}
	obj := &velerov1.BackupRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.cfg.Namespace, Labels: map[string]string{
			velerov1.VolumeNamespaceLabel: velerov1.LabelValue(ns),
			velerov1.StorageLocationLabel: velerov1.LabelValue(bsl.Name),
			velerov1.RepositoryTypeLabel:  velerov1.LabelValue(RepositoryType),
		}},
		Spec: velerov1.BackupRepositorySpec{VolumeNamespace: ns, BackupStorageLocation: bsl.Name, RepositoryType: RepositoryType,
			MaintenanceFrequency: metav1.Duration{Duration: DefaultMaintenanceFrequency}},
	}
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return client.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating BackupRepository %s: %w", name, err)
	}
	return created, nil
}

// openRepository opens (or returns the open) repository of ns in bsl,
// creating it (and its password) if create and its location holds none;
// the caller releases it.
func (r *Repositories) openRepository(ctx context.Context, bsl *velerov1.BackupStorageLocation, ns string, create bool) (*kopiarepo.Repository, func(), error) {
	name := Name(ns, bsl.Name)
	pw, err := r.passwordsOf(ctx, bsl, name)
	missing := errors.Is(err, errNoPassword)
	if err != nil && !(missing && create) {
		if missing {
			return nil, nil, fmt.Errorf("the repository's password: %w (the %s engine makes it with the repository)", err, ControllerName)
		}
		return nil, nil, err
	}
	spec, err := json.Marshal(bsl.Spec)
	if err != nil {
		return nil, nil, err
	}
	fingerprint := fingerprintOf(spec, pw)
	key := string(bsl.UID) + "/" + ns

	r.mu.Lock()
	e := r.open[key]
	if e == nil {
		// The directory's name is the location's UID (the server's) and
		// the namespace (a DNS label, checked at admission); what an
		// earlier process left there is not this one's.
		e = &entry{dir: filepath.Join(r.cfg.Dir, string(bsl.UID)+"-"+ns),
			users: map[*kopiarepo.Repository]int{}, retired: map[*kopiarepo.Repository]string{}}
		if err := os.RemoveAll(e.dir); err != nil {
			r.mu.Unlock()
			return nil, nil, fmt.Errorf("removing the old connections of repository %s: %w", name, err)
		}
		r.open[key] = e
	}
	r.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rep != nil && e.fingerprint == fingerprint && !missing {
		return e.rep, e.lease(e.rep), nil
	}
	// A connection made with other settings or other passwords is not
	// reused (its configuration holds them); it is closed once those
	// using it are done.
	e.retire()
	e.generation++
	connection := filepath.Join(e.dir, strconv.Itoa(e.generation))
	st, where, err := r.storage(ctx, bsl, ns)
	if err != nil {
		return nil, nil, err
	}
	if missing {
		// A repository already there was made with a password this
		// server does not have: one made now would not open it.
		exists, err := kopiarepo.Exists(ctx, st)
		if err != nil {
			return nil, nil, fmt.Errorf("the repository at %s: %w", where, err)
		}
		if exists {
			return nil, nil, fmt.Errorf("the repository at %s: Secret %s/%s holds no password for it: put the password it was made with there, under the key %s",
				where, r.cfg.Namespace, pw.secret, PasswordKey)
		}
		if pw, err = r.makePassword(ctx, bsl, name); err != nil {
			return nil, nil, err
		}
		fingerprint = fingerprintOf(spec, pw)
	}
	open := func(password string) (*kopiarepo.Repository, error) {
		if err := os.RemoveAll(connection); err != nil {
			return nil, fmt.Errorf("removing a failed connection to repository %s: %w", name, err)
		}
		return kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: password, Dir: connection, UploadBytesPerSecond: r.cfg.UploadBytesPerSecond,
			StorageCheckInterval: r.cfg.StorageCheckInterval, Create: create})
	}
	rep, err := open(pw.current)
	if err != nil && pw.next != "" {
		// A rotation changed the repository's password and has not
		// written it as the password yet; or it was cut short between
		// kopia's two format blobs, which the current password then no
		// longer reads as a wrong password but as an unreadable blob.
		if nrep, nerr := open(pw.next); nerr == nil {
			rep, err = nrep, nil
		}
	}
	if errors.Is(err, kopiarepo.ErrWrongPassword) {
		return nil, nil, fmt.Errorf("the repository at %s: the password of Secret %s (key %s) does not open it", where, pw.secret, PasswordKey)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the repository at %s: %w", where, err)
	}
	e.rep, e.repDir, e.fingerprint = rep, connection, fingerprint
	return rep, e.lease(rep), nil
}

// fingerprintOf is what a connection is made with: the location's spec
// and the passwords.
func fingerprintOf(spec []byte, pw passwords) string {
	h := sha256.New()
	for _, b := range [][]byte{spec, []byte(pw.current), []byte(pw.next)} {
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// storage is the blob storage of ns's repository in bsl, and where it is.
func (r *Repositories) storage(ctx context.Context, bsl *velerov1.BackupStorageLocation, ns string) (st blob.Storage, where string, err error) {
	if bsl.Spec.ObjectStorage == nil {
		return nil, "", fmt.Errorf("backup storage location %s has no objectStorage", bsl.Name)
	}
	prefix := kopiarepo.Prefix(bsl.Spec.ObjectStorage.Prefix, ns)
	switch {
	case objectstore.IsServedByBackstop(bsl.Spec.Provider):
		bucket := bsl.Spec.ObjectStorage.Bucket
		if !filepath.IsAbs(bucket) {
			return nil, "", fmt.Errorf("backup storage location %s: bucket %q is not an absolute directory", bsl.Name, bucket)
		}
		dir := filepath.Join(filepath.Clean(bucket), filepath.FromSlash(prefix))
		st, err := kopiarepo.FilesystemStorage(ctx, dir)
		return st, dir, err
	case objectstore.IsS3(bsl):
		opts, err := r.cfg.Opener.S3Of(ctx, bsl)
		if err != nil {
			return nil, "", err
		}
		hostPort, insecure, err := opts.HostPort()
		if err != nil {
			return nil, "", err
		}
		keys, err := opts.Keys()
		if err != nil {
			return nil, "", fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
		}
		if opts.Guard != nil {
			// A tenant's location: its own keys only (kopia's client
			// would otherwise sign with the server's, from its
			// environment or instance metadata), and an endpoint
			// resolved once, through the guard.
			if len(opts.Credentials) == 0 || keys.AccessKeyID == "" || keys.SecretAccessKey == "" {
				return nil, "", fmt.Errorf("backup storage location %s: a tenant's storage location needs credentials (spec.credential): it never uses the server's own", bsl.Name)
			}
			if hostPort, err = opts.Guard.Pin(ctx, hostPort, !insecure && !opts.InsecureSkipTLSVerify); err != nil {
				return nil, "", fmt.Errorf("backup storage location %s: %w", bsl.Name, err)
			}
		}
		where := "s3://" + strings.Trim(opts.Bucket, "/") + "/" + prefix
		st, err := kopiarepo.S3Storage(ctx, kopiarepo.S3{Bucket: strings.Trim(opts.Bucket, "/"), Prefix: prefix, Endpoint: hostPort, DisableTLS: insecure,
			Region: opts.Region, AccessKeyID: keys.AccessKeyID, SecretKey: keys.SecretAccessKey, SessionToken: keys.SessionToken,
			RootCA: opts.CACert, SkipTLSVerify: opts.InsecureSkipTLSVerify})
		return st, where, err
	default:
		return nil, "", fmt.Errorf("backup storage location %s: provider %q keeps no data mover repository (supported: %s, %s)",
			bsl.Name, bsl.Spec.Provider, objectstore.ProviderFilesystem, objectstore.ProviderAWS)
	}
}

// ForgetBackup forgets the kopia snapshots a backup's DataUploads made:
// those of the volumes its volume info file says it moved, each in the
// repository of its claim's namespace. A snapshot is forgotten only if
// kopia holds it as one of this backup's uploads (its operation ID tag is
// the backup's: du-<backup UID>.): a bucket's file names no other. Its data
// goes at the repository's next maintenance. It returns how many it
// forgot.
func (r *Repositories) ForgetBackup(ctx context.Context, b *velerov1.Backup, volumes []volumeinfo.BackupVolumeInfo) (int, error) {
	prefix := string(velerov1.AsyncOperationIDPrefixDataUpload) + string(b.UID) + "."
	n := 0
	for _, v := range volumes {
		m := v.SnapshotDataMovementInfo
		if !v.SnapshotDataMoved || m == nil || m.SnapshotHandle == "" || v.PVCNamespace == "" {
			continue
		}
		forgot, err := r.forgetSnapshot(ctx, b, v.PVCNamespace, m.SnapshotHandle, prefix)
		if errors.Is(err, errNoPasswordStore) {
			// No repository is made without passwords: this server made
			// none of these snapshots.
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if forgot {
			n++
		}
	}
	return n, nil
}

// forgetSnapshot forgets one snapshot of backup b (whose uploads' IDs
// start with prefix) in the repository of a volume namespace: false when
// the repository has no such snapshot.
func (r *Repositories) forgetSnapshot(ctx context.Context, b *velerov1.Backup, namespace, snapshot, prefix string) (bool, error) {
	rep, release, err := r.Open(ctx, b.Spec.StorageLocation, namespace)
	if err != nil {
		return false, err
	}
	defer release()
	tags, err := rep.TagsOf(ctx, snapshot)
	if errors.Is(err, kopiarepo.ErrNoSnapshot) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !strings.HasPrefix(tags[velerov1.AsyncOperationIDLabel], prefix) {
		return false, fmt.Errorf("snapshot %s of the repository of namespace %s is not an upload of backup %s", snapshot, namespace, b.Name)
	}
	if err := rep.Forget(ctx, snapshot); err != nil {
		return false, err
	}
	return true, nil
}

package backuprepo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// Each repository has a password of its own: random, made by the
// repository engine when it creates the repository, and kept in a Secret
// of the admin namespace (PasswordSecretName), never in a tenant's. Velero
// encrypts every repository with one password, by default its public
// "static-passw0rd": whoever writes a bucket could then write a repository
// the server opens, and a tenant who learns the password of one would know
// every other's. Backstop uses Velero's shared Secret only for the
// locations an admin marks with PasswordAnnotation (repositories that
// Velero made); a location made for a tenant never.

// Names of the repositories' passwords.
const (
	// PasswordSecretPrefix starts the name of a repository's password
	// Secret.
	PasswordSecretPrefix = "backstop-repository-"
	// PasswordKey holds the password that opens the repository;
	// NextPasswordKey, during a rotation, the one it is being changed to.
	PasswordKey     = CredentialsKey
	NextPasswordKey = "next-" + CredentialsKey
	// RepositoryLabel, on a password Secret, is its repository's name (as
	// a label value).
	RepositoryLabel = "backstop.io/backup-repository"
	// PasswordAnnotation on an admin's BackupStorageLocation, with the
	// value PasswordVelero, says that its repositories (made by Velero)
	// use Velero's shared password: the Secret velero-repo-credentials,
	// made with Velero's default password when missing. A location made
	// for a tenant (NonAdminBackupStorageLocation) never does.
	PasswordAnnotation = "backstop.io/repository-password"
	PasswordVelero     = "velero"
	// RotatePasswordAnnotation on a BackupRepository asks for a new
	// password: each new value rotates it once. The password Secret's
	// RotatedAnnotation records the value done, RotatedAtAnnotation when.
	RotatePasswordAnnotation = "backstop.io/rotate-password"
	RotatedAnnotation        = "backstop.io/password-rotated-for"
	RotatedAtAnnotation      = "backstop.io/password-rotated-at"
)

// PasswordSecretName is the name of the Secret of a repository's
// password: PasswordSecretPrefix and a digest of the repository's name
// (which can be longer than a Secret's name may be).
func PasswordSecretName(repository string) string {
	sum := sha256.Sum256([]byte(repository))
	return PasswordSecretPrefix + hex.EncodeToString(sum[:])[:20]
}

// newPassword is a random password: 32 bytes, base64.
func newPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a repository password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// usesVeleroPassword reports whether bsl's repositories use Velero's
// shared password: an admin's location that says so.
func usesVeleroPassword(bsl *velerov1.BackupStorageLocation) bool {
	return bsl.Annotations[PasswordAnnotation] == PasswordVelero && bsl.Labels[oadpv1alpha1.NabslOriginNACUUIDLabel] == ""
}

// passwords is what opens a repository: the password, and during a
// rotation the next one (which opens it once the change is made).
type passwords struct {
	current, next string
	// secret names where they are kept, for messages.
	secret string
	// shared is Velero's shared password (no rotation).
	shared bool
}

// errNoPassword is the error of a repository whose password Secret does
// not exist (yet).
var errNoPassword = errors.New("no password")

// errNoPasswordStore is the error of a repository of a server that keeps
// no passwords (standalone: no source cluster serves Secrets).
var errNoPasswordStore = errors.New("this server keeps no repository passwords: no source cluster serves it Secrets")

// passwordsOf reads the passwords of repository in bsl. A repository
// without its password Secret is errNoPassword.
func (r *Repositories) passwordsOf(ctx context.Context, bsl *velerov1.BackupStorageLocation, repository string) (passwords, error) {
	if usesVeleroPassword(bsl) {
		p, err := r.veleroPassword(ctx)
		return passwords{current: p, secret: CredentialsSecret, shared: true}, err
	}
	if r.cfg.Secrets == nil {
		return passwords{}, errNoPasswordStore
	}
	name := PasswordSecretName(repository)
	s, err := r.cfg.Secrets.Secrets(r.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return passwords{secret: name}, fmt.Errorf("Secret %s/%s: %w", r.cfg.Namespace, name, errNoPassword)
	}
	if err != nil {
		return passwords{}, fmt.Errorf("the password of repository %s (Secret %s/%s): %w", repository, r.cfg.Namespace, name, err)
	}
	p := passwords{current: strings.TrimSpace(string(s.Data[PasswordKey])), next: strings.TrimSpace(string(s.Data[NextPasswordKey])), secret: name}
	if p.current == "" {
		return passwords{}, fmt.Errorf("the password of repository %s: Secret %s/%s has no key %s", repository, r.cfg.Namespace, name, PasswordKey)
	}
	return p, nil
}

// makePassword makes repository's password Secret with a new password,
// or returns the one another made first.
func (r *Repositories) makePassword(ctx context.Context, bsl *velerov1.BackupStorageLocation, repository string) (passwords, error) {
	password, err := newPassword()
	if err != nil {
		return passwords{}, err
	}
	name := PasswordSecretName(repository)
	_, err = r.cfg.Secrets.Secrets(r.cfg.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.cfg.Namespace, Labels: map[string]string{
			RepositoryLabel:               velerov1.LabelValue(repository),
			velerov1.StorageLocationLabel: velerov1.LabelValue(bsl.Name),
		}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{PasswordKey: []byte(password)},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return r.passwordsOf(ctx, bsl, repository)
	}
	if err != nil {
		return passwords{}, fmt.Errorf("making the password of repository %s (Secret %s/%s): %w", repository, r.cfg.Namespace, name, err)
	}
	return passwords{current: password, secret: name}, nil
}

// updatePassword changes repository's password Secret with change.
func (r *Repositories) updatePassword(ctx context.Context, repository string, change func(*corev1.Secret)) error {
	secrets := r.cfg.Secrets.Secrets(r.cfg.Namespace)
	name := PasswordSecretName(repository)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the password of repository %s (Secret %s/%s): %w", repository, r.cfg.Namespace, name, err)
	}
	s = s.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	change(s)
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the password of repository %s (Secret %s/%s): %w", repository, r.cfg.Namespace, name, err)
	}
	return nil
}

// rotatedFor is the rotation request br's password was last rotated for
// ("": never, or its location's repositories use Velero's shared
// password).
func (r *Repositories) rotatedFor(ctx context.Context, br *velerov1.BackupRepository) (string, error) {
	bsl, err := r.cfg.Locations.BackupStorageLocations(r.cfg.Namespace).Get(br.Spec.BackupStorageLocation)
	if err != nil {
		return "", fmt.Errorf("backup storage location %s: %w", br.Spec.BackupStorageLocation, err)
	}
	if usesVeleroPassword(bsl) {
		return "", nil
	}
	if r.cfg.Secrets == nil {
		return "", errNoPasswordStore
	}
	name := Name(br.Spec.VolumeNamespace, br.Spec.BackupStorageLocation)
	s, err := r.cfg.Secrets.Secrets(r.cfg.Namespace).Get(ctx, PasswordSecretName(name), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("the password of repository %s: %w", name, err)
	}
	return s.Annotations[RotatedAnnotation], nil
}

// rotate gives br's repository a new password, for the rotation request
// asked: the new one is kept as the next password first, then the
// repository changed, then the Secret's password replaced. A rotation cut
// short anywhere leaves a repository that one of the Secret's two
// passwords opens, and the next pass ends it.
func (r *Repositories) rotate(ctx context.Context, br *velerov1.BackupRepository, asked string, now time.Time) error {
	bsl, err := r.cfg.Locations.BackupStorageLocations(r.cfg.Namespace).Get(br.Spec.BackupStorageLocation)
	if err != nil {
		return fmt.Errorf("backup storage location %s: %w", br.Spec.BackupStorageLocation, err)
	}
	if usesVeleroPassword(bsl) {
		return fmt.Errorf("rotating the password: location %s's repositories use Velero's shared password (Secret %s), which is not rotated here", bsl.Name, CredentialsSecret)
	}
	if r.cfg.Secrets == nil {
		return errNoPasswordStore
	}
	fresh, err := newPassword()
	if err != nil {
		return err
	}
	// The password is the repository's (its name the one openRepository
	// gives it, whatever the BackupRepository is called). A rotation cut
	// short left its next password: it may already open the repository,
	// so it is kept.
	name := Name(br.Spec.VolumeNamespace, br.Spec.BackupStorageLocation)
	var next string
	if err := r.updatePassword(ctx, name, func(s *corev1.Secret) {
		if next = strings.TrimSpace(string(s.Data[NextPasswordKey])); next == "" {
			next = fresh
			s.Data[NextPasswordKey] = []byte(next)
		}
	}); err != nil {
		return err
	}
	rep, release, err := r.openRepository(ctx, bsl, br.Spec.VolumeNamespace, false)
	if err != nil {
		return err
	}
	defer release()
	if err := rep.ChangePassword(ctx, next); err != nil {
		return err
	}
	return r.updatePassword(ctx, name, func(s *corev1.Secret) {
		s.Data[PasswordKey] = []byte(next)
		delete(s.Data, NextPasswordKey)
		s.Annotations[RotatedAnnotation] = asked
		s.Annotations[RotatedAtAnnotation] = now.UTC().Format(time.RFC3339)
	})
}

// veleroPassword is Velero's shared password: the Secret's, made with
// Velero's default when missing (as Velero makes it).
func (r *Repositories) veleroPassword(ctx context.Context) (string, error) {
	if r.cfg.Secrets == nil {
		return DefaultPassword, nil
	}
	secrets := r.cfg.Secrets.Secrets(r.cfg.Namespace)
	s, err := secrets.Get(ctx, CredentialsSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: CredentialsSecret, Namespace: r.cfg.Namespace},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{CredentialsKey: []byte(DefaultPassword)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, CredentialsSecret, metav1.GetOptions{})
		}
	}
	if err != nil {
		return "", fmt.Errorf("the repository password (Secret %s/%s): %w", r.cfg.Namespace, CredentialsSecret, err)
	}
	password := strings.TrimSpace(string(s.Data[CredentialsKey]))
	if password == "" {
		return "", fmt.Errorf("the repository password: Secret %s/%s has no key %s", r.cfg.Namespace, CredentialsSecret, CredentialsKey)
	}
	return password, nil
}

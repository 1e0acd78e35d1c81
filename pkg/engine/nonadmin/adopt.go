package nonadmin

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/status"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
)

// adopter gives a Backup the server did not make for a NonAdminBackup (a
// run of a tenant's schedule, a backup synced from a tenant's location) a
// NonAdminBackup of its own. The order is what makes it safe against a
// restart at any point: the NonAdminBackup is made first (labelled as
// made by sync, its NACUUID in the label), its status then names the
// backup, and only then is the backup linked to it; the NonAdminBackup
// engine makes no backup for a NonAdminBackup labelled so, and takes it
// as Created once the link is there.
type adopter struct {
	client         versioned.Interface
	adminNamespace string
	nabs           oadplisters.NonAdminBackupLister
	status         status.Writer
}

// adopted says what became of an adoption.
type adopted int

const (
	// adoptedNow: the NonAdminBackup names the backup, which is linked.
	adoptedNow adopted = iota
	// nameTaken: a NonAdminBackup of that name exists and is not the
	// backup's (the tenant's own, or made for another backup): left alone.
	nameTaken
)

// adopt gives b the NonAdminBackup name of namespace, with spec; made is
// called once the NonAdminBackup has been created (a crash point).
func (a adopter) adopt(ctx context.Context, namespace, name string, spec *velerov1.BackupSpec, b *velerov1.Backup, made func()) (adopted, error) {
	nabs := a.client.OadpV1alpha1().NonAdminBackups(namespace)
	nab, err := a.nabs.NonAdminBackups(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		nab, err = nabs.Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		nab, err = nabs.Create(ctx, &oadpv1alpha1.NonAdminBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Labels: map[string]string{oadpv1alpha1.NabSyncLabel: oadpv1alpha1.NewNACUUID(namespace, name)}},
			Spec: oadpv1alpha1.NonAdminBackupSpec{BackupSpec: spec.DeepCopy()},
		}, metav1.CreateOptions{FieldManager: a.status.Engine})
		if err == nil && made != nil {
			made()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("the NonAdminBackup %s/%s of backup %s: %w", namespace, name, b.Name, err)
	}
	id := nab.Labels[oadpv1alpha1.NabSyncLabel]
	if id == "" || nab.DeletionTimestamp != nil {
		return nameTaken, nil
	}
	switch vb := nab.Status.VeleroBackup; {
	case vb == nil || vb.Name == "":
		if nab, err = a.status.NonAdminBackups(a.client, namespace).Update(ctx, nab, func(cur *oadpv1alpha1.NonAdminBackup) {
			cur.Status.VeleroBackup = &oadpv1alpha1.VeleroBackup{NACUUID: id, Name: b.Name, Namespace: a.adminNamespace}
		}); err != nil {
			return 0, fmt.Errorf("naming backup %s in NonAdminBackup %s/%s: %w", b.Name, namespace, name, err)
		}
	case vb.Name != b.Name:
		return nameTaken, nil
	}
	cur := b.DeepCopy()
	backupLink.stamp(cur, nab.Status.VeleroBackup.NACUUID, namespace, name)
	if _, err := a.client.VeleroV1().Backups(a.adminNamespace).Update(ctx, cur, metav1.UpdateOptions{FieldManager: a.status.Engine}); err != nil {
		return 0, fmt.Errorf("linking backup %s to NonAdminBackup %s/%s: %w", b.Name, namespace, name, err)
	}
	return adoptedNow, nil
}

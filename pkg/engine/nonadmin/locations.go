package nonadmin

import (
	"fmt"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	oadpvalidation "github.com/backstop-io/backstop/pkg/apis/oadp/validation"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	oadplisters "github.com/backstop-io/backstop/pkg/generated/listers/oadp/v1alpha1"
	velerolisters "github.com/backstop-io/backstop/pkg/generated/listers/velero/v1"
)

// locations resolves tenants' storage locations to the Velero locations
// made for them (admin namespace).
type locations struct {
	adminNamespace string
	tenant         oadplisters.NonAdminBackupStorageLocationLister
	velero         velerolisters.BackupStorageLocationLister
}

// veleroBackupSpec is the Velero backup spec made from a tenant's of
// namespace (already held to the tenant rules and the policy): its
// location resolved, the enforced values filled in, its own namespace
// only; or why it cannot be made now.
func (l locations) veleroBackupSpec(namespace string, spec *velero.BackupSpec, policy *oadpvalidation.Policy) (*velerov1.BackupSpec, string, error) {
	location := ""
	if name := spec.StorageLocation; name != "" {
		var problem string
		if location, problem = l.veleroLocationOf(namespace, name); problem != "" {
			return nil, problem, nil
		}
	}
	spec = spec.DeepCopy()
	oadpvalidation.EnforceBackup(spec, policy)
	var out velerov1.BackupSpec
	if err := velerov1.Convert_velero_BackupSpec_To_v1_BackupSpec(oadpvalidation.TenantBackupSpec(namespace, spec, location), &out, nil); err != nil {
		return nil, "", err
	}
	return &out, "", nil
}

// veleroLocationOf returns the name of the Velero location made for the
// NonAdminBackupStorageLocation name of namespace, or why a backup cannot
// go there now: the location is not approved or not made, or its Velero
// location is not Available.
func (l locations) veleroLocationOf(namespace, name string) (string, string) {
	tl, err := l.tenant.NonAdminBackupStorageLocations(namespace).Get(name)
	if err != nil {
		return "", fmt.Sprintf("NonAdminBackupStorageLocation %s of namespace %s does not exist", name, namespace)
	}
	var internal oadp.NonAdminBackupStorageLocation
	if err := oadpv1alpha1.Convert_v1alpha1_NonAdminBackupStorageLocation_To_oadp_NonAdminBackupStorageLocation(tl, &internal, nil); err != nil {
		return "", err.Error()
	}
	if problem := oadpvalidation.LocationProblem(&internal); problem != "" {
		return "", problem
	}
	id := tl.Status.VeleroBackupStorageLocation.NACUUID
	bsl, err := l.velero.BackupStorageLocations(l.adminNamespace).Get(id)
	if err != nil || !locationLink.madeFor(bsl, id, namespace) {
		return "", fmt.Sprintf("NonAdminBackupStorageLocation %s has no backup storage location yet", name)
	}
	if bsl.Status.Phase != velerov1.BackupStorageLocationPhaseAvailable {
		msg := fmt.Sprintf("NonAdminBackupStorageLocation %s is not available yet (phase %q)", name, bsl.Status.Phase)
		if bsl.Status.Message != "" {
			msg += ": " + bsl.Status.Message
		}
		return "", msg
	}
	return bsl.Name, ""
}

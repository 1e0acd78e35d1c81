package restore

import (
	"fmt"

	oadpv1alpha1 "github.com/backstop-io/backstop/pkg/apis/oadp/v1alpha1"
	"github.com/backstop-io/backstop/pkg/apis/restoreas"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/items"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

// tenantOf is the tenant namespace whose backup this is, "" for the
// admin's: a backup made for a NonAdminBackup or a NonAdminSchedule, or
// on (or synced from) a tenant's storage location. Its contents are what
// the tenant could back up or write in its bucket.
func (c *Controller) tenantOf(b *velerov1.Backup) string {
	if ns := oadpv1alpha1.OriginNamespace(b.Annotations); ns != "" {
		return ns
	}
	if bsl, err := c.locations.BackupStorageLocations(b.Namespace).Get(b.Spec.StorageLocation); err == nil && objectstore.IsTenantLocation(bsl) {
		return bsl.Annotations[oadpv1alpha1.NabslOriginNamespaceAnnotation]
	}
	return ""
}

// asTenant makes an admin's restore of a tenant's backup run as the tenant
// would (a tenant's own restore, a NonAdminRestore's, already does): its
// namespace only, no cluster-scoped items, the rights of the user who
// made the backup (recorded at admission); unless the Restore says
// oadpv1alpha1.FullRightsAnnotation, which the log warns of. It returns
// why the restore cannot run, "" when it can.
func (run *restoreRun) asTenant() string {
	c, r, b, log := run.c, run.r, run.backup, run.log
	ns := c.tenantOf(b)
	if ns == "" || run.as != "" {
		return ""
	}
	if r.Annotations[oadpv1alpha1.FullRightsAnnotation] == "true" {
		log.Warning("", items.ScopeVelero, fmt.Sprintf("backup %s holds what tenant namespace %s controls; this restore writes it with the server's full rights, where its spec says, because of annotation %s", b.Name, ns, oadpv1alpha1.FullRightsAnnotation))
		return ""
	}
	as, ok, err := restoreas.Of(map[string]string{restoreas.Annotation: b.Annotations[oadpv1alpha1.CreatedByAnnotation]})
	if b.Annotations[oadpv1alpha1.CreatedByAnnotation] == "" || !ok || err != nil {
		return fmt.Sprintf("backup %s holds what tenant namespace %s controls, and records no user who made it: restore it with a NonAdminRestore in %s, or annotate this Restore %s=true to write it with the server's full rights",
			b.Name, ns, ns, oadpv1alpha1.FullRightsAnnotation)
	}
	if c.cfg.TargetAs == nil {
		return fmt.Sprintf("backup %s holds what tenant namespace %s controls, and this server cannot act as its user %q", b.Name, ns, as.Username)
	}
	target, err := c.cfg.TargetAs(as)
	if err != nil {
		return fmt.Sprintf("acting as user %q: %v", as.Username, err)
	}
	run.target, run.as = run.writes(target), as.Username
	narrowed := r.DeepCopy()
	filter, err := items.NewFilter(&velerov1.BackupSpec{IncludedNamespaces: r.Spec.IncludedNamespaces, ExcludedNamespaces: r.Spec.ExcludedNamespaces}, nil)
	if err == nil && !filter.IncludesNamespace(ns) {
		narrowed.Spec.ExcludedNamespaces = append(narrowed.Spec.ExcludedNamespaces, ns)
	}
	narrowed.Spec.IncludedNamespaces = []string{ns}
	no := false
	narrowed.Spec.IncludeClusterResources = &no
	run.r = narrowed
	log.Info("Restoring a tenant's backup as the tenant would: its namespace only, no cluster-scoped items, with the rights of the user who made it",
		"namespace", ns, "user", as.Username, "fullRights", "annotate the Restore "+oadpv1alpha1.FullRightsAnnotation+"=true")
	return ""
}

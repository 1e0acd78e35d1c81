package registry_test

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/apis/authentication"
	"k8s.io/kubernetes/pkg/apis/authorization"
	"k8s.io/kubernetes/pkg/apis/coordination"
	"k8s.io/kubernetes/pkg/apis/rbac"
	"k8s.io/kubernetes/pkg/registry/authentication/selfsubjectreview"
	"k8s.io/kubernetes/pkg/registry/authorization/localsubjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/authorization/selfsubjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/authorization/selfsubjectrulesreview"
	"k8s.io/kubernetes/pkg/registry/authorization/subjectaccessreview"
	"k8s.io/kubernetes/pkg/registry/coordination/lease"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	"github.com/backstop-io/backstop/pkg/apis/oadp"
	apischeme "github.com/backstop-io/backstop/pkg/apis/scheme"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackup"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackuptracker"
	"github.com/backstop-io/backstop/pkg/registry/oadp/dataprotectionapplication"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackup"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackupstoragelocation"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackupstoragelocationrequest"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadmindownloadrequest"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminrestore"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminschedule"
	_ "github.com/backstop-io/backstop/pkg/registry/rbac" // kube's RBAC group in kube's scheme, as the server has it
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/velero/backup"
	"github.com/backstop-io/backstop/pkg/registry/velero/backuprepository"
	"github.com/backstop-io/backstop/pkg/registry/velero/backupstoragelocation"
	"github.com/backstop-io/backstop/pkg/registry/velero/datadownload"
	"github.com/backstop-io/backstop/pkg/registry/velero/dataupload"
	"github.com/backstop-io/backstop/pkg/registry/velero/deletebackuprequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/downloadrequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/podvolumebackup"
	"github.com/backstop-io/backstop/pkg/registry/velero/podvolumerestore"
	"github.com/backstop-io/backstop/pkg/registry/velero/restore"
	"github.com/backstop-io/backstop/pkg/registry/velero/schedule"
	"github.com/backstop-io/backstop/pkg/registry/velero/serverstatusrequest"
	"github.com/backstop-io/backstop/pkg/registry/velero/volumesnapshotlocation"
)

// kindRules are the strategies of one kind, as the store applies them.
type kindRules struct {
	gvk    schema.GroupVersionKind
	main   rest.RESTCreateUpdateStrategy
	status rest.RESTUpdateStrategy // nil: the kind has no status
	seed   string                  // a valid body
	// review, for kinds that are only ever created and answered (access
	// reviews), is their REST storage.
	review rest.Creater
}

func everyKind(scheme *runtime.Scheme) map[reflect.Type]kindRules {
	velerov1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "velero.io", Version: "v1", Kind: kind}
	}
	velerov2 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "velero.io", Version: "v2alpha1", Kind: kind}
	}
	oadpv1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "oadp.openshift.io", Version: "v1alpha1", Kind: kind}
	}
	kvv1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "backup.kubevirt.io", Version: "v1alpha1", Kind: kind}
	}
	plain := func(s resource.Strategy) (resource.Strategy, resource.StatusStrategy) {
		return s, resource.NewStatusStrategy(s)
	}

	b := backup.NewStrategy(scheme, nil)
	sch := schedule.NewStrategy(scheme, false)
	rs := restore.NewStrategy(scheme, nil)
	dbr := deletebackuprequest.NewStrategy(scheme)
	bsl := backupstoragelocation.NewStrategy(scheme, []byte("ca"))
	vmb := virtualmachinebackup.NewStrategy(scheme, nil)
	vmbt := virtualmachinebackuptracker.NewStrategy(scheme, nil)
	nab := nonadminbackup.NewStrategy(scheme, nil, nil)
	nabsl := nonadminbackupstoragelocation.NewStrategy(scheme, nil)
	nabslr := nonadminbackupstoragelocationrequest.NewStrategy(scheme)
	nadr := nonadmindownloadrequest.NewStrategy(scheme, anyNonAdminBackup{}, nil, nil)
	nas := nonadminschedule.NewStrategy(scheme, nil, nil)
	nar := nonadminrestore.NewStrategy(scheme, anyNonAdminBackup{}, nil)
	dpa := dataprotectionapplication.NewStrategy(scheme)
	du := dataupload.NewStrategy(scheme)
	dd := datadownload.NewStrategy(scheme)
	dr, drStatus := plain(downloadrequest.NewStrategy(scheme))
	ssr, ssrStatus := plain(serverstatusrequest.NewStrategy(scheme))
	pvb, pvbStatus := plain(podvolumebackup.NewStrategy(scheme))
	pvr, pvrStatus := plain(podvolumerestore.NewStrategy(scheme))
	repo, repoStatus := plain(backuprepository.NewStrategy(scheme))
	vsl, vslStatus := plain(volumesnapshotlocation.NewStrategy(scheme))
	meta := `"metadata":{"name":"x","namespace":"backstop-system"}`
	rbacv1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: kind}
	}
	authzv1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "authorization.k8s.io", Version: "v1", Kind: kind}
	}
	allow := authorizerfactory.NewAlwaysAllowAuthorizer()
	rule := `"rules":[{"apiGroups":["velero.io"],"resources":["backups"],"verbs":["get"]}]`
	roleRef := `"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"a"}]`
	attrs := `"resourceAttributes":{"namespace":"a","verb":"get","group":"velero.io","resource":"backups"}`
	return map[reflect.Type]kindRules{
		reflect.TypeOf(&coordination.Lease{}): {gvk: schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, main: lease.Strategy,
			seed: `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease",` + meta + `,"spec":{"holderIdentity":"a","leaseDurationSeconds":15}}`},
		reflect.TypeOf(&rbac.Role{}): {gvk: rbacv1("Role"), main: role.Strategy,
			seed: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role",` + meta + `,` + rule + `}`},
		reflect.TypeOf(&rbac.ClusterRole{}): {gvk: rbacv1("ClusterRole"), main: clusterrole.Strategy,
			seed: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"x"},"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"a":"b"}}]},` + rule + `}`},
		reflect.TypeOf(&rbac.RoleBinding{}): {gvk: rbacv1("RoleBinding"), main: rolebinding.Strategy,
			seed: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",` + meta + `,` + roleRef + `}`},
		reflect.TypeOf(&rbac.ClusterRoleBinding{}): {gvk: rbacv1("ClusterRoleBinding"), main: clusterrolebinding.Strategy,
			seed: `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"x"},` + roleRef + `}`},
		reflect.TypeOf(&authorization.SubjectAccessReview{}): {gvk: authzv1("SubjectAccessReview"), review: subjectaccessreview.NewREST(allow, scheme),
			seed: `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"a",` + attrs + `}}`},
		reflect.TypeOf(&authorization.LocalSubjectAccessReview{}): {gvk: authzv1("LocalSubjectAccessReview"), review: localsubjectaccessreview.NewREST(allow, scheme),
			seed: `{"apiVersion":"authorization.k8s.io/v1","kind":"LocalSubjectAccessReview","metadata":{"namespace":"a"},"spec":{"user":"a",` + attrs + `}}`},
		reflect.TypeOf(&authorization.SelfSubjectAccessReview{}): {gvk: authzv1("SelfSubjectAccessReview"), review: selfsubjectaccessreview.NewREST(allow, scheme),
			seed: `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{` + attrs + `}}`},
		reflect.TypeOf(&authorization.SelfSubjectRulesReview{}): {gvk: authzv1("SelfSubjectRulesReview"), review: selfsubjectrulesreview.NewREST(noRules{}),
			seed: `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"a"}}`},
		reflect.TypeOf(&authentication.SelfSubjectReview{}): {gvk: schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview"},
			review: selfsubjectreview.NewREST(), seed: `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`},
		reflect.TypeOf(&velero.Backup{}): {velerov1("Backup"), b, backup.NewStatusStrategy(b, backup.NewQueueIndex(ns)),
			`{"apiVersion":"velero.io/v1","kind":"Backup",` + meta + `,"spec":{"includedNamespaces":["a"],"ttl":"1h"},"status":{"phase":"Completed"}}`, nil},
		reflect.TypeOf(&velero.Schedule{}): {velerov1("Schedule"), sch, schedule.NewStatusStrategy(sch),
			`{"apiVersion":"velero.io/v1","kind":"Schedule",` + meta + `,"spec":{"schedule":"@daily","template":{"includedNamespaces":["a"]}}}`, nil},
		reflect.TypeOf(&velero.Restore{}): {velerov1("Restore"), rs, restore.NewStatusStrategy(rs),
			`{"apiVersion":"velero.io/v1","kind":"Restore",` + meta + `,"spec":{"backupName":"b","namespaceMapping":{"a":"b"}}}`, nil},
		reflect.TypeOf(&velero.DeleteBackupRequest{}): {velerov1("DeleteBackupRequest"), dbr, deletebackuprequest.NewStatusStrategy(dbr),
			`{"apiVersion":"velero.io/v1","kind":"DeleteBackupRequest",` + meta + `,"spec":{"backupName":"b"}}`, nil},
		reflect.TypeOf(&velero.BackupStorageLocation{}): {velerov1("BackupStorageLocation"), bsl, resource.NewStatusStrategy(bsl.Strategy),
			`{"apiVersion":"velero.io/v1","kind":"BackupStorageLocation",` + meta + `,"spec":{"provider":"aws","objectStorage":{"bucket":"b"},"config":{"region":"r"}}}`, nil},
		reflect.TypeOf(&velero.DownloadRequest{}): {velerov1("DownloadRequest"), dr, drStatus,
			`{"apiVersion":"velero.io/v1","kind":"DownloadRequest",` + meta + `,"spec":{"target":{"kind":"BackupLog","name":"b"}}}`, nil},
		reflect.TypeOf(&velero.ServerStatusRequest{}): {velerov1("ServerStatusRequest"), ssr, ssrStatus,
			`{"apiVersion":"velero.io/v1","kind":"ServerStatusRequest",` + meta + `}`, nil},
		reflect.TypeOf(&velero.PodVolumeBackup{}): {velerov1("PodVolumeBackup"), pvb, pvbStatus,
			`{"apiVersion":"velero.io/v1","kind":"PodVolumeBackup",` + meta + `,"spec":{"volume":"v","pod":{"name":"p"}}}`, nil},
		reflect.TypeOf(&velero.PodVolumeRestore{}): {velerov1("PodVolumeRestore"), pvr, pvrStatus,
			`{"apiVersion":"velero.io/v1","kind":"PodVolumeRestore",` + meta + `,"spec":{"volume":"v"}}`, nil},
		reflect.TypeOf(&velero.BackupRepository{}): {velerov1("BackupRepository"), repo, repoStatus,
			`{"apiVersion":"velero.io/v1","kind":"BackupRepository",` + meta + `,"spec":{"volumeNamespace":"a","backupStorageLocation":"b","resticIdentifier":"r"}}`, nil},
		reflect.TypeOf(&velero.VolumeSnapshotLocation{}): {velerov1("VolumeSnapshotLocation"), vsl, vslStatus,
			`{"apiVersion":"velero.io/v1","kind":"VolumeSnapshotLocation",` + meta + `,"spec":{"provider":"aws"}}`, nil},
		reflect.TypeOf(&velero.DataUpload{}): {velerov2("DataUpload"), du, dataupload.NewStatusStrategy(du),
			`{"apiVersion":"velero.io/v2alpha1","kind":"DataUpload",` + meta + `,"spec":{"snapshotType":"CSI","csiSnapshot":{"volumeSnapshot":"vs","storageClass":"sc"},"sourcePVC":"data","sourceNamespace":"shop","backupStorageLocation":"default","operationTimeout":"10m"}}`, nil},
		reflect.TypeOf(&velero.DataDownload{}): {velerov2("DataDownload"), dd, datadownload.NewStatusStrategy(dd),
			`{"apiVersion":"velero.io/v2alpha1","kind":"DataDownload",` + meta + `,"spec":{"targetVolume":{"pvc":"data","pv":"","namespace":"shop"},"snapshotID":"k0123abcd","sourceNamespace":"shop","backupStorageLocation":"default","operationTimeout":"10m"}}`, nil},
		reflect.TypeOf(&oadp.NonAdminBackup{}): {oadpv1("NonAdminBackup"), nab, resource.NewStatusStrategy(nab.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminBackup","metadata":{"name":"x","namespace":"team"},"spec":{"backupSpec":{}}}`, nil},
		reflect.TypeOf(&oadp.NonAdminRestore{}): {oadpv1("NonAdminRestore"), nar, resource.NewStatusStrategy(nar.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminRestore","metadata":{"name":"x","namespace":"team"},"spec":{"restoreSpec":{"backupName":"b"}}}`, nil},
		reflect.TypeOf(&oadp.NonAdminBackupStorageLocation{}): {oadpv1("NonAdminBackupStorageLocation"), nabsl, resource.NewStatusStrategy(nabsl.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminBackupStorageLocation","metadata":{"name":"x","namespace":"team"},"spec":{"backupStorageLocationSpec":{"provider":"aws","objectStorage":{"bucket":"b"},"credential":{"name":"s","key":"cloud"}}}}`, nil},
		reflect.TypeOf(&oadp.NonAdminBackupStorageLocationRequest{}): {oadpv1("NonAdminBackupStorageLocationRequest"), nabslr, resource.NewStatusStrategy(nabslr.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminBackupStorageLocationRequest",` + meta + `,"spec":{"approvalDecision":"pending"}}`, nil},
		reflect.TypeOf(&oadp.NonAdminDownloadRequest{}): {oadpv1("NonAdminDownloadRequest"), nadr, resource.NewStatusStrategy(nadr.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminDownloadRequest","metadata":{"name":"x","namespace":"team"},"spec":{"target":{"kind":"BackupLog","name":"b"}}}`, nil},
		reflect.TypeOf(&oadp.NonAdminSchedule{}): {oadpv1("NonAdminSchedule"), nas, resource.NewStatusStrategy(nas.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminSchedule","metadata":{"name":"x","namespace":"team"},"spec":{"schedule":"@daily","template":{"backupSpec":{}}}}`, nil},
		reflect.TypeOf(&oadp.DataProtectionApplication{}): {oadpv1("DataProtectionApplication"), dpa, dataprotectionapplication.NewStatusStrategy(dpa),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"DataProtectionApplication",` + meta + `,"spec":{"configuration":{"velero":{}},"nonAdmin":{"enable":true,"enforceBackupSpec":{"ttl":"1h"}}}}`, nil},
		reflect.TypeOf(&kubevirtbackup.VirtualMachineBackup{}): {kvv1("VirtualMachineBackup"), vmb, virtualmachinebackup.NewStatusStrategy(vmb),
			`{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackup","metadata":{"name":"x","namespace":"vms"},"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm"},"pvcName":"p"}}`, nil},
		reflect.TypeOf(&kubevirtbackup.VirtualMachineBackupTracker{}): {kvv1("VirtualMachineBackupTracker"), vmbt, virtualmachinebackuptracker.NewStatusStrategy(vmbt),
			`{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackupTracker","metadata":{"name":"x","namespace":"vms"},"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm"}}}`, nil},
	}
}

// FuzzRequestBodies decodes arbitrary request bodies as the server does
// (into the internal version, whatever kind they name) and runs every rule
// a create, an update and a status update apply, as a client and as the
// server's engines: nothing may panic. `make test` runs it for a bounded
// time; run it longer by hand:
//
//	go test ./pkg/registry -run '^$' -fuzz FuzzRequestBodies -fuzztime 10m
func FuzzRequestBodies(f *testing.F) {
	scheme := apischeme.New()
	decoder := serializer.NewCodecFactory(scheme).UniversalDecoder()
	kinds := everyKind(scheme)
	var order []kindRules
	for _, k := range kinds {
		order = append(order, k)
		f.Add(uint8(len(order)-1), []byte(k.seed))
	}
	engine := resource.WithEngine(asUser(user.APIServerUser))
	admin := asUser("admin", user.SystemPrivilegedGroup)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		def := order[int(which)%len(order)].gvk
		obj, _, err := decoder.Decode(body, &def, nil)
		if err != nil {
			return
		}
		k, ok := kinds[reflect.TypeOf(obj)]
		if !ok {
			return // a meta type (Status, List, ...), not a request body the registry handles
		}
		for _, ctx := range []context.Context{admin, engine} {
			if k.review != nil {
				ctx = genericrequest.WithNamespace(ctx, "a")
				_, _ = k.review.Create(ctx, obj.DeepCopyObject(), nil, &metav1.CreateOptions{})
				continue
			}
			created := obj.DeepCopyObject()
			k.main.PrepareForCreate(ctx, created)
			_ = k.main.Validate(ctx, created)
			k.main.Canonicalize(created)
			// An update from the stored object to the body, and back.
			for _, pair := range [][2]runtime.Object{{obj, created}, {created, obj}} {
				newer, older := pair[0].DeepCopyObject(), pair[1].DeepCopyObject()
				k.main.PrepareForUpdate(ctx, newer, older)
				_ = k.main.ValidateUpdate(ctx, newer, older)
				if k.status == nil {
					continue
				}
				newer, older = pair[0].DeepCopyObject(), pair[1].DeepCopyObject()
				k.status.PrepareForUpdate(ctx, newer, older)
				_ = k.status.ValidateUpdate(ctx, newer, older)
			}
		}
	})
}

// TestEveryKindFuzzed: the fuzz target covers every kind the scheme
// serves.
func TestEveryKindFuzzed(t *testing.T) {
	scheme := apischeme.New()
	kinds := everyKind(scheme)
	decoder := serializer.NewCodecFactory(scheme).UniversalDecoder()
	for typ, k := range kinds {
		obj, _, err := decoder.Decode([]byte(k.seed), nil, nil)
		if err != nil || reflect.TypeOf(obj) != typ {
			t.Errorf("seed of %s decodes to %T, %v", k.gvk.Kind, obj, err)
		}
	}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || gvk.Group == "" || len(gvk.Kind) > 4 && gvk.Kind[len(gvk.Kind)-4:] == "List" {
			continue
		}
		obj, err := scheme.New(schema.GroupVersionKind{Group: gvk.Group, Version: runtime.APIVersionInternal, Kind: gvk.Kind})
		if err != nil {
			continue // options and meta types registered in every version
		}
		if _, ok := kinds[reflect.TypeOf(obj)]; !ok && !isOptions(gvk.Kind) && !notServed.Has(gvk.Kind) && !readOnly.Has(gvk.Kind) {
			t.Errorf("kind %s is served but not fuzzed", gvk)
		}
	}
}

// notServed are kinds the scheme knows, as kube registers them with their
// group, that no Backstop server serves.
var notServed = sets.New("TokenReview", "TokenRequest")

// readOnly are kinds served for get only (nothing stored, no request
// body read): the console.
var readOnly = sets.New("Console")

// noRules resolves no rules for anyone.
// anyNonAdminBackup finds a NonAdminBackup of every name.
type anyNonAdminBackup struct{}

func (anyNonAdminBackup) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	return &oadp.NonAdminBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

type noRules struct{}

func (noRules) RulesFor(context.Context, user.Info, string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	return nil, nil, false, nil
}

func isOptions(kind string) bool {
	for _, k := range []string{"ListOptions", "GetOptions", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "WatchEvent", "InternalEvent"} {
		if kind == k {
			return true
		}
	}
	return false
}

package registry_test

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/kubevirtbackup"
	"github.com/backstop-io/backstop/pkg/apis/oadp"
	"github.com/backstop-io/backstop/pkg/apis/velero"
	"github.com/backstop-io/backstop/pkg/apiserver"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackup"
	"github.com/backstop-io/backstop/pkg/registry/kubevirtbackup/virtualmachinebackuptracker"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminbackup"
	"github.com/backstop-io/backstop/pkg/registry/oadp/nonadminrestore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
	"github.com/backstop-io/backstop/pkg/registry/velero/backup"
	"github.com/backstop-io/backstop/pkg/registry/velero/backuprepository"
	"github.com/backstop-io/backstop/pkg/registry/velero/backupstoragelocation"
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
	status rest.RESTUpdateStrategy
	seed   string // a valid body
}

func everyKind(scheme *runtime.Scheme) map[reflect.Type]kindRules {
	velerov1 := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "velero.io", Version: "v1", Kind: kind}
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
	emptyQueue := func(context.Context) (*velero.BackupList, error) { return &velero.BackupList{}, nil }

	b := backup.NewStrategy(scheme, nil)
	sch := schedule.NewStrategy(scheme, false)
	rs := restore.NewStrategy(scheme)
	dbr := deletebackuprequest.NewStrategy(scheme)
	bsl := backupstoragelocation.NewStrategy(scheme, []byte("ca"))
	vmb := virtualmachinebackup.NewStrategy(scheme)
	vmbt := virtualmachinebackuptracker.NewStrategy(scheme)
	nab := nonadminbackup.NewStrategy(scheme)
	nar := nonadminrestore.NewStrategy(scheme)
	dr, drStatus := plain(downloadrequest.NewStrategy(scheme))
	ssr, ssrStatus := plain(serverstatusrequest.NewStrategy(scheme))
	pvb, pvbStatus := plain(podvolumebackup.NewStrategy(scheme))
	pvr, pvrStatus := plain(podvolumerestore.NewStrategy(scheme))
	repo, repoStatus := plain(backuprepository.NewStrategy(scheme))
	vsl, vslStatus := plain(volumesnapshotlocation.NewStrategy(scheme))
	meta := `"metadata":{"name":"x","namespace":"backstop-system"}`
	return map[reflect.Type]kindRules{
		reflect.TypeOf(&velero.Backup{}): {velerov1("Backup"), b, backup.NewStatusStrategy(b, backup.NewQueueIndex(ns, emptyQueue)),
			`{"apiVersion":"velero.io/v1","kind":"Backup",` + meta + `,"spec":{"includedNamespaces":["a"],"ttl":"1h"},"status":{"phase":"Completed"}}`},
		reflect.TypeOf(&velero.Schedule{}): {velerov1("Schedule"), sch, schedule.NewStatusStrategy(sch),
			`{"apiVersion":"velero.io/v1","kind":"Schedule",` + meta + `,"spec":{"schedule":"@daily","template":{"includedNamespaces":["a"]}}}`},
		reflect.TypeOf(&velero.Restore{}): {velerov1("Restore"), rs, restore.NewStatusStrategy(rs),
			`{"apiVersion":"velero.io/v1","kind":"Restore",` + meta + `,"spec":{"backupName":"b","namespaceMapping":{"a":"b"}}}`},
		reflect.TypeOf(&velero.DeleteBackupRequest{}): {velerov1("DeleteBackupRequest"), dbr, deletebackuprequest.NewStatusStrategy(dbr),
			`{"apiVersion":"velero.io/v1","kind":"DeleteBackupRequest",` + meta + `,"spec":{"backupName":"b"}}`},
		reflect.TypeOf(&velero.BackupStorageLocation{}): {velerov1("BackupStorageLocation"), bsl, resource.NewStatusStrategy(bsl.Strategy),
			`{"apiVersion":"velero.io/v1","kind":"BackupStorageLocation",` + meta + `,"spec":{"provider":"aws","objectStorage":{"bucket":"b"},"config":{"region":"r"}}}`},
		reflect.TypeOf(&velero.DownloadRequest{}): {velerov1("DownloadRequest"), dr, drStatus,
			`{"apiVersion":"velero.io/v1","kind":"DownloadRequest",` + meta + `,"spec":{"target":{"kind":"BackupLog","name":"b"}}}`},
		reflect.TypeOf(&velero.ServerStatusRequest{}): {velerov1("ServerStatusRequest"), ssr, ssrStatus,
			`{"apiVersion":"velero.io/v1","kind":"ServerStatusRequest",` + meta + `}`},
		reflect.TypeOf(&velero.PodVolumeBackup{}): {velerov1("PodVolumeBackup"), pvb, pvbStatus,
			`{"apiVersion":"velero.io/v1","kind":"PodVolumeBackup",` + meta + `,"spec":{"volume":"v","pod":{"name":"p"}}}`},
		reflect.TypeOf(&velero.PodVolumeRestore{}): {velerov1("PodVolumeRestore"), pvr, pvrStatus,
			`{"apiVersion":"velero.io/v1","kind":"PodVolumeRestore",` + meta + `,"spec":{"volume":"v"}}`},
		reflect.TypeOf(&velero.BackupRepository{}): {velerov1("BackupRepository"), repo, repoStatus,
			`{"apiVersion":"velero.io/v1","kind":"BackupRepository",` + meta + `,"spec":{"volumeNamespace":"a","backupStorageLocation":"b","resticIdentifier":"r"}}`},
		reflect.TypeOf(&velero.VolumeSnapshotLocation{}): {velerov1("VolumeSnapshotLocation"), vsl, vslStatus,
			`{"apiVersion":"velero.io/v1","kind":"VolumeSnapshotLocation",` + meta + `,"spec":{"provider":"aws"}}`},
		reflect.TypeOf(&oadp.NonAdminBackup{}): {oadpv1("NonAdminBackup"), nab, resource.NewStatusStrategy(nab.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminBackup","metadata":{"name":"x","namespace":"team"},"spec":{"backupSpec":{}}}`},
		reflect.TypeOf(&oadp.NonAdminRestore{}): {oadpv1("NonAdminRestore"), nar, resource.NewStatusStrategy(nar.Strategy),
			`{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminRestore","metadata":{"name":"x","namespace":"team"},"spec":{"restoreSpec":{"backupName":"b"}}}`},
		reflect.TypeOf(&kubevirtbackup.VirtualMachineBackup{}): {kvv1("VirtualMachineBackup"), vmb, virtualmachinebackup.NewStatusStrategy(vmb),
			`{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackup","metadata":{"name":"x","namespace":"vms"},"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm"},"pvcName":"p"}}`},
		reflect.TypeOf(&kubevirtbackup.VirtualMachineBackupTracker{}): {kvv1("VirtualMachineBackupTracker"), vmbt, virtualmachinebackuptracker.NewStatusStrategy(vmbt),
			`{"apiVersion":"backup.kubevirt.io/v1alpha1","kind":"VirtualMachineBackupTracker","metadata":{"name":"x","namespace":"vms"},"spec":{"source":{"apiGroup":"kubevirt.io","kind":"VirtualMachine","name":"vm"}}}`},
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
	scheme := apiserver.NewScheme()
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
			created := obj.DeepCopyObject()
			k.main.PrepareForCreate(ctx, created)
			_ = k.main.Validate(ctx, created)
			k.main.Canonicalize(created)
			// An update from the stored object to the body, and back.
			for _, pair := range [][2]runtime.Object{{obj, created}, {created, obj}} {
				newer, older := pair[0].DeepCopyObject(), pair[1].DeepCopyObject()
				k.main.PrepareForUpdate(ctx, newer, older)
				_ = k.main.ValidateUpdate(ctx, newer, older)
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
	scheme := apiserver.NewScheme()
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
		if _, ok := kinds[reflect.TypeOf(obj)]; !ok && !isOptions(gvk.Kind) {
			t.Errorf("kind %s is served but not fuzzed", gvk)
		}
	}
}

func isOptions(kind string) bool {
	for _, k := range []string{"ListOptions", "GetOptions", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "WatchEvent", "InternalEvent"} {
		if kind == k {
			return true
		}
	}
	return false
}

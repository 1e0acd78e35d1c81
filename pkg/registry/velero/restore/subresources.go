package restore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/livelog"
	"github.com/backstop-io/backstop/pkg/objectstore"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// NewLogsREST returns restores/<name>/logs: a restore's log is stored in
// the location of the backup it restores.
func NewLogsREST(restores, backups rest.Getter, locations objectstore.Locations, live *livelog.Registry) *resource.LogsREST {
	target := func(ctx context.Context, namespace, name string) (resource.LogFile, error) {
		obj, err := restores.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return resource.LogFile{}, err
		}
		location := ""
		if b, err := backups.Get(ctx, obj.(*velero.Restore).Spec.BackupName, &metav1.GetOptions{}); err == nil {
			location = b.(*velero.Backup).Spec.StorageLocation
		}
		return resource.LogFile{Namespace: namespace, Location: location, Kind: velerov1.DownloadTargetKindRestoreLog, Name: name}, nil
	}
	return resource.NewLogsREST(velero.Resource("restores"), func() runtime.Object { return &velero.Restore{} }, target, locations, live)
}

package apiserver

import (
	"fmt"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/engine/deletion"
	"github.com/backstop-io/backstop/pkg/engine/download"
	"github.com/backstop-io/backstop/pkg/engine/gc"
	"github.com/backstop-io/backstop/pkg/engine/location"
	"github.com/backstop-io/backstop/pkg/engine/queue"
	"github.com/backstop-io/backstop/pkg/engine/serverstatus"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/pkg/version"
)

// startEngines returns the post-start hook that runs the engines. They
// reach the API through the loopback client, like any client, so every
// transition is authenticated, authorized and visible to watchers. They
// process objects of the admin namespace only, as Velero processes its
// install namespace.
func (c CompletedConfig) startEngines(signer *download.Signer) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		client, err := versioned.NewForConfig(hookCtx.LoopbackClientConfig)
		if err != nil {
			return fmt.Errorf("engine client: %w", err)
		}
		factory := externalversions.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
			externalversions.WithNamespace(c.extra.Namespace))
		velero := factory.Velero().V1()
		ssr, err := serverstatus.New(client, velero.ServerStatusRequests(), clock.RealClock{}, version.Version, nil)
		if err != nil {
			return err
		}
		downloads, err := download.New(client, download.Informers{
			Requests: velero.DownloadRequests(), Backups: velero.Backups(), Restores: velero.Restores(),
		}, signer, c.extra.ExternalURL, clock.RealClock{})
		if err != nil {
			return err
		}
		locations, err := location.New(client, velero.BackupStorageLocations(), clock.RealClock{})
		if err != nil {
			return err
		}
		if c.extra.DataDir != "" {
			if err := location.EnsureDefault(hookCtx, client, c.extra.Namespace, c.extra.DataDir); err != nil {
				return err
			}
		}
		backupQueue, err := queue.New(client, velero.Backups(), c.extra.Namespace, c.extra.ConcurrentBackups)
		if err != nil {
			return err
		}
		deletions, err := deletion.New(client, deletion.Informers{
			Requests: velero.DeleteBackupRequests(), Backups: velero.Backups(), Restores: velero.Restores(),
			Locations: velero.BackupStorageLocations(),
		}, clock.RealClock{})
		if err != nil {
			return err
		}
		collector, err := gc.New(client, gc.Informers{
			Backups: velero.Backups(), Requests: velero.DeleteBackupRequests(), Locations: velero.BackupStorageLocations(),
		}, clock.RealClock{})
		if err != nil {
			return err
		}
		factory.Start(hookCtx.Done())
		go collector.Run(hookCtx, 1)
		go deletions.Run(hookCtx, 2)
		go backupQueue.Run(hookCtx, 1)
		go locations.Run(hookCtx, 1)
		go ssr.Run(hookCtx, 1)
		go downloads.Run(hookCtx, 2)
		return nil
	}
}

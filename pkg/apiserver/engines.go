package apiserver

import (
	"fmt"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/engine/serverstatus"
	"github.com/backstop-io/backstop/pkg/generated/clientset/versioned"
	"github.com/backstop-io/backstop/pkg/generated/informers/externalversions"
	"github.com/backstop-io/backstop/pkg/version"
)

// startEngines is the post-start hook that runs the engines. They reach the
// API through the loopback client, like any client, so every transition is
// authenticated, authorized and visible to watchers.
func startEngines(hookCtx genericapiserver.PostStartHookContext) error {
	client, err := versioned.NewForConfig(hookCtx.LoopbackClientConfig)
	if err != nil {
		return fmt.Errorf("engine client: %w", err)
	}
	factory := externalversions.NewSharedInformerFactory(client, 10*time.Minute)
	ssr, err := serverstatus.New(client, factory.Velero().V1().ServerStatusRequests(), clock.RealClock{}, version.Version, nil)
	if err != nil {
		return err
	}
	factory.Start(hookCtx.Done())
	go ssr.Run(hookCtx)
	return nil
}

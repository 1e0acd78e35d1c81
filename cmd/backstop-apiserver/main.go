// Command backstop-apiserver serves the Velero, OADP non-admin and KubeVirt
// backup APIs from embedded storage and runs their engines.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/backstop-io/backstop/pkg/cmd/server"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(server.NewCommand(ctx)))
}

// Command helm is the helm CLI (helm.sh/helm/v4's command package, what
// the helm binary runs), built inside this module as kubectl is: its
// Kubernetes libraries are this module's, compiled once for both. The
// tests lint, render (hack/update-deploy.sh) and install, upgrade and
// uninstall the chart with it (hack/install-helm.sh).
package main

import (
	"errors"
	"log/slog"
	"os"

	// The client-go authentication plugins, as upstream's binary has them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	helmcmd "helm.sh/helm/v4/pkg/cmd"
	"helm.sh/helm/v4/pkg/kube"
)

func main() {
	// The field manager of what helm applies: "helm", whatever the
	// binary's name.
	kube.ManagedFieldsManager = "helm"
	cmd, err := helmcmd.NewRootCmd(os.Stdout, os.Args[1:], helmcmd.SetupLogging)
	if err != nil {
		slog.Warn("command failed", slog.Any("error", err))
		os.Exit(1)
	}
	if err := cmd.Execute(); err != nil {
		var exit helmcmd.CommandError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode)
		}
		os.Exit(1)
	}
}

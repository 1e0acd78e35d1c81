// Command kubectl is upstream kubectl (k8s.io/kubectl's command package, what
// the kubectl binary runs), built at the version of client-go this module
// uses, so tests and users have a kubectl matching the server without
// installing one.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}

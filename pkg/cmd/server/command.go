package server

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // the json logging format

	"github.com/backstop-io/backstop/pkg/standalone/pki"
	"github.com/backstop-io/backstop/pkg/vmrestore"
)

func init() {
	utilruntime.Must(logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate))
}

// NewCommand returns the backstop-apiserver command with its subcommands.
func NewCommand(ctx context.Context) *cobra.Command {
	o := NewOptions()
	logging := logsapi.NewLoggingConfiguration()
	cmd := &cobra.Command{
		Use:   "backstop-apiserver",
		Short: "Backstop: the Velero, OADP non-admin and KubeVirt backup APIs with their engines",
		Long: `backstop-apiserver serves velero.io/v1, oadp.openshift.io/v1alpha1 and
backup.kubevirt.io/v1alpha1 from its own embedded storage.

Standalone (the default) it needs nothing else: it creates a CA and a serving
certificate under --data-dir on first start and writes admin.kubeconfig there.`,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, _ []string) error {
			// --logging-format=json gives structured logs.
			if err := logsapi.ValidateAndApply(logging, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			// Run validates the flags first (Options.Config).
			return o.Run(c.Context())
		},
	}
	cmd.SetContext(ctx)
	o.AddFlags(cmd.Flags())
	logsapi.AddFlags(logging, cmd.Flags())
	cmd.AddCommand(newKubeconfigCommand(), newRestoreVMDiskCommand(ctx))
	return cmd
}

func newKubeconfigCommand() *cobra.Command {
	var dataDir, user, server string
	var groups []string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for a user and groups, signed by the standalone server's CA",
		RunE: func(c *cobra.Command, _ []string) error {
			if user == "" {
				return fmt.Errorf("--user is required")
			}
			dir := pki.New(dataDir)
			if _, err := os.Stat(dir.CAFile()); err != nil {
				return fmt.Errorf("no CA under %s (start the server once with this --data-dir first): %w", dataDir, err)
			}
			ca, err := dir.EnsureCA()
			if err != nil {
				return err
			}
			out, err := ca.Kubeconfig(server, user, groups)
			if err != nil {
				return err
			}
			_, err = c.OutOrStdout().Write(out)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dataDir, "data-dir", "data", "the server's data directory")
	fs.StringVar(&user, "user", "", "user name (certificate CN)")
	fs.StringSliceVar(&groups, "group", nil, "group (certificate O); repeatable")
	fs.StringVar(&server, "server", "https://127.0.0.1:8443", "server URL written into the kubeconfig")
	return cmd
}

func newRestoreVMDiskCommand(ctx context.Context) *cobra.Command {
	var disk, output string
	cmd := &cobra.Command{
		Use:   "restore-vm-disk --output IMAGE [--disk vda] FULL-BACKUP-DIR [INCREMENTAL-DIR...]",
		Short: "Write a VM disk's raw image from a chain of VirtualMachineBackup directories (oldest first)",
		Long: "Checks every manifest digest, runs qemu-img check on every file and checks the chain's links, " +
			"then stitches the files (without changing them), converts the chain to a raw image, compares the " +
			"image with the chain and prints its sha256.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, dirs []string) error {
			if output == "" {
				return fmt.Errorf("--output is required")
			}
			res, err := vmrestore.Restore(ctx, dirs, disk, output)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%s  %s\n", res.SHA256, res.Output)
			return err
		},
	}
	cmd.Flags().StringVar(&disk, "disk", "vda", "the disk (target device) to restore")
	cmd.Flags().StringVar(&output, "output", "", "the raw image to write")
	return cmd
}

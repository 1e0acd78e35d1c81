package vmbackup

import (
	"context"
	"os"
	"path/filepath"

	kv "github.com/backstop-io/backstop/pkg/apis/kubevirtbackup/v1alpha1"
	"github.com/backstop-io/backstop/pkg/virt"
)

// recoverInterrupted settles a backup a previous process was running: its
// libvirt job (which the daemon may still run) is aborted, its new
// checkpoint and partial output removed, and it is Failed with the reason.
func (c *Controller) recoverInterrupted(ctx context.Context, b *kv.VirtualMachineBackup) {
	msg := "the server stopped while the backup ran"
	if src, _, err := c.resolve(ctx, b); err == nil {
		if conn, err := c.cfg.Virt(); err == nil {
			domain := b.Namespace + "_" + src.vm
			if err := conn.AbortJob(ctx, domain); err != nil {
				msg += "; aborting its libvirt job: " + err.Error()
			}
			if err := conn.DeleteCheckpoint(domain, checkpointName(b)); err != nil {
				msg += "; deleting its checkpoint: " + err.Error()
			}
			if out, err := c.outputDir(b); err == nil && out != "" {
				// QEMU closes the targets a little after the job ends.
				entries, _ := os.ReadDir(out)
				for _, e := range entries {
					_ = virt.WaitReleased(ctx, filepath.Join(out, e.Name()))
				}
			}
		}
	}
	_ = c.removeOutputDir(b)
	c.fail(ctx, b, kv.ReasonServerRestarted, msg+"; its partial output was removed: run it again")
}

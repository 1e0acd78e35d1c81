package framework

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// StartReplicas starts a replica per element of args (its own arguments,
// after --storage-backend=etcd3 and the members of etcd) on etcd, each
// with a data directory of its own; replicas after the first get a copy
// of its pki directory (CA, serving certificate, download signing key),
// as docs/storage.md's "Scale out" tells operators to.
func StartReplicas(t testing.TB, etcd *Etcd, args [][]string) []*Server {
	t.Helper()
	common := []string{"--storage-backend=etcd3", "--etcd-servers=" + etcd.Endpoints()}
	var out []*Server
	for i, own := range args {
		dir := t.TempDir()
		if i > 0 {
			if data, err := exec.Command("cp", "-a", filepath.Join(out[0].DataDir, "pki"), dir).CombinedOutput(); err != nil {
				t.Fatalf("copying the pki directory: %v: %s", err, data)
			}
		}
		out = append(out, Start(t, Options{DataDir: dir, Args: append(slices.Clone(common), own...)}))
	}
	return out
}

//go:build bench

package clusterbench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/encryption"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var (
	sealedObjects = flag.Int("clusterbench.encrypted-objects", 5000, "ConfigMaps backed up and restored by BenchmarkEncryptedLocation")
	sealedValue   = flag.Int("clusterbench.encrypted-value-bytes", 8192, "random bytes in each of its ConfigMaps (base64: gzip cannot shrink them)")
)

// BenchmarkEncryptedLocation: the same ConfigMaps (random data, so that
// the tarball's bytes are the objects' own) backed up to a location that
// requires encryption and to one that does not, in turns, then restored
// from each: items/s and the tarball's MiB/s of each, side by side in one
// run, on one server (filesystem locations on the same disk), at
// BenchmarkCluster's page size and rate limits.
func BenchmarkEncryptedLocation(b *testing.B) {
	c := framework.StartCluster(b)
	c.StopBackstop(false)
	c.BackstopArgs = append(c.BackstopArgs, fmt.Sprintf("--client-page-size=%d", *pageSize),
		fmt.Sprintf("--client-qps=%g", *qps), fmt.Sprintf("--client-burst=%d", *burst))
	c.StartBackstop()
	ctx := context.Background()
	n := *sealedObjects
	const ns = "sealed-bench"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, *sealedValue*3/4)
	for i := 0; i < n; i++ {
		if _, err := rand.Read(value); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("o%06d", i)},
			Data: map[string]string{"value": base64.StdEncoding.EncodeToString(value)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	keys := filepath.Join(b.TempDir(), "keys.txt")
	if err := os.WriteFile(keys, []byte(id.String()+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	buckets := map[string]string{"plain": b.TempDir(), "encrypted": b.TempDir()}
	for name, config := range map[string]map[string]string{"plain": nil, "encrypted": {encryption.ConfigIdentitiesFile: keys}} {
		if _, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Create(ctx, &velerov1.BackupStorageLocation{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: velerov1.BackupStorageLocationSpec{Provider: "filesystem", Config: config,
				StorageType: velerov1.StorageType{ObjectStorage: &velerov1.ObjectStorageLocation{Bucket: buckets[name]}}},
		}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.Backstop.VeleroV1().BackupStorageLocations(adminNamespace).Get(ctx, name, metav1.GetOptions{})
			return err == nil && l.Status.Phase == velerov1.BackupStorageLocationPhaseAvailable, nil
		}); err != nil {
			b.Fatalf("location %s not Available", name)
		}
	}

	// The locations take turns, each first every other round, after a
	// round not counted (the server's first backup and restore warm it).
	const rounds = 4
	type totals struct {
		elapsed time.Duration
		bytes   int64
	}
	backups, restores := map[string]*totals{"plain": {}, "encrypted": {}}, map[string]*totals{"plain": {}, "encrypted": {}}
	for round := -1; round < rounds; round++ {
		order := []string{"plain", "encrypted"}
		if round%2 != 0 {
			order = []string{"encrypted", "plain"}
		}
		for _, location := range order {
			counted := round >= 0
			name := fmt.Sprintf("%s-%d", location, round+1)
			start := time.Now()
			if _, err := c.Backstop.VeleroV1().Backups(adminNamespace).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}, IncludedResources: []string{"configmaps"}, StorageLocation: location}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			done := waitBackup(b, c, name, start)
			took := time.Since(start)
			if done.Status.Phase != velerov1.BackupPhaseCompleted || done.Status.Progress == nil || done.Status.Progress.ItemsBackedUp < n {
				b.Fatalf("backup %s: %s, progress %+v", name, done.Status.Phase, done.Status.Progress)
			}
			info, err := os.Stat(filepath.Join(buckets[location], "backups", name, name+".tar.gz"))
			if err != nil {
				b.Fatal(err)
			}
			if counted {
				backups[location].elapsed += took
				backups[location].bytes += info.Size()
			}

			start = time.Now()
			if _, err := c.Backstop.VeleroV1().Restores(adminNamespace).Create(ctx, &velerov1.Restore{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: velerov1.RestoreSpec{BackupName: name, NamespaceMapping: map[string]string{ns: name}}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			var restored *velerov1.Restore
			if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Hour, true, func(ctx context.Context) (bool, error) {
				r, err := c.Backstop.VeleroV1().Restores(adminNamespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				restored = r
				return r.Status.Phase.Terminal(), nil
			}); err != nil || restored.Status.Phase != velerov1.RestorePhaseCompleted || restored.Status.Progress == nil || restored.Status.Progress.ItemsRestored < n {
				b.Fatalf("restore %s: %v, %+v", name, err, restored)
			}
			if counted {
				restores[location].elapsed += time.Since(start)
				restores[location].bytes += info.Size()
			}
		}
	}
	for _, op := range []struct {
		name string
		of   map[string]*totals
	}{{"backup", backups}, {"restore", restores}} {
		for _, location := range []string{"plain", "encrypted"} {
			t := op.of[location]
			b.Run(fmt.Sprintf("op=%s/location=%s", op.name, location), func(b *testing.B) {
				b.ReportMetric(float64(n*rounds)/t.elapsed.Seconds(), "items/s")
				b.ReportMetric(float64(t.bytes)/(1<<20)/t.elapsed.Seconds(), "tarball-MiB/s")
			})
		}
		ratio := (float64(n*rounds) / op.of["encrypted"].elapsed.Seconds()) / (float64(n*rounds) / op.of["plain"].elapsed.Seconds())
		b.Logf("%s: encrypted at %.2fx the plain location's items/s", op.name, ratio)
	}
}

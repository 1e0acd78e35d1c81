package verify

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/backstop-io/backstop/pkg/archive"
	"github.com/backstop-io/backstop/pkg/archive/archivetest"
	"github.com/backstop-io/backstop/pkg/objectstore"
)

var (
	benchItems = flag.Int("verify.items", 5000, "items of BenchmarkVerification's backup")
	benchValue = flag.Int("verify.value-bytes", 8192, "random bytes (base64) in each of its items: gzip cannot shrink them")
)

// BenchmarkVerification: a backup's verification (Objects: every object
// read back through the store, hashed against the manifest, the tarball's
// items decoded) against reading the same objects through the same store
// and discarding them, and against reading them as a restore does (the
// tarball unpacked item by item), in turns, for a plain and an encrypted
// filesystem location: MiB/s of each (of the objects' bytes) and the
// ratios (target: verification at 0.8x or better).
//
//	go test ./pkg/engine/verify -run '^$' -bench Verification -benchtime 10x
func BenchmarkVerification(b *testing.B) {
	entries := []archivetest.Entry{version}
	value := make([]byte, *benchValue*3/4)
	for i := range *benchItems {
		if _, err := rand.Read(value); err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("cm-%06d", i)
		entries = append(entries, archivetest.Item("configmaps", "v1", "bench", name, []byte(fmt.Sprintf(
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"bench"},"data":{"value":%q}}`,
			name, base64.StdEncoding.EncodeToString(value)))))
	}
	tarball := archivetest.Build(b, entries...)
	for _, loc := range []struct {
		name string
		wrap func(objectstore.Store) objectstore.Store
	}{
		{"plain", nil},
		{"encrypted", encryptedWith(b)},
	} {
		b.Run("location="+loc.name, func(b *testing.B) {
			store, layout := writeBackupWith(b, b.TempDir(), loc.wrap, tarball)
			ctx := context.Background()
			manifest, err := objectstore.GetManifest(ctx, store, layout, backupName, MaxManifestSize)
			if err != nil {
				b.Fatal(err)
			}
			read := func() int64 {
				var n int64
				for _, o := range manifest.Objects {
					rc, err := store.Get(ctx, layout.BackupDir(backupName)+o.Name)
					if err != nil {
						b.Fatal(err)
					}
					m, err := io.Copy(io.Discard, rc)
					rc.Close()
					if err != nil {
						b.Fatal(err)
					}
					n += m
				}
				return n
			}
			// unpack reads the objects as a restore reads them: the
			// tarball unpacked item by item (gunzip, untar), the others
			// whole.
			unpack := func() {
				for _, o := range manifest.Objects {
					rc, err := store.Get(ctx, layout.BackupDir(backupName)+o.Name)
					if err != nil {
						b.Fatal(err)
					}
					if o.Name == backupName+".tar.gz" {
						tr, err := archive.NewReader(rc)
						if err != nil {
							b.Fatal(err)
						}
						n := 0
						for ; ; n++ {
							if _, err := tr.Next(); err == io.EOF {
								break
							} else if err != nil {
								b.Fatal(err)
							}
						}
						if n != *benchItems {
							b.Fatalf("%d items unpacked", n)
						}
					}
					if _, err := io.Copy(io.Discard, rc); err != nil {
						b.Fatal(err)
					}
					rc.Close()
				}
			}
			verify := func() {
				r := &Report{}
				if err := Objects(ctx, store, layout, backupName, r); err != nil || r.ProblemCount != 0 || r.Items != *benchItems {
					b.Fatalf("verification: %v, %+v", err, r)
				}
			}
			var bytes int64
			took := map[string]time.Duration{}
			b.ResetTimer()
			for i := range b.N {
				bytes += read()
				// The three take turns, each first every third round.
				order := []string{"read", "unpack", "verify"}
				for turn := range order {
					what := order[(turn+i)%len(order)]
					start := time.Now()
					switch what {
					case "read":
						read()
					case "unpack":
						unpack()
					case "verify":
						verify()
					}
					took[what] += time.Since(start)
				}
			}
			mib := float64(bytes) / (1 << 20)
			b.Logf("%s: %.1f MiB of objects a round", loc.name, mib/float64(b.N))
			for _, what := range []string{"read", "unpack", "verify"} {
				b.ReportMetric(mib/took[what].Seconds(), what+"-MiB/s")
			}
			b.ReportMetric(took["read"].Seconds()/took["verify"].Seconds(), "verify/read")
			b.ReportMetric(took["unpack"].Seconds()/took["verify"].Seconds(), "verify/unpack")
		})
	}
}

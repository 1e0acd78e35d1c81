//go:build bench

package datamoverbench

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/kopia/kopia/repo/splitter"
)

// BenchmarkChangedRegionBySplitter measures what the incremental target
// ("after a 1% change, bytes uploaded ≤ 1.1x the changed bytes") meets in
// kopia's format: a 5 MiB region of a 128 MiB file overwritten in place,
// at 16 offsets, and the bytes of the chunks kopia would store anew (those
// of the changed file's chunks not among the file's earlier chunks), for
// kopia's default splitter (Velero's and the kopia CLI's) and smaller
// ones. No storage: the chunks are compared by their hashes.
func BenchmarkChangedRegionBySplitter(b *testing.B) {
	const size, region, trials = 128 << 20, 5 << 20, 16
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		b.Fatal(err)
	}
	for _, alg := range []string{splitter.DefaultAlgorithm, "DYNAMIC-2M-BUZHASH", "DYNAMIC-1M-BUZHASH", "DYNAMIC-512K-BUZHASH", "DYNAMIC-256K-BUZHASH", "FIXED-1M"} {
		b.Run(alg, func(b *testing.B) {
			before := chunkHashes(alg, data)
			var written int
			changed := make([]byte, size)
			for i := range trials {
				copy(changed, data)
				// A page-aligned offset, new at each trial.
				off := int((binary.LittleEndian.Uint64(seed[:])+uint64(i)*7919*4096)%(size-region)) &^ 4095
				if _, err := rand.Read(changed[off : off+region]); err != nil {
					b.Fatal(err)
				}
				for h, n := range chunkHashes(alg, changed) {
					if _, ok := before[h]; !ok {
						written += n
					}
				}
			}
			ratio := float64(written) / trials / region
			b.ReportMetric(ratio, "written-per-changed-byte")
			b.ReportMetric(float64(size)/float64(len(before)), "bytes-per-chunk")
			fmt.Printf("%s: %d chunks of the 128 MiB file; a 5 MiB region changed writes %.2f MiB (%.2fx)\n", alg, len(before), ratio*region/(1<<20), ratio)
		})
	}
}

// chunkHashes are the sizes of data's chunks by their hashes, as alg
// splits it.
func chunkHashes(alg string, data []byte) map[[32]byte]int {
	s := splitter.GetFactory(alg)()
	defer s.Close()
	chunks := map[[32]byte]int{}
	for start := 0; start < len(data); {
		n := s.NextSplitPoint(data[start:])
		if n < 0 {
			n = len(data) - start
		}
		chunks[sha256.Sum256(data[start:start+n])] = n
		start += n
	}
	return chunks
}

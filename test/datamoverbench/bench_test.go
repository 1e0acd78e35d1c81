//go:build bench

// Package datamoverbench measures the data mover's kopia path against the
// kopia CLI, its peer, side by side in one run: 1 GiB (one 512 MiB file
// and 10,000 small files) uploaded into a loopback S3 bucket (versitygw),
// then again after 1% of it changed, then restored; each side in a process
// of its own (Backstop's through kopiarepo, as a DataUpload and a
// DataDownload run it; the CLI as its users run it), with kopia's default
// policy on both (no compression). Reported: seconds and MB/s, the bytes
// each wrote to the bucket, and each process's peak RSS. make
// bench-datamover runs it; docs/benchmarks.md has the figures.
package datamoverbench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/test/integration/framework"
)

const password = "static-passw0rd"

var smallFiles = flag.Int("datamoverbench.small-files", 10000, "small files in the data set (512 MiB in all, beside one 512 MiB file)")

// TestMain runs a helper step when asked (the Backstop side in a process
// of its own, so that its peak RSS is its own), the benchmarks otherwise,
// in a network namespace of their own (the control plane of
// BenchmarkDataUploadVersusKopiaCLI needs one).
func TestMain(m *testing.M) {
	if step := os.Getenv("DATAMOVERBENCH_STEP"); step != "" {
		if err := helper(step); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(framework.RunInNetNS(m))
}

// helperArgs is what the benchmark passes a helper step.
type helperArgs struct {
	S3                     kopiarepo.S3
	Dir, Source, Snapshot  string
	Target, ConnectionsDir string
}

// helper runs one step of the Backstop side: upload or restore.
func helper(step string) error {
	var a helperArgs
	if err := json.Unmarshal([]byte(os.Getenv("DATAMOVERBENCH_ARGS")), &a); err != nil {
		return err
	}
	ctx := context.Background()
	st, err := kopiarepo.S3Storage(ctx, a.S3)
	if err != nil {
		return err
	}
	r, err := kopiarepo.Open(ctx, kopiarepo.Config{Storage: st, Password: password, Dir: a.ConnectionsDir, Create: true})
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	switch step {
	case "upload":
		res, err := r.Upload(ctx, a.Dir, a.Source, nil, nil)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(res)
	case "restore":
		_, err := r.Restore(ctx, a.Snapshot, a.Target, nil)
		return err
	}
	return fmt.Errorf("no step %q", step)
}

// run is one timed process: its output, wall time and peak RSS.
type run struct {
	out     []byte
	seconds float64
	peakMiB float64
}

func timed(b *testing.B, cmd *exec.Cmd) run {
	b.Helper()
	start := time.Now()
	out, err := cmd.Output()
	elapsed := time.Since(start).Seconds()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		b.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return run{out: out, seconds: elapsed, peakMiB: float64(ru.Maxrss) / 1024}
}

// writeRandom writes n random bytes at off of the file at path, 4 MiB at
// a time: the benchmark's own memory stays small, and a child process
// starts with its parent's peak RSS as its own (Linux copies it at fork).
func writeRandom(b *testing.B, path string, off int64, n int) {
	b.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, min(n, 4<<20))
	for done := 0; done < n; done += len(chunk) {
		chunk = chunk[:min(len(chunk), n-done)]
		if _, err := rand.Read(chunk); err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(chunk, off+int64(done)); err != nil {
			b.Fatal(err)
		}
	}
}

// kopiaCLI creates a kopia repository in the bucket "kopia" of srv at
// prefix with the kopia CLI, and returns a runner of the CLI connected to
// it, each command timed.
func kopiaCLI(b *testing.B, srv *framework.S3Server, prefix string) func(args ...string) run {
	b.Helper()
	config := filepath.Join(b.TempDir(), "kopia.config")
	home := b.TempDir()
	kopia := func(args ...string) run {
		cmd := exec.Command(framework.Binary(b, "kopia"), append(args, "--config-file="+config)...)
		cmd.Env = append(os.Environ(), "KOPIA_CHECK_FOR_UPDATES=false", "KOPIA_PASSWORD="+password, "HOME="+home)
		return timed(b, cmd)
	}
	kopia("repository", "create", "s3", "--bucket=kopia", "--prefix="+prefix, "--endpoint="+strings.TrimPrefix(srv.Endpoint, "http://"),
		"--disable-tls", "--region=us-east-1", "--access-key="+srv.AccessKey, "--secret-access-key="+srv.SecretKey)
	return kopia
}

// snapshotID is the ID of the snapshot `kopia snapshot create --json` made.
func snapshotID(b *testing.B, r run) string {
	b.Helper()
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.out, &m); err != nil || m.ID == "" {
		b.Fatalf("kopia snapshot create: %v\n%s", err, r.out)
	}
	return m.ID
}

// bigFile is the size of the data set's big file; its small files are
// as many more bytes.
const bigFile = 512 << 20

// writeDataSet writes the data set into dir: volume.img (512 MiB) and
// the small files, 512 MiB in all, in 100 directories.
func writeDataSet(b *testing.B, dir string) {
	b.Helper()
	writeRandom(b, filepath.Join(dir, "volume.img"), 0, bigFile)
	smallSize := bigFile / *smallFiles
	for i := range *smallFiles {
		sub := filepath.Join(dir, "files", fmt.Sprintf("%03d", i%100))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		writeRandom(b, filepath.Join(sub, fmt.Sprintf("item-%05d.bin", i)), 0, smallSize)
	}
}

// changeOnePercent changes 1% of the data set in dir: 5 MiB in the middle
// of the big file, and 1% of the small files rewritten. It returns the
// bytes changed.
func changeOnePercent(b *testing.B, dir string) int64 {
	b.Helper()
	changed := int64(5 << 20)
	writeRandom(b, filepath.Join(dir, "volume.img"), bigFile/2, int(changed))
	smallSize := bigFile / *smallFiles
	for i := 0; i < *smallFiles; i += 100 {
		writeRandom(b, filepath.Join(dir, "files", fmt.Sprintf("%03d", i%100), fmt.Sprintf("item-%05d.bin", i)), 0, smallSize)
		changed += int64(smallSize)
	}
	return changed
}

// BenchmarkUploadVersusKopiaCLI: the data set uploaded by each side into
// its own bucket of the same S3 server, uploaded again after 1% of it
// changed (half in the big file, half in 1% of the small files), and the
// second snapshot restored.
func BenchmarkUploadVersusKopiaCLI(b *testing.B) {
	srv := framework.StartS3(b)
	endpoint, err := url.Parse(srv.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	data := b.TempDir()
	writeDataSet(b, data)
	total := float64(framework.DirBytes(b, data))

	// The Backstop side.
	srv.MakeBucket(b, "backstop")
	connections := b.TempDir()
	backstop := func(step string, a helperArgs) run {
		a.S3 = kopiarepo.S3{Bucket: "backstop", Prefix: kopiarepo.Prefix("", "bench"), Endpoint: endpoint.Host, DisableTLS: true,
			Region: "us-east-1", AccessKeyID: srv.AccessKey, SecretKey: srv.SecretKey}
		a.ConnectionsDir, a.Source = connections, kopiarepo.SourcePath("bench", "data")
		args, err := json.Marshal(a)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "DATAMOVERBENCH_STEP="+step, "DATAMOVERBENCH_ARGS="+string(args))
		return timed(b, cmd)
	}
	// The kopia CLI.
	srv.MakeBucket(b, "kopia")
	kopia := kopiaCLI(b, srv, kopiarepo.Prefix("", "bench"))
	kopiaSnapshot := func() (run, string) {
		r := kopia("snapshot", "create", data, "--json")
		return r, snapshotID(b, r)
	}
	bucket := func(name string) int64 { return framework.DirBytes(b, filepath.Join(srv.Root, name)) }

	type row struct {
		what              string
		backstop, kopiaCL run
		// bytes each wrote to its bucket (0: not measured).
		backstopBytes, kopiaBytes int64
		// size is the data the step moves.
		size float64
	}
	var rows []row

	b0, k0 := bucket("backstop"), bucket("kopia")
	first := backstop("upload", helperArgs{Dir: data})
	firstKopia, _ := kopiaSnapshot()
	rows = append(rows, row{what: "first upload (1 GiB)", backstop: first, kopiaCL: firstKopia,
		backstopBytes: bucket("backstop") - b0, kopiaBytes: bucket("kopia") - k0, size: total})

	changed := changeOnePercent(b, data)
	b1, k1 := bucket("backstop"), bucket("kopia")
	second := backstop("upload", helperArgs{Dir: data})
	secondKopia, kopiaID := kopiaSnapshot()
	rows = append(rows, row{what: fmt.Sprintf("after a 1%% change (%.1f MiB)", float64(changed)/(1<<20)), backstop: second, kopiaCL: secondKopia,
		backstopBytes: bucket("backstop") - b1, kopiaBytes: bucket("kopia") - k1, size: float64(changed)})

	var res kopiarepo.UploadResult
	if err := json.Unmarshal(second.out, &res); err != nil {
		b.Fatal(err)
	}
	restoreB := backstop("restore", helperArgs{Snapshot: res.SnapshotID, Target: filepath.Join(b.TempDir(), "restored")})
	restoreK := kopia("snapshot", "restore", kopiaID, filepath.Join(b.TempDir(), "restored"))
	rows = append(rows, row{what: "restore (1 GiB)", backstop: restoreB, kopiaCL: restoreK, size: total})

	var report strings.Builder
	fmt.Fprintf(&report, "\n| %s | Backstop (kopiarepo) | kopia CLI | Backstop / kopia |\n|---|---|---|---|\n", "step")
	for _, r := range rows {
		fmt.Fprintf(&report, "| %s: seconds | %.1f | %.1f | %.2fx the time |\n", r.what, r.backstop.seconds, r.kopiaCL.seconds, r.backstop.seconds/r.kopiaCL.seconds)
		fmt.Fprintf(&report, "| %s: MB/s of data | %.0f | %.0f | %.2fx the throughput |\n", r.what, r.size/1e6/r.backstop.seconds, r.size/1e6/r.kopiaCL.seconds,
			r.kopiaCL.seconds/r.backstop.seconds)
		if r.backstopBytes != 0 || r.kopiaBytes != 0 {
			fmt.Fprintf(&report, "| %s: MiB written to the bucket | %.1f | %.1f | %.2fx the data |\n", r.what, float64(r.backstopBytes)/(1<<20), float64(r.kopiaBytes)/(1<<20),
				float64(r.backstopBytes)/r.size)
		}
		fmt.Fprintf(&report, "| %s: peak RSS, MiB | %.0f | %.0f | |\n", r.what, r.backstop.peakMiB, r.kopiaCL.peakMiB)
	}
	fmt.Print(report.String())
	b.ReportMetric(rows[0].kopiaCL.seconds/rows[0].backstop.seconds, "first-upload-throughput-vs-kopia")
	b.ReportMetric(float64(rows[1].backstopBytes)/rows[1].size, "written-per-changed-byte")
	b.ReportMetric(rows[2].kopiaCL.seconds/rows[2].backstop.seconds, "restore-throughput-vs-kopia")
}

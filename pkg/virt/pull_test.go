package virt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backstop-io/backstop/pkg/virt"
	"github.com/backstop-io/backstop/pkg/virt/virttest"
)

// TestFullBackupPull: a full backup in pull mode is the disk as it was when
// it started (the guest writes while the copy runs: those writes are not
// in it), reports progress to 100%, leaves only its target, and its
// checkpoint is where the next (push) incremental starts: that one holds
// exactly the clusters written since, and the chain reads as the live disk.
func TestFullBackupPull(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-pull", "64M")
	ctx := context.Background()
	dom.Write(t, 0x11, "0", "8M")
	dom.Write(t, 0x22, "40M", "4M")

	// The copy is rate-limited so that the guest writes while it runs.
	dir := mkdir(t, dom.Dir, "full")
	var mu sync.Mutex
	var last virt.Progress
	started := make(chan struct{})
	var once sync.Once
	type result struct {
		res virt.BackupResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.FullBackupPull(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: dir, Checkpoint: "cp1"}, 4<<20, func(p virt.Progress) {
			mu.Lock()
			last = p
			mu.Unlock()
			once.Do(func() { close(started) })
		})
		done <- result{res, err}
	}()
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("the backup ended before any progress: %v", r.err)
	case <-time.After(time.Minute):
		t.Fatal("no progress in a minute")
	}
	dom.Write(t, 0xee, "0", "64k")
	dom.Write(t, 0xee, "40M", "64k")
	r := <-done
	full, err := r.res, r.err
	if err != nil {
		t.Fatalf("full pull backup: %v", err)
	}
	if last.Total != 64<<20 || last.Done != last.Total {
		t.Errorf("last progress %+v, want %d of %d", last, 64<<20, 64<<20)
	}
	if full.Bytes < 12<<20 {
		t.Errorf("the backup reports %d bytes written, want at least the 12 MiB of data", full.Bytes)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "vda.qcow2" {
		t.Errorf("the backup directory holds %v, want only vda.qcow2 (no scratch file)", entries)
	}
	if cps, err := c.Checkpoints(dom.Name); err != nil || !slices.Equal(cps, []string{"cp1"}) {
		t.Fatalf("checkpoints after the pull backup: %v %v", cps, err)
	}
	target := full.Targets["vda"]
	// The writes made during the backup are not in it.
	for _, read := range []string{"read -P 0x11 0 64k", "read -P 0x22 40M 64k"} {
		if out := virttest.Run(t, "qemu-io", "-r", "-f", "qcow2", "-c", read, target); !strings.Contains(out, "read 65536/65536") {
			t.Errorf("%s on the backup: %s", read, out)
		}
	}

	// Put back what the backup holds; the next incremental then holds
	// exactly the clusters written since it started.
	dom.Write(t, 0x11, "0", "64k")
	dom.Write(t, 0x22, "40M", "64k")
	dom.Write(t, 0xab, "2M", "64k")
	inc, err := c.PushBackup(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: mkdir(t, dom.Dir, "inc"), Incremental: "cp1",
		Backing: map[string]string{"vda": target}, Checkpoint: "cp2"}, nil)
	if err != nil {
		t.Fatalf("incremental after the pull backup: %v", err)
	}
	if got := virttest.DataRanges(t, inc.Targets["vda"]); !slices.Equal(got, []string{"0+65536", "2097152+65536", "41943040+65536"}) {
		t.Errorf("incremental holds %v, want exactly the clusters written since the full backup started", got)
	}
	dom.Suspend(t)
	virttest.Run(t, "qemu-img", "compare", "-U", inc.Targets["vda"], dom.Disk)
	dom.Resume(t)
}

// TestFullBackupPullInterrupted: a pull backup (its copy rate-limited so it
// runs long) cancelled, or whose domain stops, ends with ErrAborted or
// ErrDomainStopped and leaves no file, no checkpoint and no job.
func TestFullBackupPullInterrupted(t *testing.T) {
	c := open(t)
	dom := virttest.NewDomain(t, "backstop-virt-pull-stop", "64M")
	dom.Write(t, 0x11, "0", "32M")
	for _, tc := range []struct {
		name      string
		interrupt func(cancel context.CancelFunc)
		want      error
	}{
		{"cancelled", func(cancel context.CancelFunc) { cancel() }, virt.ErrAborted},
		{"domain stopped", func(context.CancelFunc) { dom.Stop(t) }, virt.ErrDomainStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dir := mkdir(t, dom.Dir, filepath.Base(t.Name()))
			started := make(chan struct{})
			var once sync.Once
			errc := make(chan error, 1)
			go func() {
				_, err := c.FullBackupPull(ctx, virt.BackupRequest{Domain: dom.Name, TargetDir: dir, Checkpoint: "cp-" + filepath.Base(t.Name())}, 1<<20,
					func(p virt.Progress) {
						if p.Done > 0 {
							once.Do(func() { close(started) })
						}
					})
				errc <- err
			}()
			select {
			case <-started:
			case err := <-errc:
				t.Fatalf("the backup ended before it was interrupted: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("no progress in a minute")
			}
			tc.interrupt(cancel)
			select {
			case err := <-errc:
				if !errors.Is(err, tc.want) {
					t.Fatalf("interrupted backup: %v, want %v", err, tc.want)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("the interrupted backup did not end")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the interrupted backup left %v", entries)
			}
			if cps, err := c.Checkpoints(dom.Name); err != nil || len(cps) != 0 {
				t.Errorf("checkpoints after the interrupted backup: %v %v", cps, err)
			}
		})
	}
}

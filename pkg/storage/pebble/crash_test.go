package pebble

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
)

var crashRounds = flag.Int("crash.rounds", 20, "SIGKILL rounds of TestCrashRecovery")

const (
	crashChildEnv = "BACKSTOP_PEBBLE_CRASH_CHILD_DIR"
	lockChildEnv  = "BACKSTOP_PEBBLE_LOCK_CHILD_DIR"
)

// TestMain lets the test binary act as the child processes of the crash and
// lock tests.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		runCrashChild(dir, os.Getenv("BACKSTOP_PEBBLE_CRASH_ROUND"))
		return
	}
	if dir := os.Getenv(lockChildEnv); dir != "" {
		b, err := NewBackend(BackendOptions{Dir: dir})
		if err != nil {
			fmt.Println("OPEN-ERROR:", err)
			os.Exit(3)
		}
		_ = b.Close()
		fmt.Println("OPENED")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runCrashChild writes continuously from several goroutines (creates,
// updates and deletes of pods) and prints "ACK <rev> <op> <key>" after each
// acknowledged write, until it is killed.
func runCrashChild(dir, round string) {
	ctx, s, _ := openCrashStore(dir)
	var out sync.Mutex
	ack := func(rev string, op, key string) {
		out.Lock()
		fmt.Fprintf(os.Stdout, "ACK %s %s %s\n", rev, op, key)
		out.Unlock()
	}
	// Objects of 0 to 6 KiB by round, so that the WAL of some rounds
	// grows past its zero-filled chunks (walfill.go) before the kill.
	n, _ := strconv.Atoi(round)
	pad := strings.Repeat("x", (n%4)*2048)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("r%s-w%d-%d", round, w, i)
				key := "/pods/crash/" + name
				pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "crash", Name: name, Labels: map[string]string{"round": round},
					Annotations: map[string]string{"pad": pad}}}
				created := &example.Pod{}
				if err := s.Create(ctx, key, pod, created, 0); err != nil {
					fmt.Fprintln(os.Stderr, "create:", err)
					os.Exit(2)
				}
				ack(created.ResourceVersion, "create", key)
				switch i % 3 {
				case 1:
					updated := &example.Pod{}
					err := s.GuaranteedUpdate(ctx, key, updated, false, nil, storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
						p := obj.(*example.Pod)
						p.Annotations = map[string]string{"updated": "yes", "pad": pad}
						return p, nil
					}), nil)
					if err != nil {
						fmt.Fprintln(os.Stderr, "update:", err)
						os.Exit(2)
					}
					ack(updated.ResourceVersion, "update", key)
				case 2:
					deleted := &example.Pod{}
					if err := s.Delete(ctx, key, deleted, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}); err != nil {
						fmt.Fprintln(os.Stderr, "delete:", err)
						os.Exit(2)
					}
					ack(deleted.ResourceVersion, "delete", key)
				}
			}
		}(w)
	}
	wg.Wait()
}

func openCrashStore(dir string) (context.Context, *store, *Backend) {
	s, b, err := newPodStore(dir, defaultSetupOptions())
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	return context.Background(), s, b
}

type crashAck struct {
	rev int64
	op  string
	key string
}

// TestCrashRecovery kills a writing child process with SIGKILL at random
// moments, reopens the database and checks that every acknowledged write is
// there, that revisions are strictly increasing and gapless, that the current
// state is exactly the replay of the log, and that a watch from an old
// revision replays every event in order.
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	t.Logf("crash rounds: %d (more with -crash.rounds)", *crashRounds)
	var lastRev int64
	for round := 0; round < *crashRounds; round++ {
		acks := runAndKill(t, dir, round, 20+rng.Intn(300))
		if len(acks) == 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
		lastRev = verifyAfterCrash(t, dir, round, acks, lastRev)
	}
}

func runAndKill(t *testing.T, dir string, round, killAfter int) []crashAck {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "BACKSTOP_PEBBLE_CRASH_ROUND="+strconv.Itoa(round))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acks []crashAck
	scanner := bufio.NewScanner(stdout)
	killed := false
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 4 || fields[0] != "ACK" {
			continue
		}
		rev, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			t.Fatalf("bad ack line %q", scanner.Text())
		}
		acks = append(acks, crashAck{rev: rev, op: fields[2], key: fields[3]})
		if !killed && len(acks) >= killAfter {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("round %d: child exited before it was killed: %v\n%s", round, err, stderr.String())
	}
	return acks
}

func verifyAfterCrash(t *testing.T, dir string, round int, acks []crashAck, previousRev int64) int64 {
	t.Helper()
	s, backend, err := newPodStore(dir, defaultSetupOptions())
	if err != nil {
		t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
	}
	defer func() { _ = backend.Close() }()
	ctx := context.Background()
	db := backend.DB()
	current := db.Rev()

	// Revisions: the log holds every revision from 1 to current, in order.
	events, err := db.readEvents(1, current, int(current)+1)
	if err != nil {
		t.Fatalf("round %d: reading the log: %v", round, err)
	}
	if int64(len(events)) != current {
		t.Fatalf("round %d: log has %d events for revision %d", round, len(events), current)
	}
	for i, ev := range events {
		if ev.rev != int64(i+1) {
			t.Fatalf("round %d: log entry %d has revision %d", round, i, ev.rev)
		}
	}
	if current < previousRev {
		t.Fatalf("round %d: revision went back from %d to %d", round, previousRev, current)
	}

	// Every acknowledged write is in the log at its revision.
	for _, a := range acks {
		if a.rev > current {
			t.Fatalf("round %d: acknowledged revision %d is beyond the recovered revision %d", round, a.rev, current)
		}
		ev := events[a.rev-1]
		wantType := eventPut
		if a.op == "delete" {
			wantType = eventDelete
		}
		if ev.key != "/"+strings.TrimPrefix(a.key, "/") || ev.typ != wantType {
			t.Fatalf("round %d: acknowledged %s of %s at %d, log has type %d of %s", round, a.op, a.key, a.rev, ev.typ, ev.key)
		}
	}

	// The current state is the replay of the log.
	replayed := map[string]int64{}
	for _, ev := range events {
		if ev.typ == eventPut {
			replayed[ev.key] = ev.rev
		} else {
			delete(replayed, ev.key)
		}
	}
	all, err := db.Range(ctx, "", "\xff", rangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.kvs) != len(replayed) {
		t.Fatalf("round %d: %d current keys, replay of the log gives %d", round, len(all.kvs), len(replayed))
	}
	for _, kv := range all.kvs {
		if replayed[kv.key] != kv.modRev {
			t.Fatalf("round %d: key %s at revision %d, replay gives %d", round, kv.key, kv.modRev, replayed[kv.key])
		}
	}

	// A watch from the first acknowledged revision of this round replays
	// every later event under /pods/ in order.
	from := acks[0].rev
	var want []int64
	for _, ev := range events[from:] {
		if strings.HasPrefix(ev.key, "/pods/") {
			want = append(want, ev.rev)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, wait.ForeverTestTimeout)
	defer cancel()
	w, err := s.Watch(wctx, "/pods/", storage.ListOptions{ResourceVersion: strconv.FormatInt(from, 10), Recursive: true, Predicate: storage.Everything})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, rev := range want {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("round %d: watch closed after %d of %d events", round, i, len(want))
			}
			if e.Type == watch.Error {
				t.Fatalf("round %d: watch error: %v", round, e.Object)
			}
			got, err := s.versioner.ObjectResourceVersion(e.Object)
			if err != nil {
				t.Fatal(err)
			}
			if int64(got) != rev {
				t.Fatalf("round %d: watch event %d has revision %d, want %d", round, i, got, rev)
			}
		case <-wctx.Done():
			t.Fatalf("round %d: watch delivered %d of %d events", round, i, len(want))
		}
	}
	return current
}

// TestSecondProcessIsRefused: a second server process on the same data
// directory fails at start with a clear message instead of corrupting it.
func TestSecondProcessIsRefused(t *testing.T) {
	dir := t.TempDir()
	b, err := NewBackend(BackendOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a second process opened the locked database:\n%s", out)
	}
	if !strings.Contains(string(out), "OPEN-ERROR") || !strings.Contains(string(out), "another backstop server") || !strings.Contains(string(out), "lock") {
		t.Fatalf("want a clear lock error, got:\n%s", out)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Once the first process has closed it, the directory opens again.
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "OPENED") {
		t.Fatalf("reopening after close failed: %v\n%s", err, out)
	}
}

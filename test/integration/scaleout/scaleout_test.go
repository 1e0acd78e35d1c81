// Package scaleout runs several replicas of the real server on a real etcd
// cluster of three members (processes on loopback): every replica serves
// the API, the engines run on the holder of the Lease, and the replicas
// share one CA (the first replica's <data-dir>/pki, copied to the others,
// as docs/storage.md's "Scale out" tells operators to).
package scaleout

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/engine/leader"
	"github.com/backstop-io/backstop/pkg/failpoint"
	"github.com/backstop-io/backstop/test/integration/framework"
)

var trials = flag.Int("scaleout.trials", 2, "failover trials (kill -9 of the leader)")

const (
	ns = "backstop-system"
	// The Lease: short, so that trials are quick; a leader that cannot
	// renew within the deadline stops before another may take over.
	leaseDuration = 4 * time.Second
)

var electionArgs = []string{"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}

// cluster is the replicas and their etcd.
type cluster struct {
	t        *testing.T
	etcd     *framework.Etcd
	replicas []*framework.Server
}

// startCluster starts n replicas on a three-member etcd.
func startCluster(t *testing.T, n int) *cluster {
	args := make([][]string, n)
	return startReplicas(t, framework.StartEtcd(t, 3), args)
}

// startReplicas starts a replica per element of args (its own arguments,
// after the election's) on etcd.
func startReplicas(t *testing.T, etcd *framework.Etcd, args [][]string) *cluster {
	all := make([][]string, len(args))
	for i, own := range args {
		all[i] = append(slices.Clone(electionArgs), own...)
	}
	return &cluster{t: t, etcd: etcd, replicas: framework.StartReplicas(t, etcd, all)}
}

// enginesLease is the engines' Lease.
const enginesLease = "backstop-engines"

// holder is the term of a Lease, read through replica r.
func (c *cluster) holder(ctx context.Context, r *framework.Server, lease string) (leader.Term, error) {
	kube, err := kubernetes.NewForConfig(r.Config)
	if err != nil {
		return leader.Term{}, err
	}
	return leader.LeaseTerm(kube.CoordinationV1(), ns)(ctx, lease)
}

// leaderIndex is the replica whose name holds the engines' Lease, waiting
// for one.
func (c *cluster) leaderIndex(ctx context.Context, via *framework.Server, not leader.Term) (int, leader.Term) {
	c.t.Helper()
	return c.holderIndex(ctx, via, enginesLease, not)
}

// holderIndex is the replica whose name holds the Lease, waiting for one
// in another term than not.
func (c *cluster) holderIndex(ctx context.Context, via *framework.Server, lease string, not leader.Term) (int, leader.Term) {
	c.t.Helper()
	var idx = -1
	var term leader.Term
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if term, err = c.holder(ctx, via, lease); err != nil || term == not || term.Holder == "" {
			return false, nil
		}
		for i, r := range c.replicas {
			id, err := os.ReadFile(filepath.Join(r.DataDir, "replica-id"))
			if err == nil && strings.HasSuffix(term.Holder, "_"+strings.TrimSpace(string(id))) {
				idx = i
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		c.t.Fatalf("no replica took the Lease %s (last term %v): %v", lease, term, err)
	}
	return idx, term
}

// startedRE is the backup engine's log line when it starts a backup (in
// the server log of whichever replica ran it): the controller's, which
// says how long the backup waited (the run's own log, copied to the
// server's, says "Backup started" too, with its location).
var startedRE = regexp.MustCompile(`"Backup started".* backup="` + ns + `/([^"]+)".* waited=`)

// starts counts how often each backup was started, from every replica's
// server log (kept across restarts): a backup run twice shows twice.
func (c *cluster) starts() map[string]int {
	c.t.Helper()
	out := map[string]int{}
	for _, r := range c.replicas {
		data, err := os.ReadFile(filepath.Join(r.DataDir, "server.log"))
		if err != nil {
			c.t.Fatal(err)
		}
		for _, m := range startedRE.FindAllStringSubmatch(string(data), -1) {
			out[m[1]]++
		}
	}
	return out
}

// TestScaleOut: three replicas on a three-member etcd, with clients
// creating, listing and watching through every replica and backups
// running: the leader killed (kill -9) trial after trial, paused past its
// Lease (SIGSTOP) and woken, an etcd member killed. No acknowledged write
// is lost, no backup runs twice, another replica takes over within the
// Lease, a write of an ended term is refused, a watch on one replica sees
// another's writes in order with the same resourceVersions, and a download
// link minted on one replica opens on another.
func TestScaleOut(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r1, r2 := c.replicas[0], c.replicas[1]
	// The steps run in order on one cluster, each on what the ones before
	// left: the first that fails ends the test. The cluster's helpers
	// report to the step under way.
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, func(st *testing.T) {
			c.t = st
			defer func() { c.t = t }()
			f(st)
		}) {
			t.FailNow()
		}
	}
	// What the steps share: the load's acknowledged writes, the leader
	// and its term, and what the end reports.
	var (
		mu                         sync.Mutex
		acked                      = map[string]bool{}
		stopLoad                   context.CancelFunc
		clients                    sync.WaitGroup
		takeovers                  []time.Duration
		term                       leader.Term
		lost, doubles, interrupted int
		scheduled                  []velerov1.Backup
		fired                      int
	)

	step("a watch through one replica sees another's writes in order", func(t *testing.T) {
		// A watch through replica 2 sees the writes made through replica 1,
		// in order, with the resourceVersions replica 1 answered.
		w, err := r2.Clientset.VeleroV1().Backups(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var written []string
		for i := range 5 {
			b, err := r1.Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("order-%d", i)},
				Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			written = append(written, b.Name+"@"+b.ResourceVersion)
		}
		var seen []string
		for len(seen) < len(written) {
			select {
			case e, open := <-w.ResultChan():
				if !open {
					t.Fatalf("replica 2's watch ended after %v of %v", seen, written)
				}
				if b, ok := e.Object.(*velerov1.Backup); ok && e.Type == watch.Added {
					seen = append(seen, b.Name+"@"+b.ResourceVersion)
				}
			case <-time.After(time.Minute):
				t.Fatalf("replica 2's watch saw %v of %v", seen, written)
			}
		}
		w.Stop()
		if strings.Join(seen, " ") != strings.Join(written, " ") {
			t.Errorf("replica 2's watch: %v, want replica 1's writes %v", seen, written)
		}
	})

	step("a download link minted on one replica opens on every one", func(t *testing.T) {
		// A download link minted on one replica opens on another.
		dr, err := r1.Clientset.VeleroV1().DownloadRequests(ns).Create(ctx, &velerov1.DownloadRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "log-"},
			Spec: velerov1.DownloadRequestSpec{Target: velerov1.DownloadTarget{Kind: velerov1.DownloadTargetKindBackupLog, Name: "order-0"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			b, err := r1.Clientset.VeleroV1().Backups(ns).Get(ctx, "order-0", metav1.GetOptions{})
			if err != nil || !b.Status.Phase.Terminal() {
				return false, nil
			}
			dr, err = r1.Clientset.VeleroV1().DownloadRequests(ns).Get(ctx, dr.Name, metav1.GetOptions{})
			return err == nil && dr.Status.DownloadURL != "", nil
		}); err != nil {
			t.Fatalf("the download request: %v", err)
		}
		for i, r := range c.replicas {
			link, err := url.Parse(dr.Status.DownloadURL)
			if err != nil {
				t.Fatal(err)
			}
			link.Host = strings.TrimPrefix(r.URL(), "https://")
			// The replicas share the CA; the test trusts the link's host name.
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			resp, err := client.Get(link.String())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the log's download link on replica %d: %d, want 200", i+1, resp.StatusCode)
			}
		}
	})

	step("the leader killed under load, trial after trial", func(t *testing.T) {
		// Load: creates through every replica, lists and watches, while the
		// leader goes; every acknowledged backup must be there and end once.
		var load context.Context
		load, stopLoad = context.WithCancel(ctx)
		for i, r := range c.replicas {
			clients.Add(1)
			go func() {
				defer clients.Done()
				for n := 0; load.Err() == nil; n++ {
					name := fmt.Sprintf("load-%d-%d", i, n)
					_, err := r.Clientset.VeleroV1().Backups(ns).Create(load, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name},
						Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}}}, metav1.CreateOptions{})
					if err == nil {
						mu.Lock()
						acked[name] = true
						mu.Unlock()
					}
					_, _ = r.Clientset.VeleroV1().Backups(ns).List(load, metav1.ListOptions{Limit: 50})
					select {
					case <-load.Done():
					case <-time.After(300 * time.Millisecond):
					}
				}
			}()
		}

		// kill -9 of the leader, trial after trial.
		_, term = c.leaderIndex(ctx, r1, leader.Term{})
		for trial := range *trials {
			idx, _ := c.leaderIndex(ctx, r1, leader.Term{})
			old := c.replicas[idx]
			via := c.replicas[(idx+1)%len(c.replicas)]
			killed := time.Now()
			old.Kill()
			next, newTerm := c.leaderIndex(ctx, via, term)
			takeovers = append(takeovers, time.Since(killed))
			if next == idx {
				t.Errorf("trial %d: the killed replica holds the Lease", trial)
			}
			// A write of the ended term is refused by every live replica.
			stale := leader.WithTerm(via.Config, term)
			kube, err := kubernetes.NewForConfig(stale)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kube.CoordinationV1().Leases(ns).Create(ctx, leaseNamed(fmt.Sprintf("stale-%d", trial)), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("trial %d: a write of the ended term %s: %v, want 403", trial, term, err)
			}
			term = newTerm
			old.StartAgain(nil)
		}
	})

	step("a backup running on the leader when it dies fails with the reason", func(t *testing.T) {
		// A backup running on the leader when it dies: the replicas that may
		// take over next are armed to crash (kill -9, by the failpoint) once a
		// backup of theirs is InProgress, and the leader is killed. The one
		// that takes over dies with a backup running; the next leader fails
		// that backup with the reason, and does not run it again.
		idx, _ := c.leaderIndex(ctx, r1, leader.Term{})
		var armed []*framework.Server
		for j, r := range c.replicas {
			if j != idx {
				r.Kill()
				r.StartAgain([]string{failpoint.EnvVar + "=" + failpoint.BackupInProgress})
				armed = append(armed, r)
			}
		}
		c.replicas[idx].Kill()
		crashed := c.waitCrash(ctx, armed)
		c.replicas[idx].StartAgain(nil)
		crashed.StartAgain(nil)
		for _, r := range armed {
			if r != crashed {
				// Crashed as well, or still armed: started again unarmed.
				r.Kill()
				r.StartAgain(nil)
			}
		}
		_, term = c.leaderIndex(ctx, r1, leader.Term{})
	})

	step("one etcd member killed: the service goes on", func(t *testing.T) {
		// One etcd member killed: the service goes on. When the member was
		// etcd's leader, the others elect another first: a create that times
		// out meanwhile was not acknowledged and is sent again (one that did
		// land answers AlreadyExists).
		c.etcd.Kill(2)
		for i := range 3 {
			name := fmt.Sprintf("after-member-%d", i)
			var last error
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				_, last = c.replicas[i%len(c.replicas)].Clientset.VeleroV1().Backups(ns).Create(ctx, &velerov1.Backup{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: velerov1.BackupSpec{IncludedNamespaces: []string{ns}}}, metav1.CreateOptions{})
				return last == nil || apierrors.IsAlreadyExists(last), nil
			}); err != nil {
				t.Errorf("a create with an etcd member down: %v (last: %v)", err, last)
				continue
			}
			mu.Lock()
			acked[name] = true
			mu.Unlock()
		}
		stopLoad()
		clients.Wait()
	})

	step("every acknowledged backup is there and ends once", func(t *testing.T) {
		// Every acknowledged backup is there, and ends, having run at most
		// once; the ones running on a leader that died end Failed with the
		// reason.
		var running []string // acknowledged backups not ended, at the last look
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := r1.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			have := map[string]velerov1.BackupStatus{}
			for _, b := range list.Items {
				have[b.Name] = b.Status
			}
			mu.Lock()
			defer mu.Unlock()
			lost, interrupted, running = 0, 0, nil
			for name := range acked {
				st, ok := have[name]
				if !ok {
					lost++
					continue
				}
				if !st.Phase.Terminal() {
					running = append(running, fmt.Sprintf("%s (%s, queue position %d)", name, st.Phase, st.QueuePosition))
					continue
				}
				if st.Phase == velerov1.BackupPhaseFailed && (st.FailureReason == velerov1.BackupRestartedReason || st.FailureReason == velerov1.BackupInterruptedReason) {
					interrupted++
				}
			}
			return len(running) == 0, nil
		}); err != nil {
			sort.Strings(running)
			t.Errorf("acknowledged backups not all finished: %v; %d of %d not ended: %s", err, len(running), len(acked), strings.Join(running[:min(len(running), 10)], ", "))
			if len(running) > 0 {
				c.logLines(strings.Fields(running[0])[0])
			}
		}
		if lost > 0 {
			t.Errorf("%d acknowledged backups lost", lost)
		}
		if interrupted == 0 {
			t.Errorf("no backup Failed with %q or %q, though a replica crashed with one InProgress", velerov1.BackupRestartedReason, velerov1.BackupInterruptedReason)
		}
	})

	step("a schedule through a failover and a pause fires once per due time", func(t *testing.T) {
		// Schedules through a failover and a pause: a schedule due every 3 s
		// (now that the load's backups are done, its runs are not queued
		// behind them), the leader killed, then paused past its Lease (SIGSTOP)
		// and woken (SIGCONT): no due time gets two backups.
		if _, err := r1.Clientset.VeleroV1().Schedules(ns).Create(ctx, &velerov1.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "every3s"},
			Spec: velerov1.ScheduleSpec{Schedule: "@every 3s", Template: velerov1.BackupSpec{IncludedNamespaces: []string{ns}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		runs := func(n int) []velerov1.Backup {
			t.Helper()
			var list *velerov1.BackupList
			if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				var err error
				list, err = r1.Clientset.VeleroV1().Backups(ns).List(ctx, metav1.ListOptions{LabelSelector: velerov1.ScheduleNameLabel + "=every3s"})
				return err == nil && len(list.Items) >= n, nil
			}); err != nil {
				t.Fatalf("the schedule made fewer than %d backups: %v", n, err)
			}
			return list.Items
		}
		runs(2)
		idx, leaderTerm := c.leaderIndex(ctx, r1, leader.Term{})
		term = leaderTerm
		c.replicas[idx].Kill()
		_, term = c.leaderIndex(ctx, c.replicas[(idx+1)%len(c.replicas)], term)
		c.replicas[idx].StartAgain(nil)
		runs(len(runs(0)) + 2)

		// SIGSTOP of the leader past its Lease, then SIGCONT: another takes
		// over meanwhile, and the woken one's engines stop; what they would
		// write on waking carries the ended term, which the fence refuses.
		idx, _ = c.leaderIndex(ctx, r1, leader.Term{})
		paused := c.replicas[idx]
		via := c.replicas[(idx+1)%len(c.replicas)]
		if err := paused.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		next, _ := c.leaderIndex(ctx, via, term)
		if next == idx {
			t.Errorf("the paused replica still holds the Lease")
		}
		if err := paused.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			v, err := leading(ctx, paused)
			return err == nil && v == "0", nil
		}); err != nil {
			t.Errorf("the woken replica still runs its engines: %v", err)
		}
		runs(len(runs(0)) + 2)

		// The schedule paused: its backups end; each began after the one
		// before had ended, and one due time (3 s) at least after it.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := r1.Clientset.VeleroV1().Schedules(ns).Get(ctx, "every3s", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Paused = true
			_, err = r1.Clientset.VeleroV1().Schedules(ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			scheduled = runs(0)
			for _, b := range scheduled {
				if !b.Status.Phase.Terminal() {
					return false, nil
				}
			}
			return true, nil
		}); err != nil {
			t.Fatalf("the schedule's backups do not end: %v", err)
		}
		sort.Slice(scheduled, func(i, j int) bool { return scheduled[i].CreationTimestamp.Before(&scheduled[j].CreationTimestamp) })
		// Timestamps are whole seconds: two runs of one due time are
		// stamped in the same second or began before the other ended; a run
		// one due time (3 s) after the last is stamped a second after it at
		// least, even when its trigger took long.
		for i := 1; i < len(scheduled); i++ {
			prev, cur := scheduled[i-1], scheduled[i]
			if gap := cur.CreationTimestamp.Sub(prev.CreationTimestamp.Time); gap < time.Second ||
				prev.Status.CompletionTimestamp == nil || cur.CreationTimestamp.Before(prev.Status.CompletionTimestamp) {
				fired++
				t.Errorf("schedule fired twice: backup %s (created %v) after %s (created %v, completed %v)", cur.Name, cur.CreationTimestamp,
					prev.Name, prev.CreationTimestamp, prev.Status.CompletionTimestamp)
			}
		}
	})

	step("no backup ran twice", func(t *testing.T) {
		starts := c.starts()
		for name, n := range starts {
			if n > 1 {
				doubles++
				t.Errorf("backup %s started %d times", name, n)
			}
		}
		if len(starts) == 0 {
			t.Errorf("no backup started in any replica's log: the count of runs sees nothing")
		}
	})
	t.Logf("another replica took over after kill -9 of the leader in %v (Lease %s); backups interrupted by a crash that ended Failed with the reason: %d; the schedule ran %d times through a kill -9 and a pause",
		takeovers, leaseDuration, interrupted, len(scheduled))
	fmt.Printf("trials %d, writes acked %d, lost %d, double runs %d, schedule double fires %d\n", *trials, len(acked), lost, doubles, fired)
}

// logLines reports the lines of every replica's server log (kept across
// restarts) that name the backup, and which replica holds the engines'
// Lease: what a backup that does not end went through.
func (c *cluster) logLines(backup string) {
	c.t.Helper()
	for i, r := range c.replicas {
		data, err := os.ReadFile(filepath.Join(r.DataDir, "server.log"))
		if err != nil {
			c.t.Errorf("replica %d's log: %v", i+1, err)
			continue
		}
		var lines []string
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"`+ns+"/"+backup+`"`) || strings.Contains(line, "The engines") {
				lines = append(lines, line)
			}
		}
		c.t.Logf("replica %d's log lines of backup %s and of its engines:\n%s", i+1, backup, strings.Join(lines, "\n"))
	}
}

// waitCrash waits until one of servers exits by itself (its failpoint).
func (c *cluster) waitCrash(ctx context.Context, servers []*framework.Server) *framework.Server {
	c.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		for _, s := range servers {
			if s.WaitCrash(100 * time.Millisecond) {
				return s
			}
		}
	}
	c.t.Fatalf("no replica armed to crash with a backup InProgress took over and crashed")
	return nil
}

func leaseNamed(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// leading is the replica's backstop_engines_leader metric.
func leading(ctx context.Context, r *framework.Server) (string, error) {
	body, err := r.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "backstop_engines_leader "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no backstop_engines_leader in /metrics")
}

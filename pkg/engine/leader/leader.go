// Package leader runs the engines on one replica at a time. It owns the
// election (client-go's leaderelection on a coordination.k8s.io/v1 Lease),
// the term of a leadership (the Lease's holder and its transition count
// when this replica took it), which the engines' writes carry in a header,
// the fence that refuses a write whose term is no longer the Lease's (a
// leader paused past its lease that wakes up), and the election's metrics.
package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// TermHeader carries an engine request's term.
const TermHeader = "X-Backstop-Engine-Term"

// LeaseHeader names the Lease of an engine request's term; without it the
// term is the engines' Lease's.
const LeaseHeader = "X-Backstop-Engine-Lease"

// Term is one leadership: the Lease's holder and its transition count
// while this replica held it. A replica that loses the Lease and takes it
// again has a new term (the count moved). Lease names the Lease ("" when
// it is the engines' Lease or is implied).
type Term struct {
	Lease       string
	Holder      string
	Transitions int32
}

// Same reports whether t and o are one term of the Lease, whatever their
// Lease field says.
func (t Term) Same(o Term) bool { return t.Holder == o.Holder && t.Transitions == o.Transitions }

// hostLeaseInfix joins the engines' Lease name and a VM host's name into
// the name of the host's Lease.
const hostLeaseInfix = "-vm-"

// HostLease is the name of the Lease of a VM host's engines: the replicas
// on one libvirt host elect one among them to run the VM engines there.
func HostLease(engines, host string) string { return engines + hostLeaseInfix + host }

// HostOfLease is the VM host whose Lease is name, if it is one.
func HostOfLease(engines, name string) (string, bool) {
	host, ok := strings.CutPrefix(name, engines+hostLeaseInfix)
	return host, ok && host != ""
}

func (t Term) String() string { return t.Holder + "/" + strconv.Itoa(int(t.Transitions)) }

// ParseTerm reads a term written by Term.String.
func ParseTerm(s string) (Term, error) {
	i := strings.LastIndex(s, "/")
	if i <= 0 {
		return Term{}, fmt.Errorf("engine term %q: want <holder>/<transitions>", s)
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return Term{}, fmt.Errorf("engine term %q: %w", s, err)
	}
	return Term{Holder: s[:i], Transitions: int32(n)}, nil
}

// WithTerm returns a copy of cfg whose requests carry term.
func WithTerm(cfg *restclient.Config, term Term) *restclient.Config {
	cfg = restclient.CopyConfig(cfg)
	value := term.String()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			req.Header.Set(TermHeader, value)
			if term.Lease != "" {
				req.Header.Set(LeaseHeader, term.Lease)
			}
			return rt.RoundTrip(req)
		})
	})
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Config is an election.
type Config struct {
	// Leases reach the Lease: this server's own (standalone) or the host
	// cluster's (aggregated).
	Leases    coordinationv1client.LeasesGetter
	Namespace string
	Name      string
	// Identity names this replica (unique among replicas).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's: a
	// leader that cannot renew within RenewDeadline stops, before the
	// Lease (LeaseDuration) lets another take it.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Run runs the engines for one term, until ctx is done, and returns
	// once they stopped.
	Run func(ctx context.Context, term Term)
	// Metrics, if set, are updated.
	Metrics *Metrics
}

// Run takes part in elections until ctx is done: each time this replica
// takes the Lease it runs cfg.Run for the term, and it stands again once
// the engines stopped. The Lease is given up only once they stopped, on
// the way out: never while they may still write.
func Run(ctx context.Context, cfg Config) error {
	lock := &observingLock{LeaseLock: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	logger := klog.FromContext(ctx).WithValues("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	for ctx.Err() == nil {
		t := &termState{}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			// Not released by the elector: it would give the Lease up as
			// soon as renewing failed, while the engines still drain.
			Lock: lock, Name: cfg.Name, ReleaseOnCancel: false,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					done, ok := t.start()
					if !ok {
						return // the elector returned first: no term
					}
					defer close(done)
					record, _, err := lock.Get(ctx)
					if err != nil || record.HolderIdentity != cfg.Identity {
						logger.Error(err, "Reading the Lease just taken; standing again")
						return
					}
					term := Term{Lease: cfg.Name, Holder: cfg.Identity, Transitions: int32(record.LeaderTransitions)}
					if cfg.Metrics != nil {
						cfg.Metrics.started(lock.previousRenewal(), record.AcquireTime.Time)
					}
					logger.Info("Leading: the engines run", "term", term.String())
					cfg.Run(ctx, term)
					if cfg.Metrics != nil {
						cfg.Metrics.leader.Set(0)
					}
					logger.Info("The engines stopped", "term", term.String())
				},
				// The gauge drops once the engines stopped (above).
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx)
		// The elector returns when renewing failed or ctx is done; the
		// engines' context is cancelled then, and they must be gone before
		// this replica stands again or gives the Lease up.
		t.wait()
	}
	release(lock, cfg)
	return nil
}

// termState is one election's term: started at most once, and waited for
// once the elector returned.
type termState struct {
	mu       sync.Mutex
	finished bool
	done     chan struct{}
}

// start begins the term, unless the election has already ended.
func (t *termState) start() (chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return nil, false
	}
	t.done = make(chan struct{})
	return t.done, true
}

// wait ends the election and waits for its term, if one started.
func (t *termState) wait() {
	t.mu.Lock()
	t.finished = true
	done := t.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// release gives the Lease up if this replica still holds it (the server
// stops, its engines already stopped), as client-go's elector does, so that
// another replica takes over at once.
func release(lock *observingLock, cfg Config) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.RetryPeriod)
	defer cancel()
	record, _, err := lock.Get(ctx)
	if err != nil || record.HolderIdentity != cfg.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: record.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	}); err != nil {
		klog.ErrorS(err, "Giving the engines' Lease up", "lease", cfg.Namespace+"/"+cfg.Name)
	}
}

// observingLock remembers the last renewal of another holder it read, for
// the time a takeover took.
type observingLock struct {
	*resourcelock.LeaseLock
	mu    sync.Mutex
	other time.Time
}

func (l *observingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	record, raw, err := l.LeaseLock.Get(ctx)
	if err == nil && record.HolderIdentity != "" && record.HolderIdentity != l.Identity() {
		l.mu.Lock()
		l.other = record.RenewTime.Time
		l.mu.Unlock()
	}
	return record, raw, err
}

func (l *observingLock) previousRenewal() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.other
}

// LiveHosts lists the VM hosts whose Lease (of the engines' Lease named
// engines, in namespace) is held and not expired.
func LiveHosts(leases coordinationv1client.LeasesGetter, namespace, engines string) func(ctx context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		list, err := leases.Leases(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var out []string
		for _, l := range list.Items {
			host, ok := HostOfLease(engines, l.Name)
			spec := l.Spec
			if !ok || spec.HolderIdentity == nil || *spec.HolderIdentity == "" || spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
				continue
			}
			if now.Before(spec.RenewTime.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second)) {
				out = append(out, host)
			}
		}
		return out, nil
	}
}

// Current reads the term of the Lease of that name (a read from storage,
// not a cache).
type Current func(ctx context.Context, name string) (Term, error)

// LeaseTerm reads the term of a Lease of namespace through leases.
func LeaseTerm(leases coordinationv1client.LeasesGetter, namespace string) Current {
	return func(ctx context.Context, name string) (Term, error) {
		lease, err := leases.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return Term{}, err
		}
		return TermOf(lease.Spec.HolderIdentity, lease.Spec.LeaseTransitions), nil
	}
}

// TermOf is the term a Lease's spec names (its holder and transitions,
// either unset).
func TermOf(holder *string, transitions *int32) Term {
	var t Term
	if holder != nil {
		t.Holder = *holder
	}
	if transitions != nil {
		t.Transitions = *transitions
	}
	return t
}

// errUnknownTerm: the Lease could not be read.
var errUnknownTerm = errors.New("the current term is unknown")

// Fence refuses the writes of engines whose term has ended: a request
// carrying TermHeader that would change something is served only while
// the current term of its Lease (LeaseHeader: the engines' Lease or a VM
// host's, of the same name with a suffix) is the one it carries. Requests
// without the header pass (clients, and engines run without an election).
type Fence struct {
	mu      sync.Mutex
	current Current
	// engines is the name of the engines' Lease.
	engines string
}

// SetCurrent says where the terms of the Leases are read, engines being
// the name of the engines' Lease (nil: nothing is fenced).
func (f *Fence) SetCurrent(engines string, c Current) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.engines, f.current = engines, c
}

// Filter is the fence as an HTTP filter.
func (f *Fence) Filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		value := req.Header.Get(TermHeader)
		if value == "" || req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions {
			next.ServeHTTP(w, req)
			return
		}
		if err := f.check(req.Context(), req.Header.Get(LeaseHeader), value); err != nil {
			code, reason := http.StatusForbidden, metav1.StatusReasonForbidden
			if errors.Is(err, errUnknownTerm) {
				// The Lease could not be read: the write may be tried again.
				code, reason = http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable
			}
			status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Code: int32(code), Reason: reason, Message: err.Error()}
			body, _ := json.Marshal(status)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = w.Write(body)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// check says why a write of term value of the Lease named lease may not
// land, or nil.
func (f *Fence) check(ctx context.Context, lease, value string) error {
	f.mu.Lock()
	current, engines := f.current, f.engines
	f.mu.Unlock()
	if current == nil {
		return nil
	}
	if lease == "" {
		lease = engines
	}
	if _, host := HostOfLease(engines, lease); lease != engines && !host {
		return fmt.Errorf("the engines' write names Lease %q, which is neither %q nor a VM host's (%q)", lease, engines, HostLease(engines, "<host>"))
	}
	term, err := ParseTerm(value)
	if err != nil {
		return err
	}
	now, err := current(ctx, lease)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the engines' term %s has ended: the Lease %s is gone", term, lease)
	}
	if err != nil {
		return fmt.Errorf("the engines' write of term %s: reading the Lease %s: %w: %w", term, lease, errUnknownTerm, err)
	}
	if !now.Same(term) {
		return fmt.Errorf("the engines' term %s has ended: the Lease %s is in term %s", term, lease, now)
	}
	return nil
}

// Metrics are the election's.
type Metrics struct {
	leader      *metrics.Gauge
	transitions *metrics.Counter
	takeover    *metrics.Histogram
}

// NewMetrics registers the election's metrics.
func NewMetrics(register func(...metrics.Registerable)) *Metrics {
	m := &Metrics{
		leader: metrics.NewGauge(&metrics.GaugeOpts{Namespace: "backstop", Subsystem: "engines", Name: "leader",
			Help: "1 while this replica holds the engines' Lease and runs the engines", StabilityLevel: metrics.ALPHA}),
		transitions: metrics.NewCounter(&metrics.CounterOpts{Namespace: "backstop", Subsystem: "engines", Name: "leadership_acquired_total",
			Help: "Times this replica took the engines' Lease", StabilityLevel: metrics.ALPHA}),
		takeover: metrics.NewHistogram(&metrics.HistogramOpts{Namespace: "backstop", Subsystem: "engines", Name: "takeover_seconds",
			Help:    "From the last renewal of the previous holder this replica saw to its own taking of the Lease",
			Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 120}, StabilityLevel: metrics.ALPHA}),
	}
	register(m.leader, m.transitions, m.takeover)
	return m
}

func (m *Metrics) started(previousRenewal, acquired time.Time) {
	m.leader.Set(1)
	m.transitions.Inc()
	if !previousRenewal.IsZero() && acquired.After(previousRenewal) {
		m.takeover.Observe(acquired.Sub(previousRenewal).Seconds())
	}
}

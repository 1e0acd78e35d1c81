// Package virt owns Backstop's calls to libvirt (libvirt.org/go/libvirt,
// built with the libvirt_dlopen tag: libvirt.so is loaded when a
// connection is opened, so the server builds and starts on a machine
// without libvirt, where Open returns ErrUnavailable).
//
// It runs push-mode disk backups of a domain with QEMU dirty bitmaps
// (libvirt checkpoints): a full backup, or an incremental one since a
// checkpoint, into qcow2 targets it creates beforehand so that each
// incremental names the previous backup as its backing file (the chain
// describes itself; VIR_DOMAIN_BACKUP_BEGIN_REUSE_EXTERNAL). Completion is
// the job-completed event, with job statistics polled as a fallback and
// for progress; a backup is reported done only once QEMU has closed its
// targets. An aborted or failed backup leaves neither targets nor the
// checkpoint it created. Checkpoints can be read (without the domain, so
// they can be redefined on a new definition of the domain), redefined
// (validated: an inconsistent bitmap is ErrCheckpointInconsistent, the
// signal to fall back to a full backup) and deleted.
//
// libvirt's event loop is process-wide: the first Open starts it and it
// runs until the process ends. A connection survives the daemon: when
// libvirtd goes away (restart, crash) it connects again with backoff,
// registers its event callbacks anew and tells OnReconnect listeners, so
// that engines look at every VM again; calls made meanwhile fail with
// ErrUnavailable.
package virt

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"libvirt.org/go/libvirt"
)

// ErrUnavailable: libvirt cannot be loaded or reached.
var ErrUnavailable = errors.New("libvirt unavailable")

// ErrDomainNotFound: libvirt has no domain of that name.
var ErrDomainNotFound = errors.New("domain not found")

// ErrCheckpointInconsistent: a checkpoint's bitmap is missing or
// inconsistent (QEMU was killed, the disk was changed behind libvirt).
var ErrCheckpointInconsistent = errors.New("checkpoint inconsistent")

var (
	eventLoopOnce sync.Once
	eventLoopErr  error
)

// startEventLoop registers and runs libvirt's default event loop, once per
// process (libvirt requires it before connections that receive events).
func startEventLoop() error {
	eventLoopOnce.Do(func() {
		if err := libvirt.EventRegisterDefaultImpl(); err != nil {
			eventLoopErr = fmt.Errorf("%w: %v", ErrUnavailable, err)
			return
		}
		go func() {
			backoff := wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 1 << 30}
			for {
				if err := libvirt.EventRunDefaultImpl(); err != nil {
					// Only a broken event loop returns errors: keep
					// serving, without spinning.
					klog.Background().Error(err, "libvirt event loop")
					time.Sleep(backoff.Step())
					continue
				}
				backoff.Duration = 10 * time.Millisecond
			}
		}()
	})
	return eventLoopErr
}

// Conn is a connection to a libvirt daemon, connected again whenever the
// daemon goes away.
type Conn struct {
	uri string

	mu sync.Mutex
	// conn is the current connection; nil while connecting again.
	conn   *libvirt.Connect
	closed bool
	// reconnected are told when a new connection replaced a lost one.
	reconnected map[int]func()
	// waiters receive the job-completed and stop events of a domain (by
	// name) while a backup of it runs.
	waiters map[string]*jobWaiter
	// lifecycle are told the name of every domain with a lifecycle event.
	lifecycle map[int]func(domain string)
	nextID    int
	cbIDs     []int
}

// jobWaiter receives what ends a backup job.
type jobWaiter struct {
	completed chan libvirt.DomainJobInfo
	// stopped is closed when the domain stops (shut down, destroyed,
	// crashed).
	stopped  chan struct{}
	stopOnce sync.Once
}

// Open connects to uri (e.g. qemu:///system).
func Open(uri string) (*Conn, error) {
	if err := startEventLoop(); err != nil {
		return nil, err
	}
	c := &Conn{uri: uri, waiters: map[string]*jobWaiter{}, lifecycle: map[int]func(string){}, reconnected: map[int]func(){}}
	conn, ids, err := c.connect()
	if err != nil {
		return nil, err
	}
	c.conn, c.cbIDs = conn, ids
	return c, nil
}

// connect opens a connection and registers the event callbacks and the
// close callback on it.
func (c *Conn) connect() (*libvirt.Connect, []int, error) {
	uri := c.uri
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: connecting to %s: %v", ErrUnavailable, uri, err)
	}
	var cbIDs []int
	fail := func(err error) (*libvirt.Connect, []int, error) {
		for _, id := range cbIDs {
			_ = conn.DomainEventDeregister(id)
		}
		_, _ = conn.Close()
		return nil, nil, err
	}
	// Keepalive: a daemon that stops answering is noticed, not only one
	// whose socket closes.
	if err := conn.SetKeepAlive(5, 3); err != nil {
		return fail(fmt.Errorf("keepalive on %s: %w", uri, err))
	}
	waiterOf := func(d *libvirt.Domain) *jobWaiter {
		name, err := d.GetName()
		if err != nil {
			return nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waiters[name]
	}
	id, err := conn.DomainEventJobCompletedRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventJobCompleted) {
		if w := waiterOf(d); w != nil {
			select {
			case w.completed <- ev.Info:
			default:
			}
		}
	})
	if err != nil {
		return fail(fmt.Errorf("registering for job-completed events on %s: %w", uri, err))
	}
	cbIDs = append(cbIDs, id)
	id, err = conn.DomainEventLifecycleRegister(nil, func(_ *libvirt.Connect, d *libvirt.Domain, ev *libvirt.DomainEventLifecycle) {
		if name, err := d.GetName(); err == nil {
			c.mu.Lock()
			fns := make([]func(string), 0, len(c.lifecycle))
			for _, fn := range c.lifecycle {
				fns = append(fns, fn)
			}
			c.mu.Unlock()
			for _, fn := range fns {
				fn(name)
			}
		}
		if ev.Event != libvirt.DOMAIN_EVENT_STOPPED && ev.Event != libvirt.DOMAIN_EVENT_CRASHED {
			return
		}
		if w := waiterOf(d); w != nil {
			w.stopOnce.Do(func() { close(w.stopped) })
		}
	})
	if err != nil {
		return fail(fmt.Errorf("registering for lifecycle events on %s: %w", uri, err))
	}
	cbIDs = append(cbIDs, id)
	if err := conn.RegisterCloseCallback(func(_ *libvirt.Connect, reason libvirt.ConnectCloseReason) {
		go c.reconnect(conn, reason)
	}); err != nil {
		return fail(fmt.Errorf("registering for the close of %s: %w", uri, err))
	}
	return conn, cbIDs, nil
}

// reconnect replaces the lost connection, trying again with backoff until
// it succeeds or the Conn is closed, then tells the OnReconnect listeners.
func (c *Conn) reconnect(lost *libvirt.Connect, reason libvirt.ConnectCloseReason) {
	c.mu.Lock()
	if c.closed || c.conn != lost {
		c.mu.Unlock()
		return
	}
	c.conn, c.cbIDs = nil, nil
	c.mu.Unlock()
	_ = lost.UnregisterCloseCallback()
	_, _ = lost.Close()
	logger := klog.Background().WithValues("uri", c.uri)
	logger.Info("Lost the libvirt connection: connecting again", "reason", int(reason))
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 10 * time.Second, Steps: 1 << 30}
	for {
		conn, ids, err := c.connect()
		if err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				_, _ = conn.Close()
				return
			}
			c.conn, c.cbIDs = conn, ids
			listeners := make([]func(), 0, len(c.reconnected))
			for _, fn := range c.reconnected {
				listeners = append(listeners, fn)
			}
			c.mu.Unlock()
			logger.Info("Connected to libvirt again")
			for _, fn := range listeners {
				fn()
			}
			return
		}
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		logger.V(2).Info("Connecting to libvirt again", "err", err)
		time.Sleep(backoff.Step())
	}
}

// OnReconnect calls fn each time a new connection has replaced a lost one
// (events of the meantime were missed: look again). The returned function
// stops the calls.
func (c *Conn) OnReconnect(fn func()) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextID
	c.nextID++
	c.reconnected[id] = fn
	return func() {
		c.mu.Lock()
		delete(c.reconnected, id)
		c.mu.Unlock()
	}
}

// lv returns the current connection, or ErrUnavailable while connecting
// again.
func (c *Conn) lv() (*libvirt.Connect, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, fmt.Errorf("%w: connecting to %s again", ErrUnavailable, c.uri)
	}
	return c.conn, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.conn == nil {
		return nil
	}
	for _, id := range c.cbIDs {
		_ = c.conn.DomainEventDeregister(id)
	}
	_ = c.conn.UnregisterCloseCallback()
	_, err := c.conn.Close()
	c.conn = nil
	return err
}

// Versions returns the libvirt library and hypervisor (QEMU) versions,
// as "major.minor.release".
func (c *Conn) Versions() (libvirtVersion, qemuVersion string, err error) {
	conn, err := c.lv()
	if err != nil {
		return "", "", err
	}
	lv, err := conn.GetLibVersion()
	if err != nil {
		return "", "", fmt.Errorf("libvirt version: %w", err)
	}
	hv, err := conn.GetVersion()
	if err != nil {
		return "", "", fmt.Errorf("hypervisor version: %w", err)
	}
	v := func(n uint32) string { return fmt.Sprintf("%d.%d.%d", n/1000000, n/1000%1000, n%1000) }
	return v(lv), v(hv), nil
}

// OnLifecycle calls fn with the domain's name on each lifecycle event
// (defined, started, stopped, ...) of any domain, on libvirt's event loop:
// fn must not block. The returned function stops the calls.
func (c *Conn) OnLifecycle(fn func(domain string)) (stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextID
	c.nextID++
	c.lifecycle[id] = fn
	return func() {
		c.mu.Lock()
		delete(c.lifecycle, id)
		c.mu.Unlock()
	}
}

// domain looks a domain up by name; the caller frees it. A missing domain
// is ErrDomainNotFound.
func (c *Conn) domain(name string) (*libvirt.Domain, error) {
	conn, err := c.lv()
	if err != nil {
		return nil, err
	}
	d, err := conn.LookupDomainByName(name)
	if isError(err, libvirt.ERR_NO_DOMAIN) {
		return nil, fmt.Errorf("domain %s: %w", name, ErrDomainNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("domain %s: %w", name, err)
	}
	return d, nil
}

// waiter registers for the events that end a backup job of a domain; one
// backup per domain runs at a time.
func (c *Conn) waiter(domain string) (*jobWaiter, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.waiters[domain]; busy {
		return nil, nil, fmt.Errorf("domain %s already has a backup running", domain)
	}
	w := &jobWaiter{completed: make(chan libvirt.DomainJobInfo, 1), stopped: make(chan struct{})}
	c.waiters[domain] = w
	return w, func() {
		c.mu.Lock()
		delete(c.waiters, domain)
		c.mu.Unlock()
	}, nil
}

// isError reports whether err is a libvirt error with that number.
func isError(err error, code libvirt.ErrorNumber) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == code
}

// DomainNames lists the names of the defined and running domains.
func (c *Conn) DomainNames() ([]string, error) {
	conn, err := c.lv()
	if err != nil {
		return nil, err
	}
	doms, err := conn.ListAllDomains(0)
	if err != nil {
		return nil, fmt.Errorf("listing domains on %s: %w", c.uri, err)
	}
	names := make([]string, 0, len(doms))
	for i := range doms {
		name, err := doms[i].GetName()
		_ = doms[i].Free()
		if err == nil {
			names = append(names, name)
		}
	}
	return names, nil
}

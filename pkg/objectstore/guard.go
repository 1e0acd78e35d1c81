package objectstore

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// EndpointGuard keeps the connections of a tenant's storage location
// (its s3Url is the tenant's to choose) away from what only the server may
// reach: loopback, link-local addresses (169.254.0.0/16, fe80::/10: cloud
// metadata services), unspecified and multicast addresses, every address of
// the server's own host, and the networks the admin denies (the cluster's
// service network). It decides on the address a connection is about to be
// made to, after name resolution (a dialer's Control), so a name that
// resolves to one of them, now or on the next lookup, is refused as well.
// The admin's policy may allow hosts all the same: by the URL's host name,
// or by address or CIDR.
type EndpointGuard struct {
	// Allowed are host names, addresses and CIDRs a tenant's location may
	// reach although they are in a refused range.
	Allowed []string
	// Denied are further networks refused.
	Denied []netip.Prefix
	// ownAddresses lists the host's addresses (nil: net.InterfaceAddrs).
	ownAddresses func() ([]netip.Addr, error)
}

// ErrEndpointRefused is the error of a connection the guard refuses.
var ErrEndpointRefused = fmt.Errorf("refused for a tenant's storage location")

// allowsHost reports whether the admin allows host (a name or an address)
// by name.
func (g EndpointGuard) allowsHost(host string) bool {
	for _, a := range g.Allowed {
		if strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(host, ".")) {
			return true
		}
	}
	return false
}

// allowsAddr reports whether the admin allows addr by address or CIDR.
func (g EndpointGuard) allowsAddr(addr netip.Addr) bool {
	for _, a := range g.Allowed {
		if p, err := netip.ParsePrefix(a); err == nil && p.Contains(addr) {
			return true
		}
		if ip, err := netip.ParseAddr(a); err == nil && ip.Unmap() == addr {
			return true
		}
	}
	return false
}

// Check says why a connection to addr is refused, nil when it is not.
func (g EndpointGuard) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if g.allowsAddr(addr) {
		return nil
	}
	refuse := func(why string) error { return fmt.Errorf("%s: %w (%s)", addr, ErrEndpointRefused, why) }
	switch {
	case addr.IsLoopback():
		return refuse("loopback")
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return refuse("link-local")
	case addr.IsUnspecified():
		return refuse("unspecified")
	case addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return refuse("multicast")
	}
	for _, p := range g.Denied {
		if p.Contains(addr) {
			return refuse("in " + p.String() + ", denied by the server's configuration")
		}
	}
	own := g.ownAddresses
	if own == nil {
		own = interfaceAddrs
	}
	addrs, err := own()
	if err != nil {
		return refuse("the server's own addresses cannot be read: " + err.Error())
	}
	for _, a := range addrs {
		if a == addr {
			return refuse("an address of the server's own host")
		}
	}
	return nil
}

func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// DialContext dials for a location whose URL names host: through the
// guard unless the admin allows host by name.
func (g EndpointGuard) DialContext(host string) func(ctx context.Context, network, address string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !g.allowsHost(host) {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%s: %w (not an address)", address, ErrEndpointRefused)
			}
			return g.Check(ap.Addr())
		}
	}
	return d.DialContext
}

// Pin returns hostPort (host[:port] of an endpoint URL) for a client whose
// connections cannot go through DialContext (kopia's S3 client): its host
// resolved once here and checked as CheckHost checks it, so that the
// client dials that address and asks no resolver again (a name that
// resolves to an allowed address now and to a refused one at the client's
// own lookup, DNS rebinding, gets nowhere). Where keepName (verified TLS),
// the name is kept: only a server holding the name's certificate completes
// such a connection, which no address the guard refuses does for a name a
// tenant chose. A host the admin allows by name is kept as it is.
func (g EndpointGuard) Pin(ctx context.Context, hostPort string, keepName bool) (string, error) {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostPort, "["), "]"), ""
	}
	if err := g.CheckHost(ctx, host); err != nil {
		return "", err
	}
	if keepName || g.allowsHost(host) {
		return hostPort, nil
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return "", fmt.Errorf("%s: %w (it does not resolve: %v)", host, ErrEndpointRefused, err)
		}
		addr = addrs[0].Unmap()
		if err := g.Check(addr); err != nil {
			return "", fmt.Errorf("%s: %w", host, err)
		}
	}
	if port == "" {
		if addr.Is6() {
			return "[" + addr.String() + "]", nil
		}
		return addr.String(), nil
	}
	return net.JoinHostPort(addr.String(), port), nil
}

// CheckHost says why a connection to host (a name or an address, without
// its port) is refused, nil when it is not: the admin allows it by name,
// or every address it resolves to now passes Check. For clients whose
// connections cannot go through DialContext (kopia's S3 client); a name
// that resolves elsewhere later is not caught, which DialContext does.
func (g EndpointGuard) CheckHost(ctx context.Context, host string) error {
	if g.allowsHost(host) {
		return nil
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return g.Check(addr)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%s: %w (it does not resolve: %v)", host, ErrEndpointRefused, err)
	}
	for _, a := range addrs {
		if err := g.Check(a); err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
	}
	return nil
}

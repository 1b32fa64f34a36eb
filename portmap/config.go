package portmap

import (
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"time"
)

// Method is a port-mapping protocol.
type Method uint8

const (
	// NATPMP is the NAT Port Mapping Protocol (RFC 6886): one UDP exchange with the
	// default gateway on port 5351.
	NATPMP Method = iota + 1
	// UPnP is UPnP Internet Gateway Device control: SSDP discovery, an XML device
	// description over HTTP, then SOAP calls on a WANIPConnection (v1 or v2) or
	// WANPPPConnection service.
	UPnP
)

func (m Method) String() string {
	switch m {
	case NATPMP:
		return "nat-pmp"
	case UPnP:
		return "upnp"
	}
	return fmt.Sprintf("method(%d)", uint8(m))
}

// Defaults for the zero fields of Config.
const (
	DefaultNATPMPLease      = 7200 * time.Second // RFC 6886 section 3.3's recommendation
	DefaultUPnPLease        = time.Hour
	DefaultNATPMPPort       = 5351
	DefaultRequestTimeout   = 3 * time.Second
	DefaultDiscoveryTimeout = 2 * time.Second
	DefaultRetryBase        = 2 * time.Second
	DefaultRetryMax         = 5 * time.Minute
	DefaultMinRenew         = 30 * time.Second
	DefaultDescription      = "tendril"
)

// Config configures a Mapper. Only InternalPort is required; every zero field takes the
// default documented beside it. New copies the Config.
type Config struct {
	// InternalPort is the local port to map (1 to 65535): the port the node listens on.
	InternalPort int
	// Protocol is "tcp" (default) or "udp".
	Protocol string
	// Description names the mapping in the router's table (UPnP only): printable ASCII,
	// at most 64 bytes. Default "tendril".
	Description string
	// Lease is the lifetime asked for. Zero means 7200 s for NAT-PMP (RFC 6886's
	// recommendation) and 1 h for UPnP. The gateway may grant less; the mapping is
	// renewed at half of what it grants (see MinRenew).
	Lease time.Duration

	// Methods are tried in this order, the first that maps wins. Default NAT-PMP, then
	// UPnP: NAT-PMP is one UDP round trip to the default gateway, with no multicast, no
	// XML and no HTTP to whatever device answers; routers that run miniupnpd speak both.
	Methods []Method
	// Gateway is the router to ask. The zero value means discover it: the default
	// route's gateway for NAT-PMP (read from /proc/net/route on Linux; elsewhere Gateway
	// must be set for NAT-PMP), and for UPnP an SSDP search whose answers are accepted
	// only from this address when it is known, else only from directly connected subnets.
	Gateway netip.Addr
	// NATPMPPort is the gateway's NAT-PMP port. Default 5351.
	NATPMPPort int
	// UPnPRootURL skips SSDP and uses this device description URL ("http://IP:port/path",
	// an IP literal); the device must keep its control URLs on the same host.
	UPnPRootURL string

	// RequestTimeout bounds one exchange with the gateway: a NAT-PMP request with its
	// retransmissions (250 ms, then doubling: RFC 6886 section 3.1), or one HTTP request
	// and its whole body. Default 3 s.
	RequestTimeout time.Duration
	// DiscoveryTimeout is how long an SSDP search listens for answers. Default 2 s.
	DiscoveryTimeout time.Duration
	// RetryBase and RetryMax shape the backoff after failures: RetryBase after the first,
	// doubling up to RetryMax, with ±20% jitter. Defaults 2 s and 5 min.
	RetryBase, RetryMax time.Duration
	// MinRenew is the shortest wait between renewals, whatever lease the gateway grants,
	// so that a gateway granting 1-second leases cannot make us ask twice a second.
	// Default 30 s.
	MinRenew time.Duration

	// OnChange is called when the mapping is made, when its external address, port,
	// method or DoubleNAT flag changes, and with the zero Mapping when it is lost (its
	// lease ran out unrenewed) or removed by Close. Renewals that change nothing but the
	// expiry are not reported (Mapper.Current has the expiry). Calls are serialized, from
	// the Mapper's goroutine; OnChange must not call Close. Nil: no reports.
	OnChange func(Mapping)
	// Logger receives the Mapper's logs (nil: silent).
	Logger *slog.Logger
	// Clock schedules renewals and retries (nil: the real clock). Timeouts on the
	// network always use real time.
	Clock Clock
}

// Validate reports the first invalid field, wrapped with ErrInvalidConfig. Zero fields
// are valid: they mean the defaults.
func (c Config) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, why) }
	if c.InternalPort < 1 || c.InternalPort > 65535 {
		return bad("InternalPort", "must be 1 to 65535")
	}
	if c.Protocol != "" && c.Protocol != "tcp" && c.Protocol != "udp" {
		return bad("Protocol", `must be "tcp" or "udp"`)
	}
	if len(c.Description) > 64 {
		return bad("Description", "is longer than 64 bytes")
	}
	for _, r := range c.Description {
		if r < 0x20 || r > 0x7e {
			return bad("Description", "must be printable ASCII")
		}
	}
	if c.Lease < 0 || c.Lease > 0xffffffff*time.Second {
		return bad("Lease", "is out of range")
	}
	if c.Lease > 0 && c.Lease < time.Second {
		return bad("Lease", "is shorter than a second")
	}
	seen := map[Method]bool{}
	for _, m := range c.Methods {
		if m != NATPMP && m != UPnP {
			return bad("Methods", "holds an unknown method")
		}
		if seen[m] {
			return bad("Methods", "repeats a method")
		}
		seen[m] = true
	}
	if c.Gateway.IsValid() && !c.Gateway.Unmap().Is4() {
		return bad("Gateway", "must be an IPv4 address")
	}
	if c.NATPMPPort < 0 || c.NATPMPPort > 65535 {
		return bad("NATPMPPort", "must be 0 to 65535")
	}
	if c.UPnPRootURL != "" {
		if _, _, err := parseRootURL(c.UPnPRootURL); err != nil {
			return bad("UPnPRootURL", err.Error())
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RequestTimeout", c.RequestTimeout}, {"DiscoveryTimeout", c.DiscoveryTimeout}, {"RetryBase", c.RetryBase}, {"RetryMax", c.RetryMax}, {"MinRenew", c.MinRenew}} {
		if d.v < 0 {
			return bad(d.name, "is negative")
		}
	}
	if c.DiscoveryTimeout > 0 && c.DiscoveryTimeout < time.Second {
		return bad("DiscoveryTimeout", "is shorter than a second (SSDP's MX)")
	}
	return nil
}

// parseRootURL parses a device description URL, whose host must be an IP literal.
func parseRootURL(s string) (*url.URL, netip.Addr, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, netip.Addr{}, err
	}
	if u.Scheme != "http" {
		return nil, netip.Addr{}, fmt.Errorf("scheme %q is not http", u.Scheme)
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return nil, netip.Addr{}, fmt.Errorf("host %q is not an IP address", u.Hostname())
	}
	return u, ip.Unmap(), nil
}

func (c Config) withDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = "tcp"
	}
	if c.Description == "" {
		c.Description = DefaultDescription
	}
	if len(c.Methods) == 0 {
		c.Methods = []Method{NATPMP, UPnP}
	} else {
		c.Methods = append([]Method(nil), c.Methods...)
	}
	if c.NATPMPPort == 0 {
		c.NATPMPPort = DefaultNATPMPPort
	}
	c.Gateway = c.Gateway.Unmap()
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.RequestTimeout, DefaultRequestTimeout)
	set(&c.DiscoveryTimeout, DefaultDiscoveryTimeout)
	set(&c.RetryBase, DefaultRetryBase)
	set(&c.RetryMax, DefaultRetryMax)
	set(&c.MinRenew, DefaultMinRenew)
	if c.RetryMax < c.RetryBase {
		c.RetryMax = c.RetryBase
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// lease returns the lifetime to ask of a method.
func (c Config) lease(m Method) time.Duration {
	if c.Lease > 0 {
		return c.Lease
	}
	if m == NATPMP {
		return DefaultNATPMPLease
	}
	return DefaultUPnPLease
}

package mdns

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Config configures a Service. The zero value is valid: every zero field takes the default
// documented beside it. New copies the Config; changing it afterwards has no effect.
type Config struct {
	// ServiceName is the DNS-SD service type browsed and announced, "_name._udp" or
	// "_name._tcp" (RFC 6763 section 7). Default "_tendril._udp".
	ServiceName string
	// Domain is the mDNS domain. Default "local".
	Domain string
	// Instance is this process's instance label: 1 to 63 of [A-Za-z0-9_-]. It must be
	// unique on the link (answers are keyed by it); default 16 random hex digits. A caller
	// that derives it from its peer ID should append something random per process, since
	// two processes of one peer on one host would otherwise share it.
	Instance string
	// Payload is announced in the instance's TXT record, opaque to this package; at most
	// MaxPayload bytes. Change it later with Service.SetPayload.
	Payload []byte
	// Port is the port announced in the SRV record (0 to 65535); opaque here too.
	Port int
	// Interfaces restricts the Service to the named interfaces. Nil means every interface
	// that is up and multicast-capable. Either way the list is re-scanned every
	// RescanInterval, so interfaces that come up later are joined and queried at once.
	Interfaces []string
	// DisableIPv4 and DisableIPv6 turn off 224.0.0.251 and ff02::fb respectively.
	DisableIPv4, DisableIPv6 bool

	// OnFound is called for each peer instance found: when it is first seen, when its
	// payload, port or announced addresses change, and again every RefreshInterval while
	// it keeps answering. Calls are serialized, from the Service's receiving goroutines:
	// a slow OnFound slows reception (the kernel then drops packets; nothing queues here).
	// It must not call Close. Nil means the Service only announces.
	OnFound func(Found)

	// QueryInterval is the wait between the first and second query on an interface; each
	// later wait doubles (RFC 6762 section 5.2) up to MaxQueryInterval. Default 1 s.
	QueryInterval time.Duration
	// MaxQueryInterval caps the wait between queries. Default 60 s.
	MaxQueryInterval time.Duration
	// Announcements is how many unsolicited announcements go out on each interface when it
	// is joined and when the payload changes, 1 s then 2 s apart (RFC 6762 section 8.3:
	// at least two). Default 3.
	Announcements int
	// RescanInterval is how often the interface list is re-read, and so how late an
	// interface that comes up is noticed. Default 1 s (a scan is a few netlink dumps).
	RescanInterval time.Duration
	// RefreshInterval is how long an unchanged instance goes unreported. Default 2 min.
	RefreshInterval time.Duration
	// TTL is the time to live of the records announced, and how long an instance that
	// stopped answering is remembered. Default 120 s (RFC 6762 section 10).
	TTL time.Duration
	// MaxInstances bounds the instances remembered; the least recently seen is forgotten
	// first. Default 256.
	MaxInstances int

	// Logger receives debug and warning messages. Nil means silent.
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultServiceName      = "_tendril._udp"
	DefaultDomain           = "local"
	DefaultQueryInterval    = time.Second
	DefaultMaxQueryInterval = 60 * time.Second
	DefaultAnnouncements    = 3
	DefaultRescanInterval   = time.Second
	DefaultRefreshInterval  = 2 * time.Minute
	DefaultTTL              = 120 * time.Second
	DefaultMaxInstances     = 256
)

// withDefaults returns a copy of c with zero fields filled; the payload slice is copied too.
func (c Config) withDefaults() Config {
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.Instance == "" {
		var b [8]byte
		rand.Read(b[:])
		c.Instance = hex.EncodeToString(b[:])
	}
	c.Payload = append([]byte(nil), c.Payload...)
	c.Interfaces = append([]string(nil), c.Interfaces...)
	if c.QueryInterval == 0 {
		c.QueryInterval = DefaultQueryInterval
	}
	if c.MaxQueryInterval == 0 {
		c.MaxQueryInterval = max(DefaultMaxQueryInterval, c.QueryInterval)
	}
	if c.Announcements == 0 {
		c.Announcements = DefaultAnnouncements
	}
	if c.RescanInterval == 0 {
		c.RescanInterval = DefaultRescanInterval
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	return c
}

// Validate reports the first invalid field, wrapped with ErrInvalidConfig (or
// ErrPayloadTooLarge for the payload). Zero fields are valid: they mean the defaults.
func (c Config) Validate() error {
	d := c.withDefaults()
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, why) }
	if !validServiceName(d.ServiceName) {
		return bad("ServiceName", "must be _name._udp or _name._tcp, name 1-15 of [a-z0-9-]")
	}
	if !validLabel(d.Domain) {
		return bad("Domain", "must be one label of [A-Za-z0-9_-]")
	}
	if !validLabel(d.Instance) {
		return bad("Instance", "must be 1-63 of [A-Za-z0-9_-]")
	}
	if err := checkPayload(d.Payload); err != nil {
		return err
	}
	if d.Port < 0 || d.Port > 65535 {
		return bad("Port", "must be 0-65535")
	}
	if d.DisableIPv4 && d.DisableIPv6 {
		return bad("DisableIPv4/DisableIPv6", "cannot both be set")
	}
	switch {
	case d.QueryInterval < 100*time.Millisecond:
		return bad("QueryInterval", "must be at least 100ms")
	case d.MaxQueryInterval < d.QueryInterval:
		return bad("MaxQueryInterval", "must be at least QueryInterval")
	case d.Announcements < 1 || d.Announcements > 8:
		return bad("Announcements", "must be 1-8 (RFC 6762 section 8.3)")
	case d.RescanInterval < 100*time.Millisecond:
		return bad("RescanInterval", "must be at least 100ms")
	case d.RefreshInterval < time.Second:
		return bad("RefreshInterval", "must be at least 1s")
	case d.TTL < time.Second || d.TTL > 24*time.Hour:
		return bad("TTL", "must be 1s-24h")
	case d.MaxInstances < 1 || d.MaxInstances > 65536:
		return bad("MaxInstances", "must be 1-65536")
	}
	return nil
}

// validLabel accepts the DNS labels this package emits and believes: a restricted alphabet
// keeps presentation-format escaping out of every name it compares.
func validLabel(s string) bool {
	if len(s) < 1 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func validServiceName(s string) bool {
	name, proto, ok := strings.Cut(s, ".")
	if !ok || (proto != "_udp" && proto != "_tcp") || len(name) < 2 || len(name) > 16 || name[0] != '_' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

package addrbook

import (
	"fmt"
	"time"
)

// Config is an address book's bounds. A zero field takes its default (DefaultConfig);
// New copies the Config, so changing it afterwards has no effect.
//
// Every bound holds by construction, whatever peers tell the book: an address lives in
// exactly one slot of the new table or of the tried table, so the book never holds more
// than NewBuckets*NewSlots + TriedBuckets*TriedSlots addresses (10,240 by default), nor
// more than MaxPeers peers, nor more than MaxAddrsPerPeer addresses of one peer, nor an
// address longer than MaxAddrSize bytes. It holds at most one signed record per peer
// (AddRecord), dropped when the peer's last address leaves, so at most MaxPeers records
// of at most peerrecord.MaxSize bytes each (4 MiB of encodings by default). A record is
// held as its encoding (its addresses are decoded when asked for): measured
// (BenchmarkMemoryRecords) about 0.5 KB for a one-address record of 108 bytes and 1.2 KB
// for a sixteen-address record of 738 bytes, so about 2 MB and 5 MB at 4,096 peers.
type Config struct {
	// MaxAddrsPerPeer bounds the addresses kept for one peer (default 16). A node
	// listens on a handful of addresses; go-libp2p's peerstore had no such cap and grew
	// without bound (go-libp2p#715, #3486). A full peer's worst address gives way to a
	// new one from a source at least as trusted (Source.Kind's order).
	MaxAddrsPerPeer int
	// MaxPeers bounds the peers with at least one address (default 4096, so that peer
	// records, not only addresses, stay bounded when each peer has one address). At the
	// cap a new peer's address is taken only in place of another peer's last address
	// that is worthless: a flood cannot push out live peers, and the tables' per-group
	// limits keep one source from reaching the cap alone.
	MaxPeers int

	// NewBuckets and NewSlots size the new table (default 256 x 32 = 8192 addresses),
	// which holds addresses never connected to. NewBucketsPerSource (default 16, one
	// sixteenth of the table, as Bitcoin Core's 64 of 1024) bounds the buckets the
	// addresses told by one source group can reach, and the addresses of one group told
	// by one source group all land in one bucket: whoever controls a /16 fills at most
	// NewSlots slots with its own addresses and NewBucketsPerSource*NewSlots with any.
	NewBuckets          int
	NewSlots            int
	NewBucketsPerSource int

	// TriedBuckets and TriedSlots size the tried table (default 64 x 32 = 2048
	// addresses), which holds addresses a session has succeeded at. TriedBucketsPerGroup
	// (default 4, one sixteenth) bounds the buckets one address group can reach.
	TriedBuckets         int
	TriedSlots           int
	TriedBucketsPerGroup int

	// TTL is how long an address never connected to is kept after it was last heard of
	// (default 7 days); TriedTTL how long one is kept after its last success or last
	// mention, whichever is later (default 30 days, Bitcoin Core's horizon).
	TTL      time.Duration
	TriedTTL time.Duration

	// MaxFailuresNew is how many failed attempts in a row make an address never
	// connected to worthless (default 3); MaxFailuresTried the same for an address that
	// has worked before (default 10: a peer may be down for a while, then back). A
	// worthless address is never selected or shared and gives way to any newcomer.
	MaxFailuresNew   int
	MaxFailuresTried int

	// MaxSample bounds a Sample, the answer to a peer-exchange request (default 256).
	MaxSample int
}

// MaxAddrSize bounds the binary size of an address the book keeps; longer ones are
// ignored. The longest useful transport address (/dns/<253 bytes>/tcp/N/wss) fits.
const MaxAddrSize = 300

// maxTableSize bounds buckets*slots of each table in Validate: the tables are allocated
// up front, so an absurd Config would be an absurd allocation.
const maxTableSize = 1 << 20

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{
		MaxAddrsPerPeer:      16,
		MaxPeers:             4096,
		NewBuckets:           256,
		NewSlots:             32,
		NewBucketsPerSource:  16,
		TriedBuckets:         64,
		TriedSlots:           32,
		TriedBucketsPerGroup: 4,
		TTL:                  7 * 24 * time.Hour,
		TriedTTL:             30 * 24 * time.Hour,
		MaxFailuresNew:       3,
		MaxFailuresTried:     10,
		MaxSample:            256,
	}
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	def := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.MaxAddrsPerPeer, d.MaxAddrsPerPeer)
	def(&c.MaxPeers, d.MaxPeers)
	def(&c.NewBuckets, d.NewBuckets)
	def(&c.NewSlots, d.NewSlots)
	def(&c.NewBucketsPerSource, d.NewBucketsPerSource)
	def(&c.TriedBuckets, d.TriedBuckets)
	def(&c.TriedSlots, d.TriedSlots)
	def(&c.TriedBucketsPerGroup, d.TriedBucketsPerGroup)
	def(&c.MaxFailuresNew, d.MaxFailuresNew)
	def(&c.MaxFailuresTried, d.MaxFailuresTried)
	def(&c.MaxSample, d.MaxSample)
	if c.TTL == 0 {
		c.TTL = d.TTL
	}
	if c.TriedTTL == 0 {
		c.TriedTTL = d.TriedTTL
	}
	return c
}

// Validate reports whether c, with its zero fields taking their defaults, is usable:
// every bound positive, the per-source and per-group bucket counts within their tables,
// and each table at most 2^20 slots. Its errors wrap ErrInvalidConfig.
func (c *Config) Validate() error {
	r := c.withDefaults()
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxAddrsPerPeer", r.MaxAddrsPerPeer}, {"MaxPeers", r.MaxPeers},
		{"NewBuckets", r.NewBuckets}, {"NewSlots", r.NewSlots},
		{"NewBucketsPerSource", r.NewBucketsPerSource},
		{"TriedBuckets", r.TriedBuckets}, {"TriedSlots", r.TriedSlots},
		{"TriedBucketsPerGroup", r.TriedBucketsPerGroup},
		{"MaxFailuresNew", r.MaxFailuresNew}, {"MaxFailuresTried", r.MaxFailuresTried},
		{"MaxSample", r.MaxSample},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is %d", ErrInvalidConfig, f.name, f.v)
		}
	}
	if r.TTL < 0 || r.TriedTTL < 0 {
		return fmt.Errorf("%w: negative TTL", ErrInvalidConfig)
	}
	if r.NewBucketsPerSource > r.NewBuckets {
		return fmt.Errorf("%w: NewBucketsPerSource %d > NewBuckets %d", ErrInvalidConfig, r.NewBucketsPerSource, r.NewBuckets)
	}
	if r.TriedBucketsPerGroup > r.TriedBuckets {
		return fmt.Errorf("%w: TriedBucketsPerGroup %d > TriedBuckets %d", ErrInvalidConfig, r.TriedBucketsPerGroup, r.TriedBuckets)
	}
	// Divide rather than multiply so that huge values cannot overflow.
	if r.NewSlots > maxTableSize/r.NewBuckets || r.TriedSlots > maxTableSize/r.TriedBuckets {
		return fmt.Errorf("%w: a table is larger than %d slots", ErrInvalidConfig, maxTableSize)
	}
	return nil
}

package identify

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/peerrecord"
)

// refresh reads this node's addresses and protocols and, if they changed, makes a new
// gen: a record re-signed with the next sequence number when the addresses changed, the
// protocol list when the protocols did. It reports whether anything changed.
func (i *Identify) refresh(now time.Time) bool {
	addrs := i.cfg.Addrs()
	if len(addrs) > peerrecord.MaxAddrs {
		addrs = addrs[:peerrecord.MaxAddrs]
	}
	addrs = ma.Unique(addrs)
	protos := advertised(i.svc.Protocols())

	i.mu.Lock()
	defer i.mu.Unlock()
	cur := i.local
	changed := false
	if cur.rec == nil || !slices.EqualFunc(cur.rec.Addrs(), addrs, ma.Multiaddr.Equal) {
		var last uint64
		if cur.rec != nil {
			last = cur.rec.Seq()
		}
		// Two records: every address, and the public ones for public peers, numbered
		// one below so that wherever both meet the full one supersedes it. NextSeq after
		// last+1 keeps the public record above every earlier full one.
		seq := peerrecord.NextSeq(now, last+1)
		rec, err := peerrecord.New(i.cfg.PrivateKey, seq, addrs)
		var public *peerrecord.Record
		if err == nil {
			public, err = peerrecord.New(i.cfg.PrivateKey, seq-1, slices.DeleteFunc(slices.Clone(addrs), func(a ma.Multiaddr) bool { return !i.cfg.Public(a) }))
		}
		if err != nil {
			// Only a record above peerrecord.MaxSize (very long DNS names): keep the old.
			i.cfg.Logger.Warn("identify: cannot sign a record of this node's addresses", "err", err)
		} else {
			cur.rec, cur.public, changed = rec, public, true
		}
	}
	if !slices.EqualFunc(cur.protocols, protos, equalProto) {
		cur.protocols, changed = protos, true
	}
	if changed {
		cur.gen++
		i.local = cur
	}
	return changed
}

// advertised lists the registered protocols as identify tells them, leaving out what a
// peer would refuse: names and versions beyond the caps, protocols this node only opens
// (no handler), and identify itself (every peer that answers identify speaks it).
func advertised(protos []tendril.Protocol) []ProtoVersions {
	var out []ProtoVersions
	for _, p := range protos {
		if p.Name == ProtocolName || !validText(p.Name, MaxProtocolName) || !strings.HasPrefix(p.Name, "/") {
			continue
		}
		if p.Handler == nil && p.StreamHandler == nil && p.RequestHandler == nil {
			continue // registered only to be opened: a peer that opens it is refused
		}
		pv := ProtoVersions{Name: p.Name}
		for _, v := range p.Versions {
			if v != "" && validText(v, MaxVersionLen) && len(pv.Versions) < MaxVersions {
				pv.Versions = append(pv.Versions, v)
			}
		}
		out = append(out, pv)
		if len(out) == MaxProtocols {
			break
		}
	}
	return out
}

func validText(s string, limit int) bool { return len(s) <= limit && utf8.ValidString(s) }

func equalProto(a, b ProtoVersions) bool {
	return a.Name == b.Name && slices.Equal(a.Versions, b.Versions)
}

// messageLocked encodes what this node tells sess's peer now. i.mu must be held.
func (i *Identify) messageLocked(sess *tendril.Session) []byte {
	obs := sess.RemoteAddr().Transport
	rec := i.local.rec
	if i.cfg.Public(obs) {
		rec = i.local.public
	}
	m := message{record: rec.Bytes(), agent: i.cfg.Agent, protocols: i.local.protocols}
	if len(obs.Bytes()) <= MaxObservedAddr {
		m.observed = obs
	}
	b, n := m.appendTo(make([]byte, 0, 512))
	if n < len(m.protocols) {
		i.cfg.Logger.Debug("identify: protocols left out to fit the message", "listed", n, "registered", len(m.protocols))
	}
	return b
}

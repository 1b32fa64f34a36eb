package node

import (
	"context"
	"fmt"
	"strconv"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/mdns"
	"github.com/tendril-p2p/tendril/peerrecord"
)

// startMDNS announces this node's signed record on the LAN and takes the records others
// announce. mDNS itself is unauthenticated, so the payload is the signed record: a
// neighbour can repeat or withhold a record, never put its addresses in another peer's
// name.
func (n *Node) startMDNS(ctx context.Context) error {
	mc := n.cfg.MDNSConfig
	rec := n.id.Record()
	mc.Payload = rec.Bytes()
	mc.Port = n.listenPort()
	if mc.Instance == "" {
		mc.Instance = n.svc.ID().String()[:20]
	}
	mc.OnFound = n.foundOnLAN
	if mc.Logger == nil {
		mc.Logger = n.cfg.Logger
	}
	m, err := mdns.New(mc)
	if err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		m.Close()
		return fmt.Errorf("node: mDNS: %w", err)
	}
	n.mu.Lock()
	n.mdns, n.mdnsRecord = m, rec
	n.mu.Unlock()
	return nil
}

// listenPort is the port mDNS advertises: the first listener's (the record is what
// peers dial; the port is for mDNS browsers that show it).
func (n *Node) listenPort() int {
	for _, a := range n.svc.Addrs() {
		for _, code := range []int{ma.P_TCP, ma.P_UDP} {
			if v, err := a.Transport.ValueForProtocol(code); err == nil {
				if p, err := strconv.Atoi(v); err == nil {
					return p
				}
			}
		}
	}
	return 0
}

// foundOnLAN verifies a record heard on the LAN and puts it in the book.
func (n *Node) foundOnLAN(f mdns.Found) {
	rec, err := peerrecord.Parse(f.Payload)
	if err != nil {
		n.log.Debug("mDNS: bad record", "instance", f.Instance, "from", f.Addrs, "err", err)
		return
	}
	n.addRecord(rec, addrbook.Source{Kind: addrbook.SourceMDNS})
}

// refreshMDNS announces the node's record again when identify has signed a new one.
func (n *Node) refreshMDNS() {
	n.mu.Lock()
	m, last := n.mdns, n.mdnsRecord
	n.mu.Unlock()
	rec := n.id.Record()
	if m == nil || rec == last {
		return
	}
	if err := m.SetPayload(rec.Bytes()); err != nil {
		n.log.Warn("mDNS: new record", "err", err)
		return
	}
	n.mu.Lock()
	n.mdnsRecord = rec
	n.mu.Unlock()
}

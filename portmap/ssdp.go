package portmap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// SSDP answers come from any device on the LAN, so the search is bounded: a fixed window,
// at most ssdpMaxPackets datagrams looked at (each at most ssdpMaxPacket bytes), at most
// ssdpMaxCandidates devices kept, and each kept only if it answered from an acceptable
// address and serves its description from that same address.
const (
	ssdpMaxPackets    = 64
	ssdpMaxPacket     = 2048
	ssdpMaxCandidates = 3
)

var ssdpGroup = netip.MustParseAddrPort("239.255.255.250:1900")

var ssdpTargets = []string{
	"urn:schemas-upnp-org:device:InternetGatewayDevice:2",
	"urn:schemas-upnp-org:device:InternetGatewayDevice:1",
}

// ssdpCandidate is a device that answered a search.
type ssdpCandidate struct {
	loc  *url.URL
	host netip.Addr
}

func ssdpRequest(st string, mx int) []byte {
	return fmt.Appendf(nil, "M-SEARCH * HTTP/1.1\r\nHOST: %s\r\nMAN: \"ssdp:discover\"\r\nMX: %d\r\nST: %s\r\n\r\n", ssdpGroup, mx, st)
}

// parseSSDPAnswer checks one datagram from src: an HTTP 200 answer for an IGD whose
// LOCATION is an http URL on src itself.
func parseSSDPAnswer(b []byte, src netip.Addr) (ssdpCandidate, error) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		return ssdpCandidate{}, fmt.Errorf("%w: ssdp: %v", ErrBadResponse, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ssdpCandidate{}, fmt.Errorf("%w: ssdp: status %d", ErrBadResponse, resp.StatusCode)
	}
	if !strings.Contains(resp.Header.Get("ST"), ":InternetGatewayDevice:") {
		return ssdpCandidate{}, fmt.Errorf("%w: ssdp: not a gateway", ErrBadResponse)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Scheme != "http" {
		return ssdpCandidate{}, fmt.Errorf("%w: ssdp: location %.128q", ErrBadResponse, resp.Header.Get("Location"))
	}
	ip, err := netip.ParseAddr(loc.Hostname())
	if err != nil || ip.Unmap() != src.Unmap() {
		return ssdpCandidate{}, fmt.Errorf("%w: ssdp: %s answered with location %.128q", ErrUntrustedGateway, src, loc.Redacted())
	}
	return ssdpCandidate{loc: loc, host: ip.Unmap()}, nil
}

// ssdpSearch multicasts IGD searches to dst and collects candidates for window, or until
// one comes from prefer. accept filters answers by source address.
func ssdpSearch(ctx context.Context, dst netip.AddrPort, window time.Duration, accept func(netip.Addr) bool, prefer netip.Addr) ([]ssdpCandidate, error) {
	conn, err := net.ListenUDP("udp4", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: ssdp: %w", ErrNoGateway, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()

	mx := max(1, int(window/time.Second))
	to := net.UDPAddrFromAddrPort(dst)
	for _, st := range ssdpTargets {
		if _, err := conn.WriteToUDP(ssdpRequest(st, mx), to); err != nil {
			return nil, fmt.Errorf("%w: ssdp: %w", ErrNoGateway, err)
		}
	}
	var found []ssdpCandidate
	seen := map[string]bool{}
	buf := make([]byte, ssdpMaxPacket)
	for range ssdpMaxPackets {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			return found, fmt.Errorf("%w: ssdp: %w", ErrNoGateway, err)
		}
		src := from.Addr().Unmap()
		if !accept(src) {
			continue
		}
		c, err := parseSSDPAnswer(buf[:n], src)
		if err != nil || seen[c.loc.String()] {
			continue
		}
		seen[c.loc.String()] = true
		found = append(found, c)
		if src == prefer || len(found) == ssdpMaxCandidates {
			break
		}
	}
	if ctx.Err() != nil && len(found) == 0 && context.Cause(ctx) != context.DeadlineExceeded {
		return nil, context.Cause(ctx)
	}
	return found, nil
}

// onLink reports whether a is in a subnet of one of this host's interfaces (and not
// this host's own address or a loopback one).
func onLink(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		ipn, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		p, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		p = p.Unmap()
		bits, _ := ipn.Mask.Size()
		if p.IsLoopback() || p == a {
			continue
		}
		if pfx, err := p.Prefix(bits); err == nil && pfx.Contains(a) {
			return true
		}
	}
	return false
}

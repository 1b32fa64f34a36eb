package main

import (
	"fmt"
	"net/netip"
	"net/url"

	"github.com/tendril-p2p/tendril"
)

// pageAddr returns the address the browser peer dials: the node that served the page, at
// the page's own host and port (the node listens for WebSocket upgrades on the page's
// "/"), /ws for an http page and /wss for an https one (a browser refuses ws:// from an
// https page), with peer, the node's ID that the server gave the page, so that the
// handshake proves the node is the one that served it. Only the browser peer calls it;
// its file has no build tag so that the native tests cover it.
func pageAddr(pageURL, peer string) (tendril.Addr, error) {
	u, err := url.Parse(pageURL)
	if err != nil {
		return tendril.Addr{}, fmt.Errorf("chat: the page's URL %q: %w", pageURL, err)
	}
	var ws, port string
	switch u.Scheme {
	case "http":
		ws, port = "ws", "80"
	case "https":
		ws, port = "wss", "443"
	default:
		return tendril.Addr{}, fmt.Errorf("chat: the page was loaded over %q, not http or https: it has no node to dial", u.Scheme)
	}
	if p := u.Port(); p != "" {
		port = p
	}
	host := u.Hostname()
	if host == "" {
		return tendril.Addr{}, fmt.Errorf("chat: the page's URL %q has no host", pageURL)
	}
	if peer == "" {
		return tendril.Addr{}, fmt.Errorf("chat: the server gave the page no peer ID")
	}
	hostPart := "/dns/" + host
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap().WithZone("")
		hostPart = "/ip4/" + ip.String()
		if ip.Is6() {
			hostPart = "/ip6/" + ip.String()
		}
	}
	return tendril.ParseAddr(hostPart + "/tcp/" + port + "/" + ws + "/p2p/" + peer)
}

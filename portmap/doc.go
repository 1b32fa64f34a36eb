// Package portmap keeps a port mapped on the local NAT gateway, so that a node behind a
// home router can be dialled from outside: it discovers the gateway, maps the listen
// port, renews the lease, reports the external address and port (to be confirmed by
// dial-back before anyone calls it public), and deletes the mapping on Close.
//
// Two protocols, tried in Config.Methods order:
//
//   - NAT-PMP ([RFC 6886]), first by default: one UDP exchange with the default route's
//     gateway. The client is this package's own (the reasons are in natpmp.go).
//   - UPnP IGD, through github.com/huin/goupnp's service clients (WANIPConnection:2, :1,
//     WANPPPConnection:1): SSDP discovery, the device description over HTTP, SOAP calls.
//
// PCP ([RFC 6887]) is not spoken: the gateways in reach (miniupnpd, most home routers)
// answer NAT-PMP or UPnP, and what PCP adds (IPv6 firewall pinholes, mappings for a third
// party) nothing here needs yet.
//
// When the gateway refuses the port asked for, the port it offers is taken: NAT-PMP's
// assigned port; on UPnP, AddAnyPortMapping (IGDv2), then three random ports. Leases are
// renewed at half their length (at least Config.MinRenew apart); a failed renewal is
// retried with exponential backoff and the mapping is reported lost (OnChange with the
// zero Mapping) only once its lease has run out. Every renewal also asks for the
// external address, so a change is reported. An external address that is private or in
// 100.64.0.0/10 is reported with DoubleNAT set: the mapping is real but one NAT short.
//
// Every byte from the LAN is hostile, so what a device can make the Mapper do is bounded:
//
//   - SSDP: a fixed window, at most 64 datagrams read (2 KiB each), at most 3 devices kept;
//     an answer counts only from the default gateway (from a directly connected subnet
//     when the gateway is unknown) and only if its description is on that same address.
//   - HTTP to a UPnP device: only to the device's own IP (checked per request and again
//     at dial), no redirects, no proxy, no kept connections, each request within
//     RequestTimeout, bodies cut at 64 KiB (description) and 16 KiB (SOAP answers).
//   - NAT-PMP: one socket per exchange, connected to the gateway; RFC 6886's 250 ms
//     doubling retransmissions within RequestTimeout; at most 32 stray packets per
//     exchange before giving up.
//   - External addresses that nobody could reach (0.0.0.0, loopback, multicast,
//     link-local, broadcast, IPv6 from an IPv4 gateway) are errors, and such a mapping
//     is deleted at once.
//
// Errors wrap the sentinels in errors.go (ErrRefused with a GatewayError carrying the
// code, ErrUntrustedGateway, ErrTooLarge, ErrTimeout, ...); Mapper.Err gives the last.
// The Mapper has one goroutine, which Close ends; Close interrupts any request in flight.
//
// [RFC 6886]: https://www.rfc-editor.org/rfc/rfc6886
// [RFC 6887]: https://www.rfc-editor.org/rfc/rfc6887
package portmap

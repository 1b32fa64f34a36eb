// Package lab builds small networks of Linux network namespaces for tests: hosts on LAN
// segments, routers between them, shaped links, and the project's own programs running as
// child processes on those hosts.
//
// # Model
//
// A [Lab] belongs to one test. Each [Host] is a network namespace of its own with loopback
// up. Each [Segment] is a Linux bridge inside a namespace of its own, so that nothing is
// ever added to the machine's root namespace. [Host.Attach] joins a host to a segment with
// a veth pair created directly in the two namespaces: the host's end is eth0, eth1, ... in
// the order of attachment and gets the next IPv4 and IPv6 address of the segment's
// prefixes; the first link also carries the host's IPv4 multicast route, as a default
// route would, so that mDNS works on a LAN without a router. [Lab.LAN] segments use 10.N.0.0/24 and fd00:0:0:N::/64, private ranges;
// [Lab.Public] segments use the documentation ranges 198.51.100.0/24, 203.0.113.0/24 and
// 192.0.2.0/24 with 2001:db8:0:N::/64, which net/netip classifies as global unicast, so a
// host there looks like a node on the internet; none of these packets can leave the lab.
// A router ([Lab.Router]) is a host on two or more segments that forwards IPv4 and IPv6;
// [Host.DefaultVia] and [Host.Route] send a host's traffic through it. [Lab.NATRouter]
// is a home router that masquerades a LAN behind its public address, with the mapping
// and filtering behaviour of RFC 4787 that [NATConfig] chooses (endpoint-independent
// mapping with address-and-port-dependent, address-dependent or endpoint-independent
// filtering, or a symmetric NAT), drops unsolicited packets without an answer, and can
// run miniupnpd as the LAN's UPnP and NAT-PMP gateway; such a router's public side goes
// on a [Lab.Routable] segment (100.128.N.0/24), as miniupnpd refuses documentation
// addresses.
//
// [Link.Shape] limits a link's rate per direction with a token bucket (tc tbf) on each veth
// end. [Link.Delay] delays each direction by a fixed time with a delay line of the lab's
// own (netem is missing on the test machines).
//
// [Host.Start] runs a program (see [Build]) inside a host's namespace and records its
// output line by line; [Process.WaitLine] waits for a line, [Process.Stdin] feeds it.
// [Host.Do] runs Go code on a thread inside the namespace, so that the test itself can
// listen and dial there, and [Host.Run] runs a command there.
//
// # Requirements and teardown
//
// A lab needs Linux with IPv6, root and iproute2's ip and tc (NAT routers need nftables'
// nft, and miniupnpd for UPnP). Without them [New] skips the test,
// unless the environment has TENDRIL_LAB=require (CI sets it), in which case it fails.
// Every name the lab creates starts with "tl<pid>-": the test process's ID. The test's
// cleanup stops the processes (SIGTERM, then SIGKILL after a grace period), logs their
// output if the test failed, and deletes the namespaces, which deletes their interfaces
// and bridges; this runs after t.Fatal and after a panic alike. A test binary killed
// before its cleanup leaves namespaces behind: the next [New] in any test binary deletes
// those whose process is gone, together with the processes still inside them.
//
// Methods that build the topology fail the test on error and must be called from the
// test's goroutine; methods that act (Run, Do, WaitLine, Stop) return errors.
package lab

package portmap

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// Route flags from linux/route.h.
const (
	rtfUp      = 0x1
	rtfGateway = 0x2
)

// parseDefaultGateway returns the gateway of the default IPv4 route with the lowest
// metric in the format of Linux's /proc/net/route (a header line, then one route a line:
// Iface Destination Gateway Flags RefCnt Use Metric Mask ..., addresses in hex in host
// byte order, which is little-endian on every Linux this runs on).
func parseDefaultGateway(r io.Reader) (netip.Addr, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	var best netip.Addr
	bestMetric := -1
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&(rtfUp|rtfGateway) != rtfUp|rtfGateway {
			continue
		}
		metric, err := strconv.Atoi(f[6])
		if err != nil {
			continue
		}
		raw, err := hex.DecodeString(f[2])
		if err != nil || len(raw) != 4 {
			continue
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], binary.LittleEndian.Uint32(raw))
		gw := netip.AddrFrom4(a)
		if gw.IsUnspecified() {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = gw, metric
		}
	}
	if err := sc.Err(); err != nil {
		return netip.Addr{}, fmt.Errorf("%w: reading routes: %w", ErrNoGateway, err)
	}
	if !best.IsValid() {
		return netip.Addr{}, fmt.Errorf("%w: no default IPv4 route", ErrNoGateway)
	}
	return best, nil
}

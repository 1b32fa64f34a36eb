//go:build linux

package lab

import (
	"fmt"
	"strconv"
	"time"
)

// Limit is a token-bucket limit on one direction of a link (tc tbf). The zero Limit
// means no limit.
type Limit struct {
	// Rate is the long-run rate in bits per second.
	Rate int64
	// Burst is how many bytes may leave at once after an idle time. Default: 10 ms at
	// Rate, and at least 8 KiB (tbf needs room for a full-size packet).
	Burst int
	// Latency is how long a packet may wait in the queue before it is dropped: the queue
	// holds Rate x Latency plus Burst bytes. Default: 100 ms.
	Latency time.Duration
}

// tbfArgs returns the arguments after "tc qdisc replace dev DEV root" that set lim, or
// those that remove the limit for the zero Limit.
func tbfArgs(lim Limit) ([]string, error) {
	if lim == (Limit{}) {
		return nil, nil
	}
	if lim.Rate <= 0 || lim.Burst < 0 || lim.Latency < 0 {
		return nil, fmt.Errorf("lab: limit %+v: want a positive rate and no negative burst or latency", lim)
	}
	burst := lim.Burst
	if burst == 0 {
		burst = max(int(lim.Rate/8/100), 8<<10)
	}
	latency := lim.Latency
	if latency == 0 {
		latency = 100 * time.Millisecond
	}
	return []string{"tbf",
		"rate", strconv.FormatInt(lim.Rate, 10) + "bit",
		"burst", strconv.Itoa(burst),
		"latency", strconv.FormatInt(latency.Microseconds(), 10) + "us",
	}, nil
}

// Shape limits the link's rate: up applies to what the host sends (the host's end of
// the veth pair), down to what it receives (the bridge's end). A zero Limit removes the
// limit of that direction. Calling Shape again replaces both.
func (lk *Link) Shape(up, down Limit) {
	t := lk.Host.lab.t
	t.Helper()
	for _, d := range []struct {
		ns, dev string
		lim     Limit
	}{{lk.Host.ns, lk.Name, up}, {lk.Segment.ns, lk.port, down}} {
		args, err := tbfArgs(d.lim)
		if err != nil {
			t.Fatal(err)
		}
		if args == nil {
			// Deleting a qdisc that is not there fails: nothing to remove is fine.
			_ = tool("tc", "-n", d.ns, "qdisc", "delete", "dev", d.dev, "root")
			continue
		}
		if err := tool("tc", append([]string{"-n", d.ns, "qdisc", "replace", "dev", d.dev, "root"}, args...)...); err != nil {
			t.Fatalf("lab: %v", err)
		}
	}
}

package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TimeWait counts the IPv4 TCP sockets between the ports a and b (either way round, any
// address) that are in TIME_WAIT, from /proc/net/tcp; it skips the test without that file.
func TimeWait(t testing.TB, a, b int) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /proc/net/tcp")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pa, pb := fmt.Sprintf(":%04X", a), fmt.Sprintf(":%04X", b)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st ...: addresses are HEXIP:HEXPORT, TIME_WAIT is 06.
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "06" {
			continue
		}
		l, r := fields[1], fields[2]
		if strings.HasSuffix(l, pa) && strings.HasSuffix(r, pb) || strings.HasSuffix(l, pb) && strings.HasSuffix(r, pa) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

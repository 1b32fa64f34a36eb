package testutil

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// CheckExit runs bin with args (20 s at most) and fails the test unless the program exits
// with code and its output contains want and no stack trace; for exit 1, a runtime error,
// the output must also be a single line. The examples' tests share it because a newcomer's
// first runs are mostly mistakes, and each must get the usage or one line that names the
// mistake, never a panic.
func CheckExit(t testing.TB, bin string, code int, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, _ := cmd.CombinedOutput()
	got := cmd.ProcessState.ExitCode()
	if got != code || !strings.Contains(string(out), want) || strings.Contains(string(out), "goroutine ") ||
		code == 1 && strings.Count(string(out), "\n") != 1 {
		t.Errorf("%q: exit %d, output %q; want exit %d and %q (in one line for exit 1)", args, got, out, code, want)
	}
}

// listeningRE matches the line that the examples and `tendril listen` print once they serve.
var listeningRE = regexp.MustCompile(`listening on (\S+)`)

// ListeningAddr waits (10 s at most) for out, a program's output, to say "listening on ADDR"
// and returns ADDR, the full address (with /p2p/PEERID) a test dials; the test fails if the
// line does not come. The program is started on port 0, so that line is the only way to
// learn where it listens.
func ListeningAddr(t testing.TB, out *SyncBuffer) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := listeningRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no \"listening on\" line within 10s: %s", out.String())
		}
	}
}

package testutil

import (
	"context"
	"os/exec"
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

package testutil

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BuildMain builds the main package in the test's working directory into a temporary
// directory and returns the binary's path, so that an example's test can run it as a user
// would: its flags, exit status, signals and output as a process shows them.
func BuildMain(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := filepath.Join(t.TempDir(), "main")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	// go test puts its own toolchain's bin directory first on PATH: this "go" is the one
	// running the test.
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// RunUntilReadyThenTERM starts cmd with its output in a buffer, waits (10 s at most) for
// ready to appear in it, sends SIGTERM and requires the process to exit 0 within 10 s: a
// program stopped by a service manager must close gracefully, as with Ctrl-C.
func RunUntilReadyThenTERM(t testing.TB, cmd *exec.Cmd, ready string) {
	t.Helper()
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), ready); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-waited
			t.Fatalf("%s did not start: %s", filepath.Base(cmd.Path), out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-waited
		t.Fatalf("SIGTERM did not stop %s", filepath.Base(cmd.Path))
	}
}

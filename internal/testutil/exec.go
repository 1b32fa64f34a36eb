package testutil

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
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

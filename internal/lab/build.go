//go:build linux

package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// builds caches the programs Build made in this test process, by package path.
var builds struct {
	mu  sync.Mutex // guards m and dir
	m   map[string]*build
	dir string // tendril-lab-<pid>-* in os.TempDir; the next process's sweep removes it
}

type build struct {
	once sync.Once
	path string
	err  error
}

// buildTimeout bounds one go build: long enough for a cold cache on a loaded machine.
const buildTimeout = 5 * time.Minute

// Build compiles the main package with import path pkg (such as
// "github.com/tendril-p2p/tendril/examples/chat") once per test process and returns the
// program's path; the test fails if it does not build. The toolchain is the one running
// the test (go test puts it first on PATH), and the package is resolved in the module of
// the test's working directory.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	builds.mu.Lock()
	if builds.m == nil {
		builds.m = map[string]*build{}
	}
	b := builds.m[pkg]
	if b == nil {
		b = &build{}
		builds.m[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() { b.path, b.err = goBuild(pkg) })
	if b.err != nil {
		t.Fatalf("lab: %v", b.err)
	}
	return b.path
}

func goBuild(pkg string) (string, error) {
	builds.mu.Lock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", binPrefix, os.Getpid()))
		if err != nil {
			builds.mu.Unlock()
			return "", err
		}
		builds.dir = dir
	}
	dir := builds.dir
	builds.mu.Unlock()
	// One directory per package, so that the program keeps its own name (chat, tendril)
	// in messages and the output of ps.
	sub := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(sub, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if msg, err := exec.CommandContext(ctx, "go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

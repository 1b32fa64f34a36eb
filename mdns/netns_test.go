package mdns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// innerEnv marks a test binary re-executed inside a network namespace by inNetns.
const innerEnv = "TENDRIL_MDNS_NETNS"

// inNetns runs the test named inner in a re-executed test binary inside a throwaway
// network namespace whose loopback is up and multicast-capable, after running setup
// (ip(8) argument lists, applied inside the namespace). Multicast tests never touch the
// host's interfaces this way, and the whole child process (every thread) is in the
// namespace. Without root or ip(8) the test is skipped, or fails if TENDRIL_LAB=require.
func inNetns(t *testing.T, inner string, setup ...[]string) {
	t.Helper()
	if os.Getenv(innerEnv) != "" {
		t.Skip("already inside a namespace")
	}
	_, ipErr := exec.LookPath("ip")
	if runtime.GOOS != "linux" || os.Geteuid() != 0 || ipErr != nil {
		if os.Getenv("TENDRIL_LAB") == "require" {
			t.Fatalf("TENDRIL_LAB=require but cannot create a network namespace (need Linux, root and ip(8))")
		}
		t.Skip("needs root and ip(8) to create a network namespace")
	}
	ns := newNetns(t)
	for _, s := range setup {
		ipCmd(t, append([]string{"-n", ns}, s...)...)
	}
	args := []string{"netns", "exec", ns, os.Args[0], "-test.run=^" + inner + "$", "-test.v", "-test.count=1"}
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s in %s:\n%s", inner, ns, out)
	if err != nil {
		t.Fatalf("%s failed: %v", inner, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+inner) {
		t.Fatalf("%s did not run", inner)
	}
}

// newNetns creates a network namespace, deleted when the test ends, with its loopback up
// and multicast-capable, and returns its name.
func newNetns(t *testing.T) string {
	t.Helper()
	var r [4]byte
	rand.Read(r[:])
	ns := "tmdns-" + hex.EncodeToString(r[:])
	ipCmd(t, "netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	ipCmd(t, "-n", ns, "link", "set", "lo", "multicast", "on")
	return ns
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// peerProcess starts this test binary again as TestInnerPeerProcess (one Service,
// instance "there", for 10 s), inside namespace ns if not empty; it is killed when the
// test ends.
func peerProcess(t *testing.T, ns string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.run=^TestInnerPeerProcess$", "-test.v"}
	cmd := exec.Command(self, args...)
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, self}, args...)...)
	}
	cmd.Env = append(os.Environ(), "TENDRIL_MDNS_PEER=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("peer process output:\n%s", out.Bytes())
	})
}

// inner skips a test meant to run only inside inNetns's namespace.
func inner(t *testing.T) {
	if os.Getenv(innerEnv) == "" {
		t.Skip("runs inside a namespace, from its outer test")
	}
}

func envSet(k string) bool { return os.Getenv(k) != "" }

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

package browser_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// Bounds of the test's waits. The first start of node A builds the browser peer for
// GOOS=js GOARCH=wasm, which with a cold build cache takes minutes on a shared 2-core
// machine; everything after it is loopback and takes seconds.
const (
	startTimeout = 6 * time.Minute
	stepTimeout  = time.Minute
	exitTimeout  = 15 * time.Second
)

// TestBrowserChat runs node A (chat -web, which serves the page and its WebSocket
// listener, and -listen on TCP), native peers B (dialling A over TCP) and C (over
// WebSocket, at the page's port), and the page in headless Chromium. The page must connect to A and list it;
// a line typed in the page must reach B and C; lines typed at B and C must appear in the
// page; A must show the page joined over WebSocket. It logs the browser's Dial time
// (WebSocket, handshake, chat protocol), read from the page, and saves a screenshot.
func TestBrowserChat(t *testing.T) {
	chromium := findChromium(t)
	ctx := testContext(t)
	bin := buildChat(t)

	a := startPeer(t, bin, "alice", "-listen", "/ip4/127.0.0.1/tcp/0", "-web", "127.0.0.1:0")
	pageURL := a.waitMatch(t, ctx, startTimeout, `browser peer: open (http://127\.0\.0\.1:\d+/)`)
	tcpAddr := a.waitMatch(t, ctx, stepTimeout, `listening on (/ip4/127\.0\.0\.1/tcp/\d+/p2p/\w+)`)
	wsAddr := a.waitMatch(t, ctx, stepTimeout, `listening on (/ip4/127\.0\.0\.1/tcp/\d+/ws/p2p/\w+)`)
	aID := tcpAddr[strings.LastIndex(tcpAddr, "/")+1:]
	if !strings.HasSuffix(wsAddr, "/p2p/"+aID) || !strings.HasPrefix(pageURL, "http://"+hostPort(wsAddr)+"/") {
		t.Fatalf("node A's WebSocket address %s is not the page's host and port (%s) with its peer ID %s", wsAddr, pageURL, aID)
	}
	t.Logf("node A %s: page %s, TCP %s, WebSocket %s", aID, pageURL, tcpAddr, wsAddr)

	b := startPeer(t, bin, "bob", "-dial", tcpAddr)
	c := startPeer(t, bin, "carol", "-dial", wsAddr)
	b.waitMatch(t, ctx, stepTimeout, `joined: \S+ at /ip4/127\.0\.0\.1/tcp/\d+ \(`)
	c.waitMatch(t, ctx, stepTimeout, `joined: \S+ at /ip4/127\.0\.0\.1/tcp/\d+/ws \(`)

	page := openBrowser(t, ctx, chromium)
	do(t, page, stepTimeout, "load the page", chromedp.Navigate(pageURL+"?name=page"))
	// The page's waits poll on DOM mutations (the page's state is in the DOM), not at every
	// frame, which would compete with the wasm for a shared machine's two cores; the
	// contexts bound them, not the poll's own timeout.
	state := run(t, page, startTimeout, "wait for the page to connect", chromedp.Poll[string](
		`["connected", "failed", "closed"].includes(document.body.dataset.state) && document.body.dataset.state`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
	if state != "connected" {
		msg := run(t, page, stepTimeout, "read the error", chromedp.Evaluate[string](`document.body.dataset.error || ""`))
		t.Fatalf("the page did not connect: state %q: %s", state, msg)
	}
	run(t, page, stepTimeout, "wait for node A in the page's peer list", chromedp.PollFunction[bool](
		`(id) => [...document.querySelectorAll("#peers li")].some((li) => li.dataset.peer === id)`,
		chromedp.WithPollingArgs(aID), chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
	pageID := run(t, page, stepTimeout, "read the page's peer ID", chromedp.Evaluate[string](`document.body.dataset.peerId || ""`))
	self := run(t, page, stepTimeout, "read the page's own peer", chromedp.Text(chromedp.ID("self")))
	if pageID == "" || pageID == aID || !strings.Contains(self, pageID) {
		t.Fatalf("the page shows itself as %q, with data-peer-id %q (node A is %s)", self, pageID, aID)
	}
	a.waitMatch(t, ctx, stepTimeout, `joined: `+regexp.QuoteMeta(short(pageID))+` at /ip4/127\.0\.0\.1/tcp/\d+/ws \(`)

	do(t, page, stepTimeout, "type a line in the page", chromedp.SendKeys(chromedp.ID("line"), "hello from the page\n"))
	for _, p := range []*peer{a, b, c} {
		p.waitMatch(t, ctx, stepTimeout, `\[`+p.name+`\] <page> hello from the page`)
	}

	b.say(t, "hi from bob")
	c.say(t, "hi from carol")
	for _, line := range []string{"<bob> hi from bob", "<carol> hi from carol"} {
		run(t, page, stepTimeout, "wait for "+line+" in the page", chromedp.PollFunction[bool](
			`(line) => [...document.querySelectorAll("#log div")].some((d) => d.textContent === line)`,
			chromedp.WithPollingArgs(line), chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0)))
	}

	dialMs := run(t, page, stepTimeout, "read the Dial time", chromedp.Evaluate[string](`document.body.dataset.dialMs || ""`))
	ms, err := strconv.ParseFloat(dialMs, 64)
	if err != nil || ms <= 0 {
		t.Fatalf("the page's data-dial-ms is %q: %v", dialMs, err)
	}
	t.Logf("browser Dial (WebSocket, secio handshake, chat protocol open) in headless Chromium: %.1f ms", ms)

	shot := run(t, page, stepTimeout, "take a screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join(t.TempDir(), "browser-chat.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if keep := os.Getenv("TENDRIL_BROWSER_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot kept: %s", keep)
	}
}

// findChromium returns the path of Chromium, or skips the test without it, unless
// TENDRIL_BROWSER=require, where it fails: CI must not pass by skipping.
func findChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium (/usr/bin/chromium, or chromium, chromium-browser, google-chrome on PATH): install it (apt-get install chromium) to run the browser test"
	if os.Getenv("TENDRIL_BROWSER") == "require" {
		t.Fatal(msg + "; TENDRIL_BROWSER=require makes its absence a failure")
	}
	t.Skip(msg)
	return ""
}

// testContext bounds the whole test: it ends 30 s before go test's own deadline, so
// that a test that runs out of time fails with its cleanups run (the children killed)
// rather than being killed itself.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-30*time.Second))
	}
	t.Cleanup(cancel)
	return ctx
}

// buildChat builds examples/chat, from this repository, into the test's temporary
// directory, with the go command running the test.
func buildChat(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "chat")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, "./examples/chat")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/chat: %v\n%s", err, out)
	}
	t.Logf("built the chat in %.1fs", time.Since(start).Seconds())
	return bin
}

// peer is a chat process: its output, and its input kept open (a chat peer ends when its
// input does).
type peer struct {
	name   string
	cmd    *exec.Cmd
	out    testutil.SyncBuffer
	stdin  io.WriteCloser
	exited chan struct{} // closed when the process has exited; err is then set
	err    error
}

// startPeer starts bin as the chat peer name. The test's cleanup stops it with SIGTERM,
// kills it if it has not exited within exitTimeout, and fails the test unless it exited
// 0 (a chat peer closes gracefully on SIGTERM); if the test failed, it logs the output.
func startPeer(t *testing.T, bin, name string, args ...string) *peer {
	t.Helper()
	p := &peer{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"-name", name}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	setDeathSignal(p.cmd)
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
			if p.err != nil {
				t.Errorf("%s after SIGTERM: %v", name, p.err)
			}
		case <-time.After(exitTimeout):
			p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("%s did not exit within %v of SIGTERM: killed", name, exitTimeout)
		}
		p.stdin.Close()
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, p.out.String())
		}
	})
	return p
}

// waitMatch waits, within d and ctx, for the peer's output to match pattern, and returns
// the pattern's first group (or the whole match). It fails the test if the peer exits
// first or the time runs out.
func (p *peer) waitMatch(t *testing.T, ctx context.Context, d time.Duration, pattern string) string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case <-p.exited:
			if m := re.FindStringSubmatch(p.out.String()); m != nil {
				return m[len(m)-1]
			}
			t.Fatalf("%s exited (%v) before its output matched %q:\n%s", p.name, p.err, pattern, p.out.String())
		case <-ctx.Done():
			t.Fatalf("%s's output did not match %q within %v:\n%s", p.name, pattern, d, p.out.String())
		case <-tick.C:
		}
	}
}

// say types a line at the peer.
func (p *peer) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("typing at %s: %v", p.name, err)
	}
}

// openBrowser starts headless Chromium and returns its tab's context. Chromium's console
// messages and the page's uncaught exceptions are logged if the test fails.
func openBrowser(t *testing.T, ctx context.Context, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		// Chromium refuses to start as root with its sandbox on, and CI runs as root.
		chromedp.NoSandbox,
		chromedp.WindowSize(1100, 700),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)

	var mu sync.Mutex
	var console []string
	// Listen starts the browser: within ctx, the test's bound.
	err := chromedp.Listen(tab, func(ev any) {
		var line string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			line = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
		case *runtime.EventExceptionThrown:
			line = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				line += " " + ev.ExceptionDetails.Exception.Description
			}
		default:
			return
		}
		mu.Lock()
		console = append(console, line)
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("starting Chromium (%s): %v", chromium, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the browser's console:\n%s", strings.Join(console, "\n"))
		}
	})
	return tab
}

// run runs a chromedp action within d, and fails the test, naming what, if it fails.
func run[T any](t *testing.T, tab context.Context, d time.Duration, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, d)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// do is run for the actions without a result.
func do(t *testing.T, tab context.Context, d time.Duration, what string, a chromedp.Action[chromedp.Void]) {
	t.Helper()
	run(t, tab, d, what, a)
}

// hostPort returns "HOST:PORT" of /ip4/HOST/tcp/PORT/...
func hostPort(maddr string) string {
	parts := strings.Split(maddr, "/")
	if len(parts) < 5 {
		return ""
	}
	return parts[2] + ":" + parts[4]
}

// short is the chat's short form of a peer ID, as it names peers in its output.
func short(id string) string {
	if len(id) > 12 {
		return id[:6] + ".." + id[len(id)-4:]
	}
	return id
}

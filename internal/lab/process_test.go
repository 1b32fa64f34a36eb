//go:build linux

package lab

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// WaitLine finds successive lines, Stdin feeds the program, and the end of stdin and of
// the program end the waits.
func TestProcessStdinAndWaitLine(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	p := startChild(ctx, t, l.Host("a"), "cat", "")
	gotRE := regexp.MustCompile(`^got: `)
	for _, s := range []string{"one", "two"} {
		if _, err := io.WriteString(p.Stdin, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"got: one", "got: two"} {
		line, err := p.WaitLine(ctx, gotRE)
		if err != nil {
			t.Fatal(err)
		}
		if line != want {
			t.Errorf("WaitLine: %q, want %q", line, want)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.WaitLine(short, gotRE); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitLine with no third line: %v, want DeadlineExceeded", err)
	}
	p.Stdin.Close()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("exit after stdin closed: %v", err)
	}
	if _, err := p.WaitLine(ctx, gotRE); !errors.Is(err, ErrExited) {
		t.Errorf("WaitLine after exit: %v, want ErrExited", err)
	}
	// A line printed before the exit is still found after it.
	if line, err := p.WaitLine(ctx, regexp.MustCompile("stdin closed")); err != nil || line != "stdin closed" {
		t.Errorf("WaitLine for the last line: %q, %v", line, err)
	}
	lines := p.Lines()
	if len(lines) != 3 || lines[2].Text != "stdin closed" || !lines[2].Stderr || lines[0].Stderr {
		t.Errorf("Lines: %+v", lines)
	}
	if out := p.Output(); !strings.Contains(out, "out| got: one\n") || !strings.Contains(out, "err| stdin closed\n") {
		t.Errorf("Output:\n%s", out)
	}
}

// Stop ends a program that heeds SIGTERM gracefully and kills one that does not; the
// end of Start's context stops a program as Stop does.
func TestProcessStop(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	a := l.Host("a")
	old := grace
	t.Cleanup(func() { grace = old })

	// A line echoed shows the program has set up its SIGTERM handler.
	ready := func(p *Process) {
		t.Helper()
		if _, err := io.WriteString(p.Stdin, "x\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitLine(ctx, regexp.MustCompile("^got: x$")); err != nil {
			t.Fatal(err)
		}
	}
	p := startChild(ctx, t, a, "cat", "")
	ready(p)
	if err := p.Stop(); err != nil {
		t.Errorf("Stop of a program that exits 0 on SIGTERM: %v", err)
	}
	if _, err := p.WaitLine(ctx, regexp.MustCompile("^terminated$")); err != nil {
		t.Error(err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	c := startChild(cctx, t, a, "cat", "")
	ready(c)
	cancel()
	if err := c.Wait(ctx); err != nil {
		t.Errorf("program whose context ended: %v, want a graceful exit", err)
	}
	if _, err := c.WaitLine(ctx, regexp.MustCompile("^terminated$")); err != nil {
		t.Error(err)
	}

	// Short, so that the kill comes quickly; the programs above, race-instrumented, may
	// need longer than this to exit.
	grace = 200 * time.Millisecond
	s := startChild(ctx, t, a, "stubborn", "")
	if _, err := s.WaitLine(ctx, regexp.MustCompile("ready")); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := s.Stop(); !errors.As(err, &exit) || exit.String() != "signal: killed" {
		t.Errorf("Stop of a program that ignores SIGTERM: %v, want killed", err)
	}
}

// A line longer than maxLine is cut there, the next line is intact, and a last line
// without a newline is kept.
func TestProcessLongLine(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	p := startChild(ctx, t, l.Host("a"), "long", "100000")
	var exit *exec.ExitError
	if err := p.Wait(ctx); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
	lines := p.Lines()
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2", len(lines))
	}
	var long Line
	for _, ln := range lines {
		if !ln.Stderr {
			long = ln
		} else if ln.Text != "after" {
			t.Errorf("stderr line %q, want after", ln.Text)
		}
	}
	if len(long.Text) != maxLine || strings.Trim(long.Text, "x") != "" {
		t.Errorf("long line of %d bytes, want %d x's", len(long.Text), maxLine)
	}
}

// A program that cannot start fails Start's error path, and Start after Close is refused.
func TestProcessStartErrors(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	a := l.Host("a")
	if _, err := a.start(ctx, nil, "/nonexistent/program", nil); err == nil {
		t.Error("started a program that does not exist")
	}
	l.Close()
	if _, err := a.start(ctx, nil, "/bin/true", nil); err == nil {
		t.Error("started a program after Close")
	}
}

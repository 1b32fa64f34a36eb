//go:build linux

package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a program running inside a host's namespace, with its output recorded line
// by line.
type Process struct {
	// Stdin is the program's standard input; closing it ends that input.
	Stdin io.WriteCloser

	name  string // host:program, for messages
	cmd   *exec.Cmd
	start time.Time
	grace time.Duration // between SIGTERM and SIGKILL
	done  chan struct{} // closed once the program has exited and its output is read
	err   error         // how it exited; set before done is closed

	mu      sync.Mutex    // guards the fields below
	lines   []Line        // stdout and stderr, in order of arrival
	next    int           // WaitLine looks from here on
	changed chan struct{} // closed, and replaced, whenever a line arrives
}

// Line is one line of a process's output.
type Line struct {
	At     time.Time
	Stderr bool // from standard error rather than standard output
	Text   string
}

// grace is how long Stop, ctx's end and the lab's cleanup give a process between SIGTERM
// and SIGKILL; a variable only so that the tests can shorten it.
var grace = 5 * time.Second

// maxLine caps a recorded line; the rest of a longer line is dropped.
const maxLine = 64 << 10

// ErrExited is returned by WaitLine when the process ends without printing a matching line.
var ErrExited = errors.New("lab: process exited")

// Start runs the program bin with args inside h's namespace, with the test's environment.
// When ctx ends the program gets SIGTERM, then SIGKILL after 5 s; the lab's cleanup
// stops it in the same way. The test fails if the program cannot be started.
func (h *Host) Start(ctx context.Context, bin string, args ...string) *Process {
	h.lab.t.Helper()
	return h.StartEnv(ctx, nil, bin, args...)
}

// StartEnv is Start with env ("KEY=value") added to the test's environment.
func (h *Host) StartEnv(ctx context.Context, env []string, bin string, args ...string) *Process {
	l := h.lab
	l.t.Helper()
	p, err := h.start(ctx, env, bin, args)
	if err != nil {
		l.t.Fatalf("lab: %s: start %s: %v", h, bin, err)
	}
	return p
}

func (h *Host) start(ctx context.Context, env []string, bin string, args []string) (*Process, error) {
	l := h.lab
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, errors.New("the lab is closed")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// If the test process dies without its cleanup, its programs die with it. (The
	// signal follows the thread that forked; inNetns never lets that thread end.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	p := &Process{
		Stdin:   stdin,
		name:    h.name + ":" + filepath.Base(bin),
		cmd:     cmd,
		grace:   grace,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	// Registered before it starts, so that the lab's Close, racing with this, either
	// refuses the start or stops the process.
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, errors.New("the lab is closed")
	}
	l.procs = append(l.procs, p)
	var startErr error
	// Forked from a thread inside the namespace, the program starts there.
	if derr := inNetns(h.ns, func() { startErr = cmd.Start() }); derr != nil {
		startErr = derr
	}
	l.mu.Unlock()
	outW.Close() // the child has its copies
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		p.err = startErr
		close(p.done)
		return nil, startErr
	}
	p.start = time.Now()
	// Not exec.CommandContext: its Wait reports ctx's error for a program that then
	// exited 0, and Wait here reports how the program exited.
	unwatch := context.AfterFunc(ctx, func() { _ = p.Stop() })
	go p.wait(outR, errR, unwatch)
	return p, nil
}

// wait records the output until the program exits, then gives its output a moment to
// drain (a child of the program may hold the pipes open) before closing them.
func (p *Process) wait(outR, errR *os.File, unwatch func() bool) {
	defer unwatch()
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); p.record(outR, false) }()
	go func() { defer readers.Done(); p.record(errR, true) }()
	err := p.cmd.Wait()
	read := make(chan struct{})
	go func() { readers.Wait(); close(read) }()
	select {
	case <-read:
	case <-time.After(time.Second):
		outR.Close() // unblocks the readers
		errR.Close()
		<-read
	}
	outR.Close()
	errR.Close()
	p.mu.Lock()
	p.err = err
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	close(p.done)
}

// record appends each line that r delivers until r ends.
func (p *Process) record(r io.Reader, stderr bool) {
	br := bufio.NewReaderSize(r, 4096)
	var line []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if len(line) < maxLine {
			line = append(line, frag[:min(len(frag), maxLine-len(line))]...)
		}
		if err != nil {
			if len(line) > 0 {
				p.add(Line{At: time.Now(), Stderr: stderr, Text: string(line)})
			}
			return
		}
		if !isPrefix {
			p.add(Line{At: time.Now(), Stderr: stderr, Text: string(line)})
			line = line[:0]
		}
	}
}

func (p *Process) add(ln Line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, ln)
	close(p.changed)
	p.changed = make(chan struct{})
}

// WaitLine waits for a line that matches re and returns it. It looks at the lines after
// the one the previous WaitLine returned (from the first line the first time), so that
// successive calls find successive events. It fails with ErrExited if the process ends
// without such a line, or with ctx's error.
func (p *Process) WaitLine(ctx context.Context, re *regexp.Regexp) (string, error) {
	for {
		p.mu.Lock()
		for i := p.next; i < len(p.lines); i++ {
			if text := p.lines[i].Text; re.MatchString(text) {
				p.next = i + 1
				p.mu.Unlock()
				return text, nil
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-p.done:
			// Every line arrived before done closed: one more look, then give up.
			p.mu.Lock()
			found := false
			for i := p.next; i < len(p.lines) && !found; i++ {
				found = re.MatchString(p.lines[i].Text)
			}
			p.mu.Unlock()
			if !found {
				return "", fmt.Errorf("%w: %s (%v) printed no line matching %q", ErrExited, p.name, p.err, re)
			}
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("lab: %s printed no line matching %q: %w", p.name, re, ctx.Err())
		}
	}
}

// Lines returns the output recorded so far.
func (p *Process) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// Output returns the output recorded so far as text, each line with its time since the
// start and its stream.
func (p *Process) Output() string {
	var b strings.Builder
	for _, ln := range p.Lines() {
		stream := "out"
		if ln.Stderr {
			stream = "err"
		}
		fmt.Fprintf(&b, "%8.3fs %s| %s\n", ln.At.Sub(p.start).Seconds(), stream, ln.Text)
	}
	return b.String()
}

// Pid returns the program's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// String returns host:program, for messages.
func (p *Process) String() string { return p.name }

// Done is closed once the program has exited and its output is recorded.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the program to exit and returns how it exited (nil for status 0), or
// ctx's error.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop sends SIGTERM, waits up to 5 s, then sends SIGKILL, and returns how the program
// exited (nil for status 0), as Wait does. Stopping an ended program returns at once.
func (p *Process) Stop() error {
	stopAll([]*Process{p})
	return p.err
}

// stopAll stops every process at once: SIGTERM to all, then SIGKILL to those still
// running after their grace.
func stopAll(procs []*Process) {
	for _, p := range procs {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	longest := time.Duration(0)
	for _, p := range procs {
		longest = max(longest, p.grace)
	}
	timer := time.NewTimer(longest)
	defer timer.Stop()
	expired := false
	for _, p := range procs {
		if !expired {
			select {
			case <-p.done:
				continue
			case <-timer.C:
				expired = true
			}
		}
		_ = p.cmd.Process.Kill() // does nothing to a process already reaped
		<-p.done
	}
}

package deadline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestDeadline(t *testing.T) {
	var d Deadline
	if d.Passed() || !d.When().IsZero() {
		t.Fatalf("zero value: passed %v, when %v; want no deadline", d.Passed(), d.When())
	}
	future := time.Now().Add(time.Hour)
	d.Set(future)
	if d.Passed() {
		t.Fatal("a deadline an hour away has passed")
	}
	if got := d.When(); !got.Equal(future) {
		t.Fatalf("When = %v, want %v", got, future)
	}
	d.Set(time.Now().Add(-time.Millisecond))
	if !d.Passed() {
		t.Fatal("a deadline in the past has not passed")
	}
	d.Set(time.Unix(1, 0)) // wall clock only, as net.Conn users set "now" deadlines
	if !d.Passed() {
		t.Fatal("time.Unix(1, 0) has not passed")
	}
	d.Set(clockStart) // offset 0 must not read as none
	if !d.Passed() || d.When().IsZero() {
		t.Fatal("a deadline at the clock's origin reads as none")
	}
	d.Set(time.Time{})
	if d.Passed() || !d.When().IsZero() {
		t.Fatal("the zero time did not clear the deadline")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestTimedOut(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{os.ErrDeadlineExceeded, true},
		{fmt.Errorf("reading: %w", os.ErrDeadlineExceeded), true},
		{timeoutErr{}, true},
		{context.DeadlineExceeded, true}, // it is a net.Error with Timeout true
		{errors.New("boom"), false},
		{nil, false},
	} {
		if got := TimedOut(c.err); got != c.want {
			t.Errorf("TimedOut(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Package testutil holds helpers shared by tendril's tests: its packages, commands and examples.
package testutil

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a program may write to while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

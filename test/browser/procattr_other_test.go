//go:build !linux

package browser_test

import "os/exec"

// setDeathSignal does nothing where there is no parent-death signal: the test's cleanups
// stop the chat nodes.
func setDeathSignal(cmd *exec.Cmd) {}

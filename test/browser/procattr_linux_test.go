package browser_test

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill cmd if the test process dies without its cleanups
// (a panic, go test's timeout), so that no chat node outlives the test.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

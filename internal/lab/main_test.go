//go:build linux

package lab

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childEnv makes the test binary act as a small program for the lab's processes (see
// runChild) instead of running tests; childArg is that program's argument.
const (
	childEnv = "TENDRIL_LAB_TEST_CHILD"
	childArg = "TENDRIL_LAB_TEST_ARG"
)

// TestMain runs a child program when asked to, and otherwise the tests, failing them if
// any goroutine outlives them.
func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode, os.Getenv(childArg)))
	}
	goleak.VerifyTestMain(m)
}

// runChild is the program the test binary becomes under childEnv:
//
//	echo ADDR   listens on ADDR, prints "listening on ADDR", echoes every connection
//	cat         prints "got: LINE" for each line of stdin; exits 0 at its end or on SIGTERM
//	stubborn    prints "ready", ignores SIGTERM and sleeps
//	long N      prints a line of N x's, then "after" on stderr, and exits 3
func runChild(mode, arg string) int {
	switch mode {
	case "echo":
		ln, err := net.Listen("tcp", arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("listening on %s\n", ln.Addr())
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				fmt.Printf("connection from %s\n", c.RemoteAddr())
				_, _ = io.Copy(c, c)
			}()
		}
	case "cat":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			fmt.Println("terminated")
			os.Exit(0)
		}()
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Printf("got: %s\n", sc.Text())
		}
		fmt.Fprintln(os.Stderr, "stdin closed")
		return 0
	case "long":
		n, _ := strconv.Atoi(arg)
		fmt.Println(strings.Repeat("x", n))
		fmt.Fprint(os.Stderr, "after") // no newline: the last line ends with the output
		return 3
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 2
}

// Command tendril is the tendril command-line tool: identities, a responder, ping and a
// throughput benchmark against any tendril node that runs `tendril listen`.
//
//	tendril keygen -o node.key            create an identity (refuses to overwrite without -f)
//	tendril id node.key                   print its peer ID (also: id -key node.key)
//	tendril listen -key node.key ADDR     answer pings and bench streams on ADDR
//	tendril ping [-c 5] ADDR              handshake time and round-trip times
//	tendril bench [-t 5s] [-streams 4] ADDR   throughput over K streams
//	tendril version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type command struct {
	name, usage, summary string
	run                  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"keygen", "keygen -o FILE [-f]", "create an identity key file", cmdKeygen},
	{"id", "id [-key] FILE", "print the peer ID of a key file", cmdID},
	{"listen", "listen [-key FILE] ADDR", "run a responder for ping and bench on ADDR", cmdListen},
	{"ping", "ping [-c N] [-i DURATION] [-size N] ADDR", "measure handshake and round-trip times", cmdPing},
	{"bench", "bench [-t DURATION] [-streams K] [-size N] ADDR", "measure throughput over K streams", cmdBench},
	{"version", "version", "print the version", cmdVersion},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tendril COMMAND [flags] [args]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-50s %s\n", c.usage, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'tendril COMMAND -h' for a command's flags.")
}

// run executes one command and returns the process exit code: 0 on success, 2 for usage
// errors, 1 for everything else.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "tendril %s: %v\nusage: tendril %s\n", c.name, err, c.usage)
			return 2
		default:
			fmt.Fprintf(stderr, "tendril %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "tendril: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

var errUsage = errors.New("usage error")

func newFlags(name, usageLine string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tendril %s\n", usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags and wants exactly nargs positional arguments.
func parse(fs *flag.FlagSet, args []string, nargs int) error {
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	if fs.NArg() != nargs {
		return fmt.Errorf("%w: want %d argument(s), got %d", errUsage, nargs, fs.NArg())
	}
	return nil
}

// parseErr turns a flag parsing error into a usage error, except a request for help.
func parseErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// isTerminal reports whether w is a terminal (a character device), where redrawing a line
// with \r shows progress; a pipe or a file would keep every redraw.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

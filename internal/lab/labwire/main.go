//go:build linux

// Command labwire is the lab's delay line: it copies every Ethernet frame between two
// interfaces of its network namespace, each after a fixed delay, which the lab uses to
// delay a link (lab.Link.Delay) where the kernel has no netem.
//
//	labwire -delay 25ms IFACE1 IFACE2
//
// It reads each interface with a raw packet socket that carries the kernel's virtio-net
// header, so that large segments (GSO) and checksums still to be filled in pass through
// unchanged; a frame waits in a queue of its direction until its time comes, in order,
// and a frame that finds the queue full is dropped, as a router's would be. It prints
// "wire up" once both sockets are open, and runs until it is killed.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// queueLen bounds the frames in flight per direction: at 10 Gbit/s of 1500-byte frames
// that is 10 ms, and far more at the rates tests use.
const queueLen = 8192

// maxFrame is the largest frame read: a GSO segment of 64 KiB with its headers and the
// virtio-net header, with room to spare.
const maxFrame = 256 << 10

type frame struct {
	due  time.Time
	data []byte
}

func main() {
	delay := flag.Duration("delay", 0, "how long each frame waits, in each direction")
	flag.Parse()
	if flag.NArg() != 2 || *delay < 0 {
		fmt.Fprintln(os.Stderr, "usage: labwire -delay D IFACE1 IFACE2")
		os.Exit(2)
	}
	a, err := open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	b, err := open(flag.Arg(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("wire up")
	errs := make(chan error, 2)
	go func() { errs <- line(a, b, *delay) }()
	go func() { errs <- line(b, a, *delay) }()
	fmt.Fprintln(os.Stderr, <-errs)
	os.Exit(1)
}

// open returns a raw packet socket bound to the named interface that sees every frame
// arriving there (not those it sends), with the virtio-net header.
func open(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, err
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return -1, err
	}
	for _, o := range []struct{ opt, v int }{
		{unix.PACKET_VNET_HDR, 1},
		{unix.PACKET_IGNORE_OUTGOING, 1},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, o.v); err != nil {
			return -1, fmt.Errorf("%s: setsockopt %d: %w", name, o.opt, err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); err != nil {
		return -1, err
	}
	mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
		return -1, fmt.Errorf("%s: promiscuous: %w", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return -1, fmt.Errorf("%s: bind: %w", name, err)
	}
	return fd, nil
}

// line carries frames from the socket in to the socket out, each delay after it arrived.
func line(in, out int, delay time.Duration) error {
	q := make(chan frame, queueLen)
	go func() {
		for f := range q {
			if d := time.Until(f.due); d > 0 {
				time.Sleep(d)
			}
			// A frame the kernel refuses (no buffer, interface down) is lost, as on a
			// wire.
			_, _ = unix.Write(out, f.data)
		}
	}()
	buf := make([]byte, maxFrame)
	for {
		n, err := unix.Read(in, buf)
		if err != nil {
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			close(q)
			return fmt.Errorf("read: %w", err)
		}
		f := frame{due: time.Now().Add(delay), data: append([]byte(nil), buf[:n]...)}
		select {
		case q <- f:
		default: // the queue is full: drop
		}
	}
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

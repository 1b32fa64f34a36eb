package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
)

// echoName is a request protocol every punchnode answers, for -ping.
const echoName = "/punchnode/echo"

func echoProtocol() tendril.Protocol {
	return tendril.Protocol{Name: echoName, Versions: []string{"1"},
		RequestHandler: tendril.RequestHandlerFunc(func(_ *tendril.Context, req []byte) ([]byte, error) { return req, nil })}
}

func newService() (*tendril.Service, error) {
	key, err := secio.GenerateKey()
	if err != nil {
		return nil, err
	}
	return tendril.New(tendril.Config{PrivateKey: key, Protocols: []tendril.Protocol{echoProtocol()}})
}

// runPing keeps a session with addr and prints, every interval, the median and the worst
// of the 64-byte echo round trips in it: "PING median=D max=D n=N", until SIGTERM.
func runPing(addr string, every time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	svc, err := newService()
	if err != nil {
		return err
	}
	defer svc.Close()
	a, err := tendril.ParseAddr(addr)
	if err != nil {
		return err
	}
	s, err := svc.Dial(ctx, a)
	if err != nil {
		return err
	}
	msg := make([]byte, 64)
	var rtts []time.Duration
	next := time.Now().Add(every)
	for ctx.Err() == nil {
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.Request(rctx, echoName, msg)
		cancel()
		if err != nil {
			fmt.Println("PING error", err)
			return nil
		}
		rtts = append(rtts, time.Since(start))
		time.Sleep(10 * time.Millisecond)
		if time.Now().After(next) {
			slices.Sort(rtts)
			fmt.Printf("PING median=%s max=%s n=%d\n", rtts[len(rtts)/2], rtts[len(rtts)-1], len(rtts))
			rtts, next = rtts[:0], time.Now().Add(every)
		}
	}
	return nil
}

// runAttack floods and prints one line "ATTACK kind ..." with what it got, then exits.
func runAttack(kind, target, circuit string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	switch kind {
	case "reservations":
		// n identities, each with its own session, ask the relay for a reservation.
		ra, err := tendril.ParseAddr(target)
		if err != nil {
			return err
		}
		var held, refused, limited, other atomic.Int64
		var firstOther atomic.Value
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for range n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				svc, err := newService()
				if err != nil {
					other.Add(1)
					return
				}
				defer svc.Close()
				cl, err := relay.NewClient(svc, relay.ClientConfig{})
				if err != nil {
					other.Add(1)
					return
				}
				defer cl.Close()
				_, err = cl.Reserve(ctx, ra)
				switch {
				case err == nil:
					held.Add(1)
					<-ctx.Done() // hold it until the attack ends
				case errors.Is(err, relay.ErrReservationRefused):
					refused.Add(1)
				case errors.Is(err, relay.ErrRateLimited):
					limited.Add(1)
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
			})
		}
		// Report once every request has been answered; the held ones stay until exit.
		for held.Load()+refused.Load()+limited.Load()+other.Load() < int64(n) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Printf("ATTACK reservations held=%d refused=%d ratelimited=%d other=%d took=%s first other: %v\n",
			held.Load(), refused.Load(), limited.Load(), other.Load(), time.Since(start).Round(time.Millisecond), firstOther.Load())
		cancel()
		wg.Wait()
	case "circuits", "data":
		c, err := relay.ParseCircuit(circuit)
		if err != nil {
			return err
		}
		svc, err := newService()
		if err != nil {
			return err
		}
		defer svc.Close()
		if kind == "data" {
			conn, err := relay.DialConn(ctx, svc, c)
			if err != nil {
				return err
			}
			buf := make([]byte, 16<<10)
			var sent int64
			conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
			for {
				k, err := conn.Write(buf)
				sent += int64(k)
				if err != nil {
					fmt.Printf("ATTACK data sent=%d took=%s err=%v\n", sent, time.Since(start).Round(time.Millisecond), err)
					break
				}
			}
			conn.Close()
			return nil
		}
		// One session with the relay first: concurrent dials would each make one, and the
		// duplicate rule would close all but one, and their streams with them.
		if _, err := svc.Dial(ctx, c.Relay); err != nil {
			return err
		}
		var open, refused, other atomic.Int64
		var firstOther atomic.Value
		var wg sync.WaitGroup
		var mu sync.Mutex
		var conns []*relay.Conn
		for range n {
			wg.Go(func() {
				conn, err := relay.DialConn(ctx, svc, c)
				switch {
				case err == nil:
					open.Add(1)
					mu.Lock()
					conns = append(conns, conn)
					mu.Unlock()
				case errors.Is(err, relay.ErrResourceLimit), errors.Is(err, relay.ErrRateLimited):
					refused.Add(1)
				default:
					other.Add(1)
					firstOther.CompareAndSwap(nil, err.Error())
				}
			})
		}
		wg.Wait()
		fmt.Printf("ATTACK circuits open=%d refused=%d other=%d took=%s first other: %v\n", open.Load(), refused.Load(), other.Load(), time.Since(start).Round(time.Millisecond), firstOther.Load())
		for _, c := range conns {
			c.Close()
		}
	default:
		return fmt.Errorf("-attack %q: reservations, circuits or data", kind)
	}
	return nil
}

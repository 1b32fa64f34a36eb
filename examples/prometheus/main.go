// Command prometheus runs a tendril node and exports its counters (Service.Stats) to
// Prometheus on /metrics. It is its own Go module, so that the library's go.mod never gains
// the Prometheus client.
//
//	go run . -listen /ip4/127.0.0.1/tcp/4001 -metrics 127.0.0.1:9100
//	curl -s 127.0.0.1:9100/metrics | grep tendril_
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tendril-p2p/tendril"
)

func main() {
	listen := flag.String("listen", "/ip4/127.0.0.1/tcp/0", "tendril address to listen on")
	metrics := flag.String("metrics", "127.0.0.1:9100", "host:port of the /metrics HTTP endpoint")
	flag.Parse()
	if err := run(*listen, *metrics); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

func run(listen, metrics string) error {
	addr, err := tendril.ParseAddr(listen)
	if err != nil {
		return err
	}
	echo := tendril.HandlerFuncs{OnReceived: func(c *tendril.Context, msg []byte) { c.Send(msg) }}
	svc, err := tendril.New(tendril.Config{Protocols: []tendril.Protocol{{Name: "/echo", Versions: []string{"1.0"}, Handler: echo}}})
	if err != nil {
		return err
	}
	defer svc.Close()
	bound, err := svc.Listen(context.Background(), addr)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(svc))
	srv := &http.Server{Addr: metrics, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	log.Printf("tendril node %s on %s, metrics on http://%s/metrics", svc.ID(), bound, metrics)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

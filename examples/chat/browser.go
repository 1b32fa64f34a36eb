//go:build js && wasm

// The browser peer: this package built for GOOS=js GOARCH=wasm, which `chat -web` builds
// and serves with its page (web/). It is the same chat node as the native peers (chat.go:
// protocol, versions, relaying), with the WebSocket transport only, since a page can
// neither listen nor open TCP connections; it dials the node that served the page and
// draws the chat in the page from Go.
//
// Its identity is fresh at every page load (Config.PrivateKey nil). A key kept in the
// page's storage would be readable by any script that ever runs on the origin, and the
// chat needs no stable identity: nicks are what people read.

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall/js"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/ws"
)

// dialTimeout bounds the browser peer's Dial: the WebSocket, the handshake and the chat
// protocol's opening.
const dialTimeout = 30 * time.Second

func main() {
	p := newPage()
	if err := runBrowser(p, os.Args[1:]); err != nil {
		p.fail(err)
		return
	}
	// The page's handlers are Go functions: the program must outlive main's work. With
	// every goroutine waiting, the runtime yields to the browser's event loop.
	select {}
}

// runBrowser starts the browser peer and returns once it is connected (its handlers keep
// running), or the reason it could not.
func runBrowser(p *page, args []string) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	peer := fs.String("peer", "", "peer ID of the node that served the page")
	name := fs.String("name", "", "nick shown to others (default: from the peer ID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	href := js.Global().Get("location").Get("href").String()
	addr, err := pageAddr(href, *peer)
	if err != nil {
		return err
	}

	n := newNode(*name, p)
	n.bare = true
	n.onPeers = func() { p.showPeers(n.connected()) }
	svc, err := tendril.New(tendril.Config{
		Transports: []transport.Transport{ws.New(nil)},
		Protocols:  []tendril.Protocol{chatProtocol(n)},
	})
	if err != nil {
		return err
	}
	n.svc = svc
	if n.name == "" {
		n.name = short(svc.ID().String())
	}
	p.showSelf(n.name, svc.ID().String())
	go logEvents(svc, n)

	p.setState("connecting", "Connecting to "+addr.String()+"\u2026")
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	start := time.Now()
	sess, err := svc.Dial(ctx, addr)
	took := time.Since(start)
	if err != nil {
		svc.Close()
		return err
	}
	ms := float64(took.Microseconds()) / 1000
	p.body.Get("dataset").Set("dialMs", strconv.FormatFloat(ms, 'f', 1, 64))
	p.setState("connected", fmt.Sprintf("Connected to %s in %.0f ms (WebSocket, secio handshake, chat protocol).",
		short(addr.Peer.String()), ms))
	p.onSubmit(func(text string) {
		n.printf("<%s> %s", n.name, text)
		if n.say(text) == 0 {
			n.printf("no peer connected: line not sent")
		}
	})
	go func() {
		<-sess.Done()
		p.setState("closed", "Disconnected from the node: reload the page to join again.")
		p.disableInput()
		svc.Close()
	}()
	return nil
}

// page is the chat's DOM (web/index.html), drawn from Go. It is also the node's output:
// each line written to it is a line of the log.
type page struct {
	body, status, log, self, peers, form, input, send js.Value
}

func newPage() *page {
	doc := js.Global().Get("document")
	el := func(id string) js.Value { return doc.Call("getElementById", id) }
	return &page{
		body: doc.Get("body"), status: el("status"), log: el("log"), self: el("self"),
		peers: el("peers"), form: el("say"), input: el("line"), send: el("send"),
	}
}

// setState sets the state that body's data-state says (tests wait on it) and the status line.
func (p *page) setState(state, status string) {
	p.body.Get("dataset").Set("state", state)
	p.status.Set("textContent", status)
}

// fail shows why the browser peer could not start, in the page and in data-error.
func (p *page) fail(err error) {
	p.body.Get("dataset").Set("error", err.Error())
	p.setState("failed", "The browser peer failed: "+err.Error())
}

// Write appends each line of b to the log; chat lines ("<nick> text") stand out from the
// notices (joins, leaves, sessions).
func (p *page) Write(b []byte) (int, error) {
	doc := js.Global().Get("document")
	for line := range strings.SplitSeq(strings.TrimRight(string(b), "\n"), "\n") {
		div := doc.Call("createElement", "div")
		if !strings.HasPrefix(line, "<") {
			div.Set("className", "notice")
		}
		div.Set("textContent", line)
		p.log.Call("appendChild", div)
	}
	p.log.Set("scrollTop", p.log.Get("scrollHeight"))
	return len(b), nil
}

// showSelf shows this peer's nick and ID, and puts the ID in body's data-peer-id.
func (p *page) showSelf(name, id string) {
	p.body.Get("dataset").Set("peerId", id)
	p.self.Set("textContent", name+" \u2014 "+id)
}

// showPeers redraws the list of connected peers; each item's data-peer is the peer's ID.
func (p *page) showPeers(peers []peerInfo) {
	doc := js.Global().Get("document")
	p.peers.Set("textContent", "")
	for _, pi := range peers {
		li := doc.Call("createElement", "li")
		li.Get("dataset").Set("peer", pi.id)
		label := pi.id
		if pi.nick != "" {
			label = pi.nick + " \u2014 " + pi.id
		}
		li.Set("textContent", label)
		p.peers.Call("appendChild", li)
	}
}

// onSubmit enables the input and calls say with each line submitted. say runs on a
// goroutine of its own: a browser event handler must return before Go code that waits
// (a Send, a lock) can go on.
func (p *page) onSubmit(say func(text string)) {
	p.form.Call("addEventListener", "submit", js.FuncOf(func(this js.Value, args []js.Value) any {
		args[0].Call("preventDefault")
		text := strings.TrimSpace(p.input.Get("value").String())
		p.input.Set("value", "")
		if text != "" {
			go say(text)
		}
		return nil
	}))
	p.input.Set("disabled", false)
	p.send.Set("disabled", false)
	p.input.Call("focus")
}

func (p *page) disableInput() {
	p.input.Set("disabled", true)
	p.send.Set("disabled", true)
}

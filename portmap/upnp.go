package portmap

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/huin/goupnp"
	"github.com/huin/goupnp/dcps/internetgateway2"
	"github.com/huin/goupnp/soap"
)

// UPnP IGD error codes (WANIPConnection:2 service specification, section 2.5).
const (
	upnpNotAuthorized       = 606
	upnpNoSuchEntry         = 714
	upnpConflict            = 718
	upnpSamePortValues      = 724
	upnpOnlyPermanentLeases = 725
	upnpActionNotAuthorized = 729
)

const (
	// upnpRandomTries is how many random external ports are tried after the gateway
	// refused the same port (and, on IGDv2, AddAnyPortMapping).
	upnpRandomTries = 3
	// upnpMaxServices caps the WAN connection services of one description we try.
	upnpMaxServices = 4
)

// The WAN connection services, most capable first. IGDv2's WANIPConnection:2 has
// AddAnyPortMapping; WANPPPConnection:1 is what DSL routers expose.
var upnpServiceTypes = []string{
	internetgateway2.URN_WANIPConnection_2,
	internetgateway2.URN_WANIPConnection_1,
	internetgateway2.URN_WANPPPConnection_1,
}

// igdClient is what the three goupnp service clients have in common.
type igdClient interface {
	AddPortMappingCtx(ctx context.Context, remoteHost string, extPort uint16, proto string, intPort uint16, intClient string, enabled bool, desc string, lease uint32) error
	DeletePortMappingCtx(ctx context.Context, remoteHost string, extPort uint16, proto string) error
	GetExternalIPAddressCtx(ctx context.Context) (string, error)
}

// anyPortClient is IGDv2's addition.
type anyPortClient interface {
	AddAnyPortMappingCtx(ctx context.Context, remoteHost string, extPort uint16, proto string, intPort uint16, intClient string, enabled bool, desc string, lease uint32) (uint16, error)
}

// upnpBackend maps one port on one IGD service.
type upnpBackend struct {
	gw       netip.Addr
	local    netip.Addr // our address on the gateway's network: the mapping's target
	client   igdClient
	proto    string // "TCP" or "UDP", as UPnP spells them
	internal uint16
	desc     string
	lease    time.Duration
	// permanent is set once the gateway said it only grants lease 0 (error 725).
	permanent bool
}

func (b *upnpBackend) method() Method      { return UPnP }
func (b *upnpBackend) gateway() netip.Addr { return b.gw }

// call runs one SOAP action and translates its failure.
func (b *upnpBackend) call(ctx context.Context, name string, f func(context.Context) error) error {
	ctx, note := withNote(ctx)
	err := f(ctx)
	if err == nil {
		return nil
	}
	var fault *soap.SOAPFaultError
	if errors.As(err, &fault) {
		return &GatewayError{Method: UPnP, Code: fault.Detail.UPnPError.Errorcode}
	}
	if ctx.Err() != nil && !note.timeout.Load() {
		return ctx.Err()
	}
	return note.err(name, err)
}

func (b *upnpBackend) externalIP(ctx context.Context) (netip.Addr, error) {
	var s string
	err := b.call(ctx, "GetExternalIPAddress", func(ctx context.Context) (err error) {
		s, err = b.client.GetExternalIPAddressCtx(ctx)
		return err
	})
	if err != nil {
		return netip.Addr{}, err
	}
	ip, perr := netip.ParseAddr(strings.TrimSpace(s))
	if perr != nil {
		return netip.Addr{}, fmt.Errorf("%w: upnp external address %.64q", ErrBadExternalAddr, s)
	}
	return ip.Unmap(), nil
}

// addPort asks for ext; it retries once with a permanent lease if the gateway grants
// no other kind.
func (b *upnpBackend) addPort(ctx context.Context, ext uint16) error {
	for {
		lease := uint32(b.lease / time.Second)
		if b.permanent {
			lease = 0
		}
		err := b.call(ctx, "AddPortMapping", func(ctx context.Context) error {
			return b.client.AddPortMappingCtx(ctx, "", ext, b.proto, b.internal, b.local.String(), true, b.desc, lease)
		})
		if code(err) == upnpOnlyPermanentLeases && !b.permanent {
			b.permanent = true
			continue
		}
		return err
	}
}

func code(err error) int {
	var ge *GatewayError
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

// add makes or renews the mapping: prev (or the internal port) first; if the gateway
// says the port is taken, AddAnyPortMapping on IGDv2, then a few random ports.
func (b *upnpBackend) add(ctx context.Context, prev uint16) (netip.AddrPort, time.Duration, error) {
	ip, err := b.externalIP(ctx)
	if err != nil {
		return netip.AddrPort{}, 0, err
	}
	// Known before mapping, unlike NAT-PMP's: ask for nothing that would be useless.
	if _, err := checkExternal(ip); err != nil {
		return netip.AddrPort{}, 0, err
	}
	want := prev
	if want == 0 {
		want = b.internal
	}
	ext, err := b.place(ctx, want)
	if err != nil {
		return netip.AddrPort{}, 0, err
	}
	lease := b.lease
	if b.permanent {
		lease = 0
	}
	return netip.AddrPortFrom(ip, ext), lease, nil
}

func (b *upnpBackend) place(ctx context.Context, want uint16) (uint16, error) {
	err := b.addPort(ctx, want)
	if err == nil {
		return want, nil
	}
	if code(err) != upnpConflict {
		return 0, err
	}
	if anyc, ok := b.client.(anyPortClient); ok {
		var got uint16
		lease := uint32(b.lease / time.Second)
		err = b.call(ctx, "AddAnyPortMapping", func(ctx context.Context) (err error) {
			got, err = anyc.AddAnyPortMappingCtx(ctx, "", want, b.proto, b.internal, b.local.String(), true, b.desc, lease)
			return err
		})
		if err == nil {
			if got == 0 {
				return 0, fmt.Errorf("%w: upnp AddAnyPortMapping reserved port 0", ErrBadResponse)
			}
			return got, nil
		}
		if !errors.Is(err, ErrRefused) {
			return 0, err
		}
	}
	for range upnpRandomTries {
		p := uint16(1024 + rand.IntN(65536-1024))
		if err = b.addPort(ctx, p); err == nil {
			return p, nil
		}
		if code(err) != upnpConflict {
			return 0, err
		}
	}
	return 0, err
}

func (b *upnpBackend) remove(ctx context.Context, ext uint16) error {
	return b.call(ctx, "DeletePortMapping", func(ctx context.Context) error {
		return b.client.DeletePortMappingCtx(ctx, "", ext, b.proto)
	})
}

// upnpFromURL reads the device description at loc (served by host) and returns a
// backend on its first WAN connection service that answers GetExternalIPAddress.
func upnpFromURL(ctx context.Context, cfg *Config, loc *url.URL, host netip.Addr) (*upnpBackend, error) {
	root, err := fetchDescription(ctx, cfg.RequestTimeout, loc, host)
	if err != nil {
		return nil, err
	}
	local, err := localAddrToward(host)
	if err != nil {
		return nil, err
	}
	soapClient := newGatewayClient(host, cfg.RequestTimeout, maxSOAPBytes)
	proto := strings.ToUpper(cfg.Protocol)
	var errs []error
	tried := 0
	for _, st := range upnpServiceTypes {
		for _, srv := range root.Device.FindService(st) {
			if tried++; tried > upnpMaxServices {
				break
			}
			u := srv.ControlURL.URL
			if ip, err := netip.ParseAddr(u.Hostname()); !srv.ControlURL.Ok || err != nil || ip.Unmap() != host || u.Scheme != "http" {
				errs = append(errs, fmt.Errorf("%w: control URL %.128q", ErrUntrustedGateway, srv.ControlURL.Str))
				continue
			}
			sc := goupnp.ServiceClient{SOAPClient: srv.NewSOAPClient(), RootDevice: root, Location: loc, Service: srv}
			sc.SOAPClient.HTTPClient = *soapClient
			var client igdClient
			switch st {
			case internetgateway2.URN_WANIPConnection_2:
				client = &internetgateway2.WANIPConnection2{ServiceClient: sc}
			case internetgateway2.URN_WANIPConnection_1:
				client = &internetgateway2.WANIPConnection1{ServiceClient: sc}
			default:
				client = &internetgateway2.WANPPPConnection1{ServiceClient: sc}
			}
			b := &upnpBackend{gw: host, local: local, client: client, proto: proto,
				internal: uint16(cfg.InternalPort), desc: cfg.Description, lease: cfg.lease(UPnP)}
			// A device may list a WAN service per connection, some of them down: take one
			// that knows its external address.
			if _, err := b.externalIP(ctx); err != nil {
				errs = append(errs, err)
				continue
			}
			return b, nil
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: upnp device at %s has no WAN connection service", ErrNoGateway, host)
	}
	return nil, errors.Join(errs...)
}

// fetchDescription GETs and decodes a device description, within the caps.
func fetchDescription(ctx context.Context, timeout time.Duration, loc *url.URL, host netip.Addr) (*goupnp.RootDevice, error) {
	ctx, note := withNote(ctx)
	hc := newGatewayClient(host, timeout, maxDescriptionBytes)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: upnp description URL: %v", ErrBadResponse, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil && !note.timeout.Load() {
			return nil, ctx.Err()
		}
		return nil, note.err("description", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: upnp description: HTTP %d", ErrBadResponse, resp.StatusCode)
	}
	root := new(goupnp.RootDevice)
	dec := xml.NewDecoder(resp.Body)
	dec.DefaultSpace = goupnp.DeviceXMLNamespace
	if err := dec.Decode(root); err != nil {
		return nil, note.err("description", err)
	}
	base := loc
	if root.URLBaseStr != "" {
		// URLBase is deprecated since UPnP 1.1 but still honoured: it must stay on the host
		// that served the description.
		u, err := url.Parse(root.URLBaseStr)
		if err != nil {
			return nil, fmt.Errorf("%w: upnp URLBase: %v", ErrBadResponse, err)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err != nil || ip.Unmap() != host {
			return nil, fmt.Errorf("%w: URLBase %.128q", ErrUntrustedGateway, root.URLBaseStr)
		}
		base = u
	}
	root.SetURLBase(base)
	return root, nil
}

// localAddrToward returns the local address the kernel would use to reach gw (a UDP
// connect sends nothing).
func localAddrToward(gw netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 9)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: no route to %s: %w", ErrUnreachable, gw, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

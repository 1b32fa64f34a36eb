package portmap_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	urnIP2  = "urn:schemas-upnp-org:service:WANIPConnection:2"
	urnIP1  = "urn:schemas-upnp-org:service:WANIPConnection:1"
	urnPPP1 = "urn:schemas-upnp-org:service:WANPPPConnection:1"
)

// igdCall is a SOAP action a fake IGD received.
type igdCall struct {
	action string
	ext    int
	lease  int
	client string
	desc   string
}

// fakeIGD is a UPnP Internet Gateway Device on an httptest server: a device description
// and a SOAP control URL for one WAN connection service. Its behaviour is set through
// its fields under mu.
type fakeIGD struct {
	srv *httptest.Server

	mu            sync.Mutex
	service       string        // service type; default WANIPConnection:2
	extIP         string        // GetExternalIPAddress answer
	taken         map[int]bool  // external ports that conflict (718)
	onlyPermanent bool          // refuse leases other than 0 (725)
	anyPort       int           // AddAnyPortMapping's answer
	controlURL    string        // in the description; default "/ctl"
	urlBase       string        // URLBase element, if set
	description   func() []byte // replaces the description
	soapDelay     time.Duration // before each SOAP answer
	soapPad       int           // bytes of padding in each SOAP answer
	redirect      string        // description answers 302 to this
	calls         []igdCall
	descFetches   int
}

func newFakeIGD(t *testing.T) *fakeIGD {
	t.Helper()
	f := &fakeIGD{service: urnIP2, extIP: "203.0.113.7", taken: map[int]bool{}, anyPort: 50000, controlURL: "/ctl"}
	mux := http.NewServeMux()
	mux.HandleFunc("/rootDesc.xml", f.serveDescription)
	mux.HandleFunc("/ctl", f.serveControl)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIGD) rootURL() string { return f.srv.URL + "/rootDesc.xml" }

func (f *fakeIGD) set(fn func(f *fakeIGD)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeIGD) log() []igdCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]igdCall(nil), f.calls...)
}

func (f *fakeIGD) serveDescription(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.descFetches++
	desc, redirect := f.description, f.redirect
	base := ""
	if f.urlBase != "" {
		base = "<URLBase>" + f.urlBase + "</URLBase>"
	}
	body := fmt.Sprintf(`<?xml version="1.0"?>
<root xmlns="urn:schemas-upnp-org:device-1-0"><specVersion><major>1</major><minor>0</minor></specVersion>%s
<device><deviceType>urn:schemas-upnp-org:device:InternetGatewayDevice:2</deviceType><friendlyName>fake</friendlyName>
<deviceList><device><deviceType>urn:schemas-upnp-org:device:WANDevice:2</deviceType>
<deviceList><device><deviceType>urn:schemas-upnp-org:device:WANConnectionDevice:2</deviceType>
<serviceList><service><serviceType>%s</serviceType><serviceId>urn:upnp-org:serviceId:WANIPConn1</serviceId>
<SCPDURL>/scpd.xml</SCPDURL><controlURL>%s</controlURL><eventSubURL>/evt</eventSubURL></service></serviceList>
</device></deviceList></device></deviceList></device></root>`, base, f.service, f.controlURL)
	f.mu.Unlock()
	if redirect != "" {
		http.Redirect(w, r, redirect, http.StatusFound)
		return
	}
	if desc != nil {
		w.Write(desc())
		return
	}
	io.WriteString(w, body)
}

// arg extracts one argument from a SOAP request (the fake needs no more than this).
func arg(body, name string) string {
	i := strings.Index(body, "<"+name+">")
	j := strings.Index(body, "</"+name+">")
	if i < 0 || j < i {
		return ""
	}
	return body[i+len(name)+2 : j]
}

func (f *fakeIGD) serveControl(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	body := string(b)
	soapAction := strings.Trim(r.Header.Get("SOAPACTION"), `"`)
	svc, action, _ := strings.Cut(soapAction, "#")
	ext, _ := strconv.Atoi(arg(body, "NewExternalPort"))
	lease, _ := strconv.Atoi(arg(body, "NewLeaseDuration"))

	f.mu.Lock()
	f.calls = append(f.calls, igdCall{action: action, ext: ext, lease: lease, client: arg(body, "NewInternalClient"), desc: arg(body, "NewPortMappingDescription")})
	delay, pad := f.soapDelay, f.soapPad
	fault, out := 0, ""
	switch action {
	case "GetExternalIPAddress":
		out = "<NewExternalIPAddress>" + f.extIP + "</NewExternalIPAddress>"
	case "AddPortMapping":
		switch {
		case f.taken[ext]:
			fault = 718
		case f.onlyPermanent && lease != 0:
			fault = 725
		}
	case "AddAnyPortMapping":
		if svc != urnIP2 {
			fault = 401
		}
		out = "<NewReservedPort>" + strconv.Itoa(f.anyPort) + "</NewReservedPort>"
	case "DeletePortMapping":
	default:
		fault = 401
	}
	f.mu.Unlock()

	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", `text/xml; charset="utf-8"`)
	padding := "<!--" + strings.Repeat("x", pad) + "-->"
	if fault != 0 {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" s:encodingStyle="http://schemas.xmlsoap.org/soap/encoding/"><s:Body><s:Fault><faultcode>s:Client</faultcode><faultstring>UPnPError</faultstring><detail><UPnPError xmlns="urn:schemas-upnp-org:control-1-0"><errorCode>%d</errorCode><errorDescription>x</errorDescription></UPnPError></detail></s:Fault></s:Body></s:Envelope>%s`, fault, padding)
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/" s:encodingStyle="http://schemas.xmlsoap.org/soap/encoding/"><s:Body>%s<u:%sResponse xmlns:u="%s">%s</u:%sResponse></s:Body></s:Envelope>`, padding, action, svc, out, action)
}

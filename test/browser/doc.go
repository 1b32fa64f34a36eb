// Package browser holds the end-to-end test of the chat's browser peer (examples/chat
// -web): native chat peers and the page, in headless Chromium driven by chromedp, chat
// with each other through one node. It is a module of its own so that chromedp never
// enters tendril's go.mod; `go test ./...` at the root skips it.
//
//	cd test/browser && go test -count=1 -v ./...
//
// Without Chromium the test skips, unless TENDRIL_BROWSER=require (CI), where it fails.
// TENDRIL_BROWSER_SCREENSHOT=FILE also keeps the page's screenshot there.
package browser

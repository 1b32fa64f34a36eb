// Starts the browser peer: asks the node that served this page for its peer ID, then runs
// the Go program (chat.wasm) with it as an argument. The Go program does the rest: it dials
// the node over a WebSocket to this page's own host, and draws the chat in the page.
"use strict";

function fail(message) {
  document.body.dataset.state = "failed";
  document.body.dataset.error = message;
  document.getElementById("status").textContent = message;
}

(async () => {
  try {
    const res = await fetch("node.json", { cache: "no-store" });
    if (!res.ok) {
      throw new Error(`node.json: HTTP ${res.status}`);
    }
    const node = await res.json();
    const go = new Go();
    // ?name=NICK sets the nick shown to others, as -name does natively.
    const name = new URLSearchParams(location.search).get("name") || "";
    go.argv = ["chat", "-peer", node.id, "-name", name];
    const { instance } = await WebAssembly.instantiateStreaming(fetch("chat.wasm"), go.importObject);
    await go.run(instance);
    // The Go program runs as long as the page; it ends only on a failure it has shown
    // already, or on a panic, which it printed to the console.
    if (document.body.dataset.state !== "failed") {
      fail("The browser peer stopped (see the browser's console).");
    }
  } catch (e) {
    fail(`Could not start the browser peer: ${e}`);
  }
})();

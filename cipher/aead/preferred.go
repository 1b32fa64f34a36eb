package aead

import (
	"runtime"

	"github.com/tendril-p2p/tendril/cipher/aesgcm"
	"golang.org/x/sys/cpu"
)

// useVAES selects package aesgcm's vector kernels for the AES suites. It is
// set once at init (aesgcm has read the CPU's features and TENDRIL_AESGCM);
// tests flip it to run both paths.
var useVAES = aesgcm.Implementation() != "stdlib"

// Implementation names the code behind suite s in this process:
// "aesgcm/vaes512" or "aesgcm/vaes256" for the AES suites on package
// aesgcm's vector kernels, "crypto/cipher" for the AES suites on the
// standard library's GCM, "x/crypto/chacha20poly1305" for
// ChaCha20-Poly1305, and "" for an invalid suite.
func Implementation(s Suite) string {
	switch s {
	case AES128GCM, AES256GCM:
		if useVAES {
			return "aesgcm/" + aesgcm.Implementation()
		}
		return "crypto/cipher"
	case ChaCha20Poly1305:
		return "x/crypto/chacha20poly1305"
	}
	return ""
}

// hasAESHW is read once at init; tests flip it to check both orders.
var hasAESHW = detectAESHardware()

// detectAESHardware reports whether AES and carry-less multiplication (the
// GHASH of GCM) run in constant-time hardware instructions that Go's AES-GCM
// uses, following the checks of crypto/tls.
func detectAESHardware() bool {
	switch runtime.GOARCH {
	case "amd64", "386":
		return cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ
	case "arm64":
		return cpu.ARM64.HasAES && cpu.ARM64.HasPMULL
	case "s390x":
		return cpu.S390X.HasAES && cpu.S390X.HasAESCTR &&
			(cpu.S390X.HasGHASH || cpu.S390X.HasAESGCM)
	case "ppc64", "ppc64le":
		// Go's AES-GCM assembly for POWER needs POWER8 (vcipher, vpmsumd).
		return cpu.PPC64.IsPOWER8
	}
	return false
}

// HasAESHardware reports whether this CPU has instructions for both AES and
// the carry-less multiply used by GCM (amd64: AES-NI and PCLMULQDQ; arm64:
// AES and PMULL; s390x: CPACF AES with GHASH or KMA; ppc64: POWER8 crypto).
// Without them AES-GCM falls back to software that is slow and whose table
// lookups leak timing, so ChaCha20-Poly1305 is preferred.
func HasAESHardware() bool {
	return hasAESHW
}

// Preferred returns every suite in the order this node offers them: with
// AES hardware AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305; without it
// ChaCha20-Poly1305, AES-128-GCM, AES-256-GCM. Each call returns a new slice
// that the caller may modify.
func Preferred() []Suite {
	if hasAESHW {
		return []Suite{AES128GCM, AES256GCM, ChaCha20Poly1305}
	}
	return []Suite{ChaCha20Poly1305, AES128GCM, AES256GCM}
}

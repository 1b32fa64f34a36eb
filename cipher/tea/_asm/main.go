// Command _asm generates the amd64 assembly of package tea with avo:
//
//	go run . -out ../tea_amd64.s -stubs ../tea_stub_amd64.go -pkg tea
//
// Kernels:
//   - encryptChainAsm / decryptChainAsm: one message, scalar, with the
//     half-round dependency chain shortened to four operations.
//   - encryptLanesAVX2 / decryptLanesAVX2: 8 messages in the 32-bit lanes of
//     YMM registers.
//   - encryptLanesAVX512 / decryptLanesAVX512: 16 messages as two groups of
//     8 lanes in EVEX-encoded YMM registers, with VPTERNLOGD for the
//     three-way XOR; block words staged through general-purpose registers
//     (MOVBE) during the rounds instead of vector shuffles.
//   - encryptBlocksAVX512 / decryptBlocksAVX512 / encryptBlocksAVX2 /
//     decryptBlocksAVX2: 16 independent blocks (no chaining), for the first
//     blocks that Encrypt takes from a reserve and the header blocks that
//     DecryptBatch deciphers before the lanes run.
//
// The function signatures are given explicitly so that the generator never
// imports package tea.
package main

import (
	. "github.com/mmcloughlin/avo/build"
)

func main() {
	ConstraintExpr("!purego")
	genScalar()
	genConsts()
	genAVX512("encryptLanesAVX512", false)
	genAVX512("decryptLanesAVX512", true)
	genAVX2("encryptLanesAVX2", false)
	genAVX2("decryptLanesAVX2", true)
	genBlocks("encryptBlocksAVX512", true, false)
	genBlocks("decryptBlocksAVX512", true, true)
	genBlocks("encryptBlocksAVX2", false, false)
	genBlocks("decryptBlocksAVX2", false, true)
	Generate()
}

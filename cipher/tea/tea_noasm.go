//go:build !amd64 || purego

package tea

// hasChainAsm reports that this build has no assembly chain.
const hasChainAsm = false

// useChainAsm is never read without assembly; tests may set it.
var useChainAsm = false

func encryptChain(k *[4]uint32, buf []byte) { encryptChainGeneric(k, buf) }

func decryptChain(k *[4]uint32, dst, src []byte) { decryptChainGeneric(k, dst, src) }

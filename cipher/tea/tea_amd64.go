//go:build amd64 && !purego

package tea

// hasChainAsm reports that this build has the assembly single-message
// chain (plain amd64, no CPU feature needed).
const hasChainAsm = true

// useChainAsm selects it; tests switch it off to run the generic code.
var useChainAsm = true

func encryptChain(k *[4]uint32, buf []byte) {
	if useChainAsm {
		encryptChainAsm(k, buf[:len(buf)&^7])
		return
	}
	encryptChainGeneric(k, buf)
}

func decryptChain(k *[4]uint32, dst, src []byte) {
	if useChainAsm {
		n := min(len(dst), len(src)) &^ 7
		decryptChainAsm(k, dst[:n], src[:n])
		return
	}
	decryptChainGeneric(k, dst, src)
}

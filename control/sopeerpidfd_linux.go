//go:build linux && (amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64 || ppc64le || s390x)

package control

// soPeerPIDFD is SO_PEERPIDFD of the architectures that take the generic
// socket option numbers (x/sys does not define it for all of them yet).
const soPeerPIDFD = 77

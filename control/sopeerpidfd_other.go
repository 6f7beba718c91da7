//go:build linux && !(amd64 || arm64 || 386 || arm || riscv64 || loong64 || ppc64 || ppc64le || s390x)

package control

// soPeerPIDFD is unknown here; peerPIDFD falls back to pidfd_open.
const soPeerPIDFD = 0

//go:build amd64 && linux && !purego

package kernels

import "syscall"

// Linux keeps AMX's tile data (8 KiB of state a thread) out of a process
// until it asks for it: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA), once
// for the whole process (the kernel then saves the tiles with the other
// registers on context switches and signals; Go's signal stacks, 32 KiB,
// hold the larger frames). Without the permission the first AMX
// instruction is an illegal instruction.
const (
	archReqXCompPerm  = 0x1023
	xfeatureXTileData = 18
)

// osPermitsAMX asks for the permission and says whether it was given.
func osPermitsAMX() bool {
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0)
	return errno == 0
}

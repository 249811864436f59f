package recorder

import (
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerIsOwner checks the connecting process's user (SO_PEERCRED): besides
// the socket directory's 0700, a second line against other users.
func peerIsOwner(c net.Conn) bool {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return int(cred.Uid) == os.Getuid()
}

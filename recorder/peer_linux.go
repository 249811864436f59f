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

// acceptPending takes the connections waiting in ln's backlog, without
// waiting for more (the socket is non-blocking: accept4 says EAGAIN when
// none is left).
func acceptPending(ln net.Listener) []net.Conn {
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		return nil
	}
	raw, err := ul.SyscallConn()
	if err != nil {
		return nil
	}
	var fds []int
	raw.Control(func(fd uintptr) {
		for {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			if err != nil {
				return
			}
			fds = append(fds, nfd)
		}
	})
	var conns []net.Conn
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "marks connection")
		c, err := net.FileConn(f)
		f.Close()
		if err == nil {
			conns = append(conns, c)
		}
	}
	return conns
}

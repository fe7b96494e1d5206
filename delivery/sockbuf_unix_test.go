//go:build unix

package delivery

import "syscall"

// smallSocketBuffers sets a socket's send and receive buffers to 64 KiB,
// so that a test's large write is sure to outgrow them, however large the
// machine's defaults (net.ipv4.tcp_wmem may allow 16 MiB or more).
func smallSocketBuffers(_, _ string, c syscall.RawConn) error {
	var err error
	if cerr := c.Control(func(fd uintptr) {
		if err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 64<<10); err == nil {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		}
	}); cerr != nil {
		return cerr
	}
	return err
}

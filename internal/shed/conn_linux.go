package shed

import (
	"time"

	"golang.org/x/sys/unix"
)

// TCP states (include/net/tcp_states.h) in which the peer has closed or
// reset the connection.
const (
	tcpClose     = 7
	tcpCloseWait = 8
	tcpLastAck   = 9
)

// tcpState reads TCP_INFO of the connection fd: its state, and the
// milliseconds since it last received data.
func tcpState(fd uintptr) connState {
	info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return connState{} // not TCP (a Unix socket, a test pipe): unknown
	}
	st := connState{waited: time.Duration(info.Last_data_recv) * time.Millisecond, known: true}
	switch info.State {
	case tcpClose, tcpCloseWait, tcpLastAck:
		st.gone = true
	}
	return st
}

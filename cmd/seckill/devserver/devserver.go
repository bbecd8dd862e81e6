// Package devserver runs the servers `seckill dev` brings along: redis-server
// child processes (append-only persistence in the data directory, so a
// restarted dev process finds its sale where it left it, the file kept
// compact so that it loads fast) and the embedded Kafka-protocol broker
// kfake (also persisted in the data directory, its log trimmed of what the
// consumer group has committed). `seckill broker` runs the same broker as a
// process of its own.
package devserver

import (
	"errors"
	"net"
	"time"
)

// FreePort asks the kernel for a free port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitTCP(addr string, d time.Duration, exited <-chan struct{}) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

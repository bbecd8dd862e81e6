package testenv

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// RedisInfo reads one INFO section from the redis-server at addr over a
// bare RESP connection (no client handshake: the only command it adds is
// this INFO, which a tool counting commands takes out again).
func RedisInfo(addr, section string) (string, error) {
	return (&Redis{Addr: addr}).Info(section)
}

// RedisPID is the process id of the redis-server at addr (INFO server).
func RedisPID(addr string) (int, error) { return (&Redis{Addr: addr}).pid() }

// Info reads one INFO section from the server over a bare connection of
// its own, over TLS and after AUTH where r has them.
func (r *Redis) Info(section string) (string, error) {
	c, err := r.dial(time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	if err := r.auth(c, br); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section); err != nil {
		return "", err
	}
	head, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("INFO %s on %s: %q", section, r.Addr, strings.TrimSpace(head)) // e.g. -LOADING
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return "", fmt.Errorf("INFO %s on %s: %q", section, r.Addr, strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// pid is the server's process id as it reports it (INFO server).
func (r *Redis) pid() (int, error) {
	s, err := r.Info("server")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO server on %s: no process_id", r.Addr)
}

// RedisCPU is the CPU time the redis-server at addr has used so far
// (RedisInfo's INFO cpu; see InfoCPU).
func RedisCPU(addr string) (time.Duration, error) {
	s, err := RedisInfo(addr, "cpu")
	if err != nil {
		return 0, err
	}
	return InfoCPU(s)
}

// InfoCPU is used_cpu_user + used_cpu_sys of an INFO cpu reply: the
// server's own getrusage, to the microsecond (/proc counts in clock ticks
// of 10 ms, too coarse for a few thousand commands), without the children
// (a background save).
func InfoCPU(info string) (time.Duration, error) {
	var sum float64
	n := 0
	for _, l := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", l, err)
			}
			sum += f
			n++
		}
	}
	if n != 2 {
		return 0, fmt.Errorf("INFO cpu without used_cpu_user and used_cpu_sys: %q", info)
	}
	return time.Duration(sum * float64(time.Second)), nil
}

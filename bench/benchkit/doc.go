// Package benchkit is what the load tools under bench/ share: child
// processes started and stopped by PID (procs.go), wrk runs and their
// reports (wrk.go), a process' CPU time from /proc and a redis-server's
// INFO (cpu.go), and the reference servers they measure against
// (servers.go). The tools under bench/ use it; nothing outside bench/
// does.
package benchkit

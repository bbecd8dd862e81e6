// Command seckill runs the flash-sale system: `seckill dev` (everything in
// one process on embedded servers), or the production parts `edge`,
// `engine`, `consumer`, plus the on-call CLI `admin` and `reconcile`.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: seckill <command> [flags]

commands:
  dev        edge + engine + consumer in one process, with redis-server
             children, the embedded Kafka-protocol broker and SQLite
  edge       the public endpoint (+ admin listener), engine in-process or
             a sidecar (edge.engine / --engine)
  engine     the stock engine as a sidecar on a local socket (--listen)
  consumer   the Kafka consumer group that writes orders
  admin      on-call CLI for the admin API (seckill admin help)
  reconcile  compare Redis with the database per SKU [--repair] [--json]
  broker     the embedded Kafka-protocol broker as its own process (--listen, --data-dir)
  version    print the version

Every command takes --config FILE (YAML); every key can be overridden by
an environment variable SECKILL_<KEY_PATH> (edge.listen -> SECKILL_EDGE_LISTEN).
dev reads the file over its dev defaults (configs/dev.yaml, built in: with
no file it runs what make run runs); the other commands over the
production defaults.
`

var version = "dev"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "dev":
		err = runDev(args)
	case "edge":
		err = runEdge(args)
	case "engine":
		err = runEngine(args)
	case "consumer":
		err = runConsumer(args)
	case "broker":
		err = runBroker(args)
	case "reconcile":
		err = runReconcile(args, os.Stdout)
	case "admin":
		err = runAdmin(args, os.Stdout)
	case "version":
		fmt.Println(version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "seckill: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "seckill %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

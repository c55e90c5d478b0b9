// Command seqbox is the seqbox command-line tool; see package seqboxcli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/seqbox/seqbox/cmd/seqbox/seqboxcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := seqboxcli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

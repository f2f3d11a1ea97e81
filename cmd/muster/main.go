// Command muster is the Muster lease broker.
//
//	muster serve [--addr HOST:PORT] [--data-dir DIR] [--config FILE] [--insecure-dev]
//	muster token     print a new random token and the sha256 line for the config
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/musterhq/muster/cmd/muster/app"
)

const usage = `usage:
  muster serve [--addr HOST:PORT] [--data-dir DIR] [--config FILE] [--insecure-dev]
  muster token
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:]))
	case "token":
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		tok := hex.EncodeToString(secret)
		sum := sha256.Sum256([]byte(tok))
		fmt.Printf("token:  %s\nsha256: %s\n", tok, hex.EncodeToString(sum[:]))
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}

func serve(args []string) int {
	m := app.NewMain()
	if err := m.ParseFlags(args, os.Stderr); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := m.Open(); err != nil {
		fmt.Fprintln(os.Stderr, "muster:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- m.Wait() }()
	select {
	case <-ctx.Done():
	case err := <-done:
		fmt.Fprintln(os.Stderr, "muster:", err)
		return 1
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(shutdown); err != nil {
		fmt.Fprintln(os.Stderr, "muster: shutdown:", err)
		return 1
	}
	return 0
}
